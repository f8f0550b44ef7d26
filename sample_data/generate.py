"""Generate calcheck's bundled sample files (run from the repository root).

The TCE paper's §4.1 simulation (Matsubara et al., UAI 2023), drawn as the authors' code draws
it: y ~ Bernoulli(π), x | y ~ Normal(0.5·(2y − 1), 2).  A logistic model is fitted by maximum
likelihood on 14,000 training rows with prevalence π_train and scores 6,000 test rows drawn
with prevalence π_test.  When π_test = π_train the model is calibrated; otherwise it is not.

    python sample_data/generate.py      # rewrites sample_data/*.csv and *.parquet
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

N_TRAIN, N_TEST, SEED = 14_000, 6_000, 20231122
CASES = {  # name: (π_train, π_test)
    "calibrated_50": (0.50, 0.50),
    "miscalibrated_50": (0.50, 0.40),
    "calibrated_01": (0.01, 0.01),
    "miscalibrated_01": (0.01, 0.02),
}


def draw(rng: np.random.Generator, n: int, prevalence: float) -> tuple[np.ndarray, np.ndarray]:
    y = rng.binomial(1, prevalence, size=n)
    x = rng.normal(0.5 * (2 * y - 1), 2.0)
    return x, y


def fit_logistic(x: np.ndarray, y: np.ndarray, iters: int = 50) -> np.ndarray:
    """Newton–Raphson maximum likelihood for P(y=1|x) = 1/(1 + exp(−(b0 + b1·x)))."""
    X = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ beta))
        grad = X.T @ (y - p)
        hess = X.T @ (X * (p * (1 - p))[:, None])
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-12:
            break
    return beta


def main() -> None:
    out = Path(__file__).resolve().parent
    rng = np.random.default_rng(SEED)
    for name, (pi_train, pi_test) in CASES.items():
        x_tr, y_tr = draw(rng, N_TRAIN, pi_train)
        beta = fit_logistic(x_tr, y_tr)
        x, y = draw(rng, N_TEST, pi_test)
        score = 1.0 / (1.0 + np.exp(-(beta[0] + beta[1] * x)))
        df = pd.DataFrame({"x": np.round(x, 6), "score": np.round(score, 12), "label": y})
        df.to_csv(out / f"{name}.csv", index=False)
        df.to_parquet(out / f"{name}.parquet", index=False)
        print(f"{name}: beta={beta.round(4)}, n={len(df)}, prevalence={y.mean():.4f}")


if __name__ == "__main__":
    main()
