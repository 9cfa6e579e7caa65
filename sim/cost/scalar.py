"""Scalar twins of the fitted model's numpy pricing, for one step or a short decode run.

A numpy call on one value costs about a microsecond of overhead; pricing a step is a few
dozen of them. These functions do the same IEEE operations in the same order on Python
floats, so they return the same doubles, bit for bit (tests/cost/test_scalar.py checks
them against numpy on random inputs):

* ``interp1``: ``np.interp`` (numpy's algorithm: bisection, slope times offset plus the
  left value, exact at the nodes, clamped outside);
* ``bilinear1``: ``sim.cost.fitted._bilinear`` at one point;
* ``exp2`` and the run path's ``log2`` stay numpy's (called on a float): libm's pow and
  numpy's exp2 differ in the last bit for about 0.1 % of inputs.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from calibrate import grid

_exp2, _log2 = np.exp2, np.log2


def interp1(x: float, xs: list[float], ys: list[float]) -> float:
    """``np.interp(x, xs, ys)`` for one finite ``x`` (xs ascending)."""
    if x > xs[-1]:
        return ys[-1]
    if x < xs[0]:
        return ys[0]
    j = bisect_right(xs, x) - 1
    if j == len(xs) - 1 or xs[j] == x:
        return ys[j]
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return slope * (x - xs[j]) + ys[j]


def bilinear1(table: tuple, x0: float, x1: float) -> float:
    """``_bilinear(table, x0, x1)`` at one point; ``table`` = (values as nested lists,
    [nodes0, nodes1] as lists)."""
    vals, (n0, n1) = table
    if len(n1) == 1:
        return interp1(x0, n0, [row[0] for row in vals])
    if len(n0) == 1:
        return interp1(x1, n1, vals[0])
    i = min(max(bisect_right(n0, x0) - 1, 0), len(n0) - 2)
    j = min(max(bisect_right(n1, x1) - 1, 0), len(n1) - 2)
    a = min(max((x0 - n0[i]) / (n0[i + 1] - n0[i]), 0.0), 1.0)
    b = min(max((x1 - n1[j]) / (n1[j + 1] - n1[j]), 0.0), 1.0)
    return ((1 - a) * ((1 - b) * vals[i][j] + b * vals[i][j + 1])
            + a * ((1 - b) * vals[i + 1][j] + b * vals[i + 1][j + 1]))


class ScalarPricing:
    """Mixed into FittedCost (ops profiles): its attributes heads, kv_heads, head_dim,
    attn_e, kv_e, norm, layers, dec_grid/dec_nodes, pre_grid/pre_nodes."""

    def _dec_table(self, n: int) -> tuple[list[float], list[float], np.ndarray]:
        """(kv-length nodes, log2 ratios, the same as an array) for ``n`` sequences."""
        t = self._dec_lists.get(n)
        if t is None:
            ys = self._dec_memo.get(n)
            if ys is None:
                ys = self._dec_memo[n] = grid.restrict(self.dec_grid, self.dec_nodes,
                                                       {0: np.log2(n)})[0]
            t = self._dec_lists[n] = (self.dec_nodes[1].tolist(), ys.tolist(), ys)
        return t

    def _decode_one(self, n: int, ctx: int) -> float:
        """``_decode`` for one step, in Python floats (math.log2, as single steps always
        were priced; numpy's exp2)."""
        xs, ys, _ = self._dec_table(n)
        kv_len = ctx / n + 1.0
        return self._decode_roof(n, kv_len) * float(_exp2(interp1(math.log2(kv_len), xs, ys)))

    def _decode_roof(self, n: int, kv_len: float) -> float:
        b, hd = float(n), float(self.heads) * self.head_dim
        kvd = float(self.kv_heads) * self.head_dim
        flops = 4.0 * hd * b * kv_len
        nbytes = b * (self.kv_e * 2 * kvd * kv_len + self.attn_e * 2 * hd)
        return max(flops / self.norm.peak_flops, nbytes / self.norm.mem_bandwidth) \
            + self.norm.floor_s

    def decode_run_times(self, n: int, ctx0: int, k: int, fixed: float) -> list[float]:
        """``layers * _decode(n, ctx0 + n * arange(k)) + fixed`` as floats: numpy's log2 and
        exp2 (on arrays), the rest in the vectorised path's order of operations."""
        xs, ys, _ = self._dec_table(n)
        b, hd = float(n), float(self.heads) * self.head_dim
        kvd, norm = float(self.kv_heads) * self.head_dim, self.norm
        c_flops, c_kv, c_act = 4.0 * hd * b, self.kv_e * 2 * kvd, self.attn_e * 2 * hd
        peak, bw, floor, layers = norm.peak_flops, norm.mem_bandwidth, norm.floor_s, self.layers
        kv = [(ctx0 + n * j) / n + 1.0 for j in range(k)]
        x0, x1 = xs[0], xs[-1]
        ratios = []
        for x in _log2(kv).tolist():  # interp1, inlined
            if x >= x1:
                ratios.append(ys[-1])
            elif x <= x0:
                ratios.append(ys[0])
            else:
                j = bisect_right(xs, x) - 1
                ratios.append(ys[j] if xs[j] == x else
                              (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j]) * (x - xs[j]) + ys[j])
        out = []
        for s, ratio in zip(kv, _exp2(ratios).tolist()):
            flops, nbytes = c_flops * s, b * (c_kv * s + c_act)
            r = (flops / peak if flops / peak > nbytes / bw else nbytes / bw) + floor
            out.append(layers * (r * ratio) + fixed)
        return out

    def _prefill_one(self, q: int, p: int) -> float:
        """``_prefill_batch`` of one request (q, p), in Python floats."""
        sub = self._pre_lists
        if sub is None:
            vals, nodes = grid.restrict(self.pre_grid, self.pre_nodes, {0: np.log2(1)})
            sub = self._pre_lists = (vals.tolist(), [x.tolist() for x in nodes])
        qf, pf = float(q), float(p)
        hd, kvd = float(self.heads) * self.head_dim, float(self.kv_heads) * self.head_dim
        flops = 4.0 * hd * 1.0 * (qf * pf + qf * (qf + 1) / 2)
        nbytes = 1.0 * (self.kv_e * 2 * kvd * (pf + qf) + self.attn_e * 2 * hd * qf)
        r = max(flops / self.norm.peak_flops, nbytes / self.norm.mem_bandwidth) \
            + self.norm.floor_s / 1
        x0, x1 = float(_log2(qf)), float(_log2(1 + pf / qf))
        return r * float(_exp2(bilinear1(sub, x0, x1)))
