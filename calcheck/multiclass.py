"""Views of multiclass predictions (SPEC §1): the top-label view used by T-Cal and top-label
metrics.  Pure numpy on validated arrays.
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray, IntArray


def top_label_view(probs: FloatArray, labels: IntArray) -> tuple[FloatArray, IntArray]:
    """Confidence max_k p_ik and correctness 1[argmax_k p_ik = c_i] (ties → lowest index).

    Parameters
    ----------
    probs : ndarray of shape (n, K)
        Class probabilities, rows summing to 1.
    labels : ndarray of shape (n,)
        True class indices in 0..K−1.

    Returns
    -------
    confidence : ndarray of shape (n,), float64
    correct : ndarray of shape (n,), int64
    """
    pred = np.argmax(probs, axis=1)          # numpy returns the first maximum: lowest index
    conf = probs[np.arange(probs.shape[0]), pred]
    return np.ascontiguousarray(conf, dtype=np.float64), (pred == labels).astype(np.int64)
