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
    attn_e, kv_e, norm, layers, dec_grid/dec_nodes, pre_grid/pre_nodes, _dec_memo."""

    def _dec_table(self, n: int) -> tuple:
        """Per ``n`` decoding sequences: (kv-length nodes, log2 ratios) as lists, then the
        constants of its roofline (b, 4 h d b, kv bytes per token, activation bytes)."""
        t = self._dec_lists.get(n)
        if t is None:
            ys = self._dec_memo.get(n)
            if ys is None:
                ys = self._dec_memo[n] = grid.restrict(self.dec_grid, self.dec_nodes,
                                                       {0: np.log2(n)})[0]
            b, hd = float(n), float(self.heads) * self.head_dim
            kvd = float(self.kv_heads) * self.head_dim
            t = self._dec_lists[n] = (self.dec_nodes[1].tolist(), ys.tolist(), b, 4.0 * hd * b,
                                      self.kv_e * 2 * kvd, self.attn_e * 2 * hd)
        return t

    def _decode_one(self, n: int, ctx: int) -> float:
        """``_decode`` for one step, in Python floats (math.log2, as single steps always
        were priced; numpy's exp2)."""
        xs, ys, b, c_flops, c_kv, c_act = self._dec_table(n)
        kv_len = ctx / n + 1.0
        norm = self.norm
        flops, nbytes = c_flops * kv_len, b * (c_kv * kv_len + c_act)
        a, m = flops / norm.peak_flops, nbytes / norm.mem_bandwidth
        r = (a if a > m else m) + norm.floor_s
        return r * float(_exp2(interp1(math.log2(kv_len), xs, ys)))

    def decode_run_times(self, n: int, ctx0: int, k: int, fixed: float,
                         to_ns: bool = False) -> list:
        """``layers * _decode(n, ctx0 + n * arange(k)) + fixed`` as floats (``to_ns``:
        rounded to integer nanoseconds, as sim.engine.clock.to_ns does): numpy's log2 and
        exp2 (on arrays), the rest in the vectorised path's order of operations."""
        xs, ys, b, c_flops, c_kv, c_act = self._dec_table(n)
        norm = self.norm
        peak, bw, floor, layers = norm.peak_flops, norm.mem_bandwidth, norm.floor_s, self.layers
        kv = [(ctx0 + n * j) / n + 1.0 for j in range(k)]
        x0, x1, slope = xs[0], xs[-1], self._dec_slopes(n, xs, ys)
        ratios, i = [], 0
        for x in _log2(kv).tolist():  # interp1 inlined; x grows, so the segment i does too
            if x >= x1:
                ratios.append(ys[-1])
            elif x <= x0:
                ratios.append(ys[0])
            else:
                while xs[i + 1] <= x:
                    i += 1
                ratios.append(ys[i] if xs[i] == x else slope[i] * (x - xs[i]) + ys[i])
        out = []
        if to_ns:  # durations below 4.6e9 s: to_ns's clamp never applies
            for s, ratio in zip(kv, _exp2(ratios).tolist()):
                a, m = c_flops * s / peak, b * (c_kv * s + c_act) / bw
                out.append(round((layers * (((a if a > m else m) + floor) * ratio) + fixed)
                                 * 1_000_000_000))
            return out
        for s, ratio in zip(kv, _exp2(ratios).tolist()):
            a, m = c_flops * s / peak, b * (c_kv * s + c_act) / bw
            out.append(layers * (((a if a > m else m) + floor) * ratio) + fixed)
        return out

    def _dec_slopes(self, n: int, xs: list[float], ys: list[float]) -> list[float]:
        """np.interp's slope of each segment of ``n``'s table (the same division)."""
        t = self._dec_slope_memo.get(n)
        if t is None:
            t = self._dec_slope_memo[n] = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
                                           for i in range(len(xs) - 1)]
        return t

    def _pre_table(self, k: int) -> tuple:
        """The prefill table restricted to ``k`` sequences, as nested lists."""
        sub = self._pre_lists.get(k)
        if sub is None:
            vals, nodes = grid.restrict(self.pre_grid, self.pre_nodes, {0: np.log2(k)})
            sub = self._pre_lists[k] = (vals.tolist(), [x.tolist() for x in nodes])
        return sub

    def _prefill_few(self, qs, ps) -> float:
        """``_prefill_batch`` of fewer than 8 requests in Python floats (numpy sums fewer
        than 8 values one after another, from 0, as ``sum`` does)."""
        k = len(qs)
        sub = self._pre_table(k)
        hd, kvd = float(self.heads) * self.head_dim, float(self.kv_heads) * self.head_dim
        c_flops, c_kv, c_act = 4.0 * hd * 1.0, self.kv_e * 2 * kvd, self.attn_e * 2 * hd
        norm = self.norm
        peak, bw, floor = norm.peak_flops, norm.mem_bandwidth, norm.floor_s / k
        qf, pf = [float(q) for q in qs], [float(p) for p in ps]
        if k == 1:  # numpy's log2/exp2 on one float: cheaper than on a list
            q, p = qf[0], pf[0]
            ratios = [float(_exp2(bilinear1(sub, float(_log2(q)), float(_log2(1 + p / q)))))]
        else:
            x0 = _log2(qf).tolist()
            x1 = _log2([1 + p / q for q, p in zip(qf, pf)]).tolist()
            ratios = _exp2([bilinear1(sub, a, b) for a, b in zip(x0, x1)]).tolist()
        total = 0.0
        for q, p, ratio in zip(qf, pf, ratios):
            a = c_flops * (q * p + q * (q + 1) / 2) / peak
            m = 1.0 * (c_kv * (p + q) + c_act * q) / bw
            total += ((a if a > m else m) + floor) * ratio
        return total
