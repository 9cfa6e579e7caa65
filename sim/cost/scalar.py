"""Scalar twins of the fitted model's numpy pricing, for one step or a short decode run.

A numpy call on one value costs about a microsecond of overhead; pricing a step is a few
dozen of them. These functions do the same IEEE operations in the same order on Python
floats, so they return the same doubles, bit for bit (tests/cost/test_scalar.py checks
them against numpy on random inputs):

* ``interp1``: ``np.interp`` (numpy's algorithm: bisection, slope times offset plus the
  left value, exact at the nodes, clamped outside);
* ``bilinear1``: ``sim.cost.fitted._bilinear`` at one point;
* ``log2`` and ``exp2`` must be numpy's: numpy calls libm's log2/exp2 where its build has
  no vector versions of them, and then ``math.log2``/``math.exp2`` (the same libm) are the
  same functions, a hundred times cheaper on one value; where numpy vectorises them
  (SVML on AVX-512 machines) they may differ in the last bit. ``LIBM_IS_NUMPY`` checks
  which holds on this machine at import (20,000 values over the ranges priced) and the
  functions below use numpy's own otherwise. (``2.0 ** x`` is libm's pow, not exp2: it
  differs from both in about 0.1 % of inputs.)
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from sim.cost.base import decode_contexts
from sim.cost.profile import grid

SCALAR_RUN_MAX = 40  # decode runs up to this many steps are priced in Python floats
_NONE = np.zeros(0, dtype=np.int64)


def _libm_is_numpy() -> bool:
    rng = np.random.default_rng(20261201)
    lg = np.exp2(rng.uniform(-2.0, 24.0, 10_000))  # KV lengths, prompt sizes, ratios
    ex = rng.uniform(-8.0, 8.0, 10_000)  # log2 ratios of the fitted tables
    return (np.log2(lg).tolist() == [math.log2(x) for x in lg.tolist()]
            and np.exp2(ex).tolist() == [math.exp2(x) for x in ex.tolist()])


LIBM_IS_NUMPY = _libm_is_numpy()
if LIBM_IS_NUMPY:
    _log2_1, _exp2_1 = math.log2, math.exp2

    def _log2_list(xs: list[float]) -> list[float]:
        return [math.log2(x) for x in xs]

    def _exp2_list(xs: list[float]) -> list[float]:
        return [math.exp2(x) for x in xs]
else:
    def _log2_1(x: float) -> float:
        return float(np.log2(x))

    def _exp2_1(x: float) -> float:
        return float(np.exp2(x))

    def _log2_list(xs: list[float]) -> list[float]:
        return np.log2(xs).tolist()

    def _exp2_list(xs: list[float]) -> list[float]:
        return np.exp2(xs).tolist()


def _ns(times: list[float]) -> list[int]:
    """sim.engine.clock.to_ns of step durations (all below 4.6e9 s: its clamp never applies)."""
    return [round(t * 1_000_000_000) for t in times]


def _async_overlap(host: float, times: list[float]) -> list[float]:
    """FittedCost._overlap of a graph decode run's step times with async scheduling, in
    floats (the same subtraction and comparison as numpy's, so the same values)."""
    return [k if (k := t - host) > host else host for t in times]


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


# the coefficients a pure decode step's constants read (ScalarPricing._pure): setting one
# (a test, the drafter's async_host) forgets them
_PURE_INPUTS = frozenset(("overhead", "over_req", "over_tok", "over_by_req", "async_host",
                          "eager_s", "graph_max"))


class ScalarPricing:
    """Mixed into FittedCost (ops profiles): its attributes heads, kv_heads, head_dim,
    attn_e, kv_e, norm, layers, dec_grid/dec_nodes, pre_grid/pre_nodes, _dec_memo,
    _pure_memo."""

    def __setattr__(self, name, value):
        if name in _PURE_INPUTS and self.__dict__.get("_pure_memo"):
            self._pure_memo.clear()
        super().__setattr__(name, value)

    def _pure(self, n: int) -> tuple[float, float, bool]:
        """(``_fixed``, ``_host_s``, ``_eager``) of a pure decode step of ``n`` requests:
        the same for every such step (its token and request counts are both ``n``), so
        computed once per batch size."""
        t = self._pure_memo.get(n)
        if t is None:
            t = self._pure_memo[n] = (self._fixed(n, n, _NONE, _NONE), self._host_s(n, n),
                                      self._eager(n))
        return t

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
            c_flops, c_kv = 4.0 * hd * b, self.kv_e * 2 * kvd
            # memory-bound at every KV length with room to spare: max(FLOPs/peak, bytes/bw)
            # is bytes/bw for sure (FLOPs/peak < bytes/bw / 2 for every length >= 0)
            bound = c_flops * self.norm.mem_bandwidth <= 0.5 * b * c_kv * self.norm.peak_flops
            t = self._dec_lists[n] = (self.dec_nodes[1].tolist(), ys.tolist(), b, c_flops,
                                      c_kv, self.attn_e * 2 * hd, bound)
        return t

    # ---- the fast core's pricing calls (sim/cost/base.py) --------------------------------
    def run_times(self, n, decode_ctx0, num_steps):
        fixed, host, eager = self._pure(n)
        if eager or (self.async_host and num_steps > SCALAR_RUN_MAX):  # numpy's path
            return self.shape_times(n, n, _NONE, _NONE, n, decode_ctx0, num_steps).tolist()
        if num_steps <= SCALAR_RUN_MAX:
            t = self.decode_run_times(n, decode_ctx0, num_steps, fixed)
            return _async_overlap(host, t) if self.async_host else t
        ctx = decode_contexts(decode_ctx0, n, num_steps)
        return (self.attn_layers * self._decode(n, ctx) + fixed).tolist()

    def run_ns(self, n, decode_ctx0, num_steps):
        fixed, host, eager = self._pure(n)
        if num_steps > SCALAR_RUN_MAX or eager:  # to_ns of the vectorised run
            t = self.shape_times(n, n, _NONE, _NONE, n, decode_ctx0, num_steps)
            return np.rint(np.minimum(t, 4.611686018427388e9) * 1e9).astype(np.int64).tolist()
        if self.async_host:
            return _ns(_async_overlap(host, self.decode_run_times(n, decode_ctx0, num_steps,
                                                                   fixed)))
        return self.decode_run_times(n, decode_ctx0, num_steps, fixed, to_ns=True)

    def shape_time1(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0):
        if total == reqs == num_decode and not len(prefill_q):  # pure decode (``_pure``)
            fixed, host, eager = self._pure(total)
            out = self.attn_layers * self._decode_one(num_decode, decode_ctx0) + fixed
            # FittedCost._with_host, its host and eager known
            return self._overlap(out - host, host, eager) if eager or self.async_host else out
        out = self._fixed(total, reqs, prefill_q, prefill_ctx)
        if num_decode:
            out = self.attn_layers * self._decode_one(num_decode, decode_ctx0) + out
        return self._with_host(out, total, reqs)  # as FittedCost.shape_times, in floats

    def _decode_one(self, n: int, ctx: int) -> float:
        """``_decode`` for one step, in Python floats (math.log2, as single steps always
        were priced; numpy's exp2)."""
        if self.mla is not None:
            return self.mla.decode(n, ctx / n)
        xs, ys, b, c_flops, c_kv, c_act, bound = self._dec_table(n)
        kv_len = ctx / n + 1.0
        norm = self.norm
        m = b * (c_kv * kv_len + c_act) / norm.mem_bandwidth
        if bound:  # memory-bound for sure (_dec_table)
            r = m + norm.floor_s
        else:
            a = c_flops * kv_len / norm.peak_flops
            r = (a if a > m else m) + norm.floor_s
        return r * _exp2_1(interp1(math.log2(kv_len), xs, ys))

    def decode_run_times(self, n: int, ctx0: int, k: int, fixed: float,
                         to_ns: bool = False) -> list:
        """``layers * _decode(n, ctx0 + n * arange(k)) + fixed`` as floats (``to_ns``:
        rounded to integer nanoseconds, as sim.engine.clock.to_ns does): numpy's log2 and
        exp2 (on arrays), the rest in the vectorised path's order of operations."""
        if self.mla is not None:
            t = [self.attn_layers * self.mla.decode(n, (ctx0 + n * j) / n) + fixed
                 for j in range(k)]
            return _ns(t) if to_ns else t
        xs, ys, b, c_flops, c_kv, c_act, bound = self._dec_table(n)
        norm = self.norm
        peak, bw, floor = norm.peak_flops, norm.mem_bandwidth, norm.floor_s
        layers = self.attn_layers
        kv = [(ctx0 + n * j) / n + 1.0 for j in range(k)]
        if bound:  # memory-bound (_dec_table): max(FLOPs/peak, bytes/bw) is bytes/bw
            c_flops = 0.0
        i = -1  # the segment of the table the whole run lies in (-1: none, or numpy's log2
        if LIBM_IS_NUMPY:  # is not libm's, which the one-pass form below calls)
            lo, hi = math.log2(kv[0]), math.log2(kv[-1])
            i = bisect_right(xs, lo) - 1
            if not (0 <= i < len(xs) - 1 and xs[i] < lo and hi < xs[i + 1]):
                i = -1
        if i < 0:
            ex = _exp2_list([interp1(x, xs, ys) for x in _log2_list(kv)])
            t = [layers * (((a if (a := c_flops * s / peak) > (m := b * (c_kv * s + c_act) / bw)
                             else m) + floor) * r) + fixed for s, r in zip(kv, ex)]
            return _ns(t) if to_ns else t
        # the whole run inside one segment of the table (the common case): one pass, with
        # exp2(sl * (log2(s) - xi) + yi) as np.interp's line through the segment
        sl, xi, yi = self._dec_slopes(n, xs, ys)[i], xs[i], ys[i]
        log2, exp2 = math.log2, math.exp2
        if bound:  # only the bytes term (a third fewer operations on the hot path)
            t = [layers * ((b * (c_kv * s + c_act) / bw + floor)
                           * exp2(sl * (log2(s) - xi) + yi)) + fixed for s in kv]
        else:
            t = [layers * (((a if (a := c_flops * s / peak) > (m := b * (c_kv * s + c_act) / bw)
                            else m) + floor) * exp2(sl * (log2(s) - xi) + yi)) + fixed
                 for s in kv]
        return _ns(t) if to_ns else t

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
            ratios = [_exp2_1(bilinear1(sub, _log2_1(q), _log2_1(1 + p / q)))]
        else:
            x0 = _log2_list(qf)
            x1 = _log2_list([1 + p / q for q, p in zip(qf, pf)])
            ratios = _exp2_list([bilinear1(sub, a, b) for a, b in zip(x0, x1)])
        total = 0.0
        for q, p, ratio in zip(qf, pf, ratios):
            a = c_flops * (q * p + q * (q + 1) / 2) / peak
            m = 1.0 * (c_kv * (p + q) + c_act * q) / bw
            total += ((a if a > m else m) + floor) * ratio
        return total
