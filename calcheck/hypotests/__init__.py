"""Hypothesis tests: the exact binomial test (vectorized), and later T-Cal and classical tests."""
