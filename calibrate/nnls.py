"""Non-negative least squares (Lawson and Hanson, "Solving Least Squares Problems", 1974,
ch. 23): min ||x @ c - y|| subject to c >= 0. Plain numpy; a few columns, many rows."""

from __future__ import annotations

import numpy as np


def nnls(x: np.ndarray, y: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """Coefficients c >= 0 minimising ||x c - y||_2. Columns are scaled internally."""
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    a = x / scale
    n = a.shape[1]
    passive = np.zeros(n, dtype=bool)
    c = np.zeros(n)
    for _ in range(max_iter or 3 * n + 10):
        grad = a.T @ (y - a @ c)
        free = ~passive & (grad > 1e-10 * max(1.0, float(np.abs(grad).max())))
        if not free.any():
            break
        passive[np.argmax(np.where(free, grad, -np.inf))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], y, rcond=None)[0]
            if (z[passive] > 0).all():
                c = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(c[neg] / (c[neg] - z[neg]))
            c = c + alpha * (z - c)
            passive &= c > 1e-12
            c[~passive] = 0.0
    return c / scale
