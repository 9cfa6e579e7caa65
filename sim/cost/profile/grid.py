"""Tensor-product piecewise-linear tables: evaluation (pure numpy) and least-squares fit.

A table maps D coordinates (already transformed, e.g. log2 of a size) to one value through
multilinear interpolation between grid nodes; outside the node range each coordinate is
clamped to the edge node (constant extrapolation). The fitted cost model only evaluates;
``fit_grid`` (used by ``calibrate.fit``) solves for node values from scattered samples:

    minimise  sum_i (table(x_i) - v_i)^2  +  smooth * sum_axes ||k-th difference||^2

The smoothness term fills nodes that no sample touches (a held-out grid point, a corner the
profile never measured) from their neighbours, so the fit never needs a complete grid.
Solved by preconditioned conjugate gradients on the normal equations, with the sparse
design matrix (2^D non-zeros per sample) applied through ``np.bincount``.
"""

from __future__ import annotations

import itertools

import numpy as np


def corner_weights(nodes: list[np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat node index [N, 2^L], weight [N, 2^L]) of the corners of each point's grid cell.

    ``x`` is [N, D]; coordinates outside an axis's node range clamp to its edge node.
    A one-node axis contributes weight 1 to that node.
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = x.shape[0]
    shape = tuple(len(ax) for ax in nodes)
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
    live = [d for d, ax in enumerate(nodes) if len(ax) > 1]  # one-node axes add nothing
    lo_idx, frac = {}, {}
    for d in live:
        ax = nodes[d]
        i = np.clip(np.searchsorted(ax, x[:, d], side="right") - 1, 0, len(ax) - 2)
        lo_idx[d] = i
        frac[d] = np.clip((x[:, d] - ax[i]) / (ax[i + 1] - ax[i]), 0.0, 1.0)
    idx = np.zeros((n, 2 ** len(live)), dtype=np.int64)
    w = np.ones((n, 2 ** len(live)))
    for c, bits in enumerate(itertools.product((0, 1), repeat=len(live))):
        for d, b in zip(live, bits):
            idx[:, c] += (lo_idx[d] + b) * strides[d]
            w[:, c] *= frac[d] if b else 1.0 - frac[d]
    return idx, w


def evaluate(values: np.ndarray, nodes: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    """Multilinear interpolation of the node ``values`` (shape = node counts) at ``x`` [N, D]."""
    idx, w = corner_weights(nodes, x)
    return (w * values.ravel()[idx]).sum(axis=1)


def restrict(values: np.ndarray, nodes: list[np.ndarray],
             fixed: dict[int, float]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The table on the remaining axes with axes ``fixed`` {axis: coordinate} held constant.

    Exact: a multilinear table restricted to an axis-aligned slice is the multilinear table
    over the free axes' nodes. Lets a caller pre-reduce a table to one model's heads etc.
    """
    free = [d for d in range(len(nodes)) if d not in fixed]
    mesh = np.meshgrid(*[nodes[d] for d in free], indexing="ij")
    pts = np.empty((mesh[0].size if mesh else 1, len(nodes)))
    for j, d in enumerate(free):
        pts[:, d] = mesh[j].ravel()
    for d, c in fixed.items():
        pts[:, d] = c
    sub = evaluate(values, nodes, pts).reshape([len(nodes[d]) for d in free])
    return sub, [nodes[d] for d in free]


def _diff_t(y: np.ndarray, axis: int, order: int) -> np.ndarray:
    """Adjoint of ``np.diff(., n=order, axis)``: full convolution with the reversed stencil."""
    pad = [(0, 0)] * y.ndim
    pad[axis] = (order, order)
    return np.diff(np.pad(y, pad), n=order, axis=axis) * (-1) ** order


def _reg_diag(shape: tuple[int, ...], order: int) -> np.ndarray:
    """Diagonal of sum_axes D_a^T D_a (``order``-th differences), for the preconditioner."""
    stencil = np.array([1.0, -1.0]) if order == 1 else np.array([1.0, -2.0, 1.0])
    out = np.zeros(shape)
    for a, n in enumerate(shape):
        if n <= order:
            continue
        d = np.zeros(n)
        for r in range(n - order):  # row r of D touches nodes r .. r + order
            d[r:r + order + 1] += stencil**2
        view = [1] * len(shape)
        view[a] = n
        out = out + d.reshape(view)
    return out


def fit_grid(nodes: list[np.ndarray], x: np.ndarray, v: np.ndarray, smooth: float = 1e-3,
             order: int = 2, ridge: float = 1e-6, iters: int = 4000,
             tol: float = 1e-8) -> np.ndarray:
    """Node values (shape = node counts) of the smoothed least-squares table through (x, v).

    ``smooth`` weighs the ``order``-th difference penalty (1: neighbours pull a node toward
    their level, so an unmeasured region takes the nearby measured value; 2: toward their
    trend, which extrapolates it) against one sample's squared error; ``ridge`` (toward the
    sample mean) keeps the system definite where nothing constrains it.
    """
    shape = tuple(len(ax) for ax in nodes)
    m = int(np.prod(shape))
    idx, w = corner_weights(nodes, x)
    v = np.asarray(v, dtype=np.float64)
    mean = float(v.mean())
    r_data = v - mean  # solve for the deviation from the mean (the ridge pulls toward 0)
    axes = [a for a, n in enumerate(shape) if n > order]

    def normal(z: np.ndarray) -> np.ndarray:
        az = (w * z[idx]).sum(axis=1)
        out = np.bincount(idx.ravel(), (w * az[:, None]).ravel(), minlength=m)
        zg = z.reshape(shape)
        reg = sum((_diff_t(np.diff(zg, n=order, axis=a), a, order) for a in axes),
                  np.zeros(shape))
        return out + smooth * reg.ravel() + ridge * z

    rhs = np.bincount(idx.ravel(), (w * r_data[:, None]).ravel(), minlength=m)
    diag = np.bincount(idx.ravel(), (w * w).ravel(), minlength=m)
    diag = diag + smooth * _reg_diag(shape, order).ravel() + ridge
    z = np.zeros(m)
    r = rhs - normal(z)
    p = r / diag
    rz = float(r @ p)
    stop = tol * max(float(rhs @ rhs), 1e-300)
    for _ in range(iters):
        if rz == 0.0:  # the residual is zero already (e.g. all data on the start): done
            break
        q = normal(p)
        alpha = rz / float(p @ q)
        z += alpha * p
        r -= alpha * q
        if float(r @ r) < stop:
            break
        s = r / diag
        rz_new = float(r @ s)
        p = s + (rz_new / rz) * p
        rz = rz_new
    return (z + mean).reshape(shape)
