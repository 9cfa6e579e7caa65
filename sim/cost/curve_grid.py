"""One curve of a measured batch x length table (a profile's ``CurveTable`` of two axes).

The MLA attention module (sim/cost/mla.py) and sliding-window attention
(sim/cost/fitted.py ``_sliding``) are timed by aiconfigurator-core over batch size x
sequence (or KV) length. A curve is read as log2 seconds on (log2 batch, log2 length)
nodes: bilinear between nodes, clamped in batch, and in proportion to length beyond the
longest measured one (the work grows with it). A node the collector missed takes the
nearest measured length of the same batch.
"""

from __future__ import annotations

import numpy as np

from sim.cost.profile.model_file import CurveTable
from traces.errors import InputError


class BatchLengthCurve:
    """Seconds at (batch, length) of the curve ``key`` of ``table``; ``kind`` names the
    timing in errors ("MLA", "sliding-window attention")."""

    def __init__(self, table: CurveTable, key: str, what: str, kind: str):
        idx = table.index()
        if key not in idx:
            have = ", ".join(sorted(table.curves)[:24]) + (", ..." if len(idx) > 24 else "")
            raise InputError(f"{what}: the profile has no {kind} timing for {key} "
                             f"({'|'.join(table.fields)}); it has {have}")
        ms = table.ms()[idx[key]]
        self.b = np.log2(np.asarray(table.axes[0].nodes, dtype=np.float64))
        self.n = np.log2(np.maximum(np.asarray(table.axes[1].nodes, dtype=np.float64), 1.0))
        lg = np.log2(ms * 1e-3)
        for i in range(lg.shape[0]):
            ok = np.isfinite(lg[i])
            if not ok.any():
                lg[i] = lg[i - 1] if i else np.nan
            elif not ok.all():
                lg[i] = np.interp(self.n, self.n[ok], lg[i][ok])
        if not np.isfinite(lg).all():
            raise InputError(f"{what}: {kind} curve {key} has a batch size with no measurement")
        self.v = lg

    def seconds(self, batch: float, length: float) -> float:
        """Time at (batch, length), bilinear in log-log, clamped in batch; proportional to
        length beyond the longest measured."""
        x0, x1 = np.log2(max(batch, 1.0)), np.log2(max(length, 1.0))
        top = self.n[-1]
        scale = 1.0
        if x1 > top:
            scale, x1 = float(np.exp2(x1 - top)), top
        i = int(np.clip(np.searchsorted(self.b, x0, side="right") - 1, 0, len(self.b) - 2))
        j = int(np.clip(np.searchsorted(self.n, x1, side="right") - 1, 0, len(self.n) - 2))
        a = float(np.clip((x0 - self.b[i]) / (self.b[i + 1] - self.b[i]), 0, 1))
        c = float(np.clip((x1 - self.n[j]) / (self.n[j + 1] - self.n[j]), 0, 1))
        v = self.v
        y = ((1 - a) * ((1 - c) * v[i, j] + c * v[i, j + 1])
             + a * ((1 - c) * v[i + 1, j] + c * v[i + 1, j + 1]))
        return float(np.exp2(y)) * scale


class MeasuredAttention:
    """Seconds of one attention layer from measured prefill (C: batch x prompt length) and
    decode (G: batch x KV length) curves of the same key.

    * A prefill chunk of ``q`` tokens after ``p`` cached ones costs C(p + q) - C(p), C(n)
      the measured prefill of n tokens (causal work is cumulative, also under a sliding
      window: the chunk adds the query rows the longer prefill has beyond the shorter
      one), and at least C(q). Requests of one step add.
    * ``n`` decoding requests at mean context ``s`` cost G(n, s + 1).
    """

    def __init__(self, context: CurveTable, generation: CurveTable, key: str, what: str,
                 kind: str):
        self.ctx = BatchLengthCurve(context, key, what, kind)
        self.gen = BatchLengthCurve(generation, key, what, kind)
        self._memo: dict[tuple[int, int], float] = {}

    def prefill_one(self, q: int, p: int) -> float:
        key = (q, p)
        t = self._memo.get(key)
        if t is None:
            full = self.ctx.seconds(1, p + q)
            t = max(full - self.ctx.seconds(1, p), self.ctx.seconds(1, q)) if p else full
            if len(self._memo) < 1 << 18:  # ~50 MB at most
                self._memo[key] = t
        return t

    def prefill(self, qs, ps) -> float:
        return sum(self.prefill_one(int(q), int(p)) for q, p in zip(qs, ps))

    def decode(self, n: int, mean_ctx: float) -> float:
        return self.gen.seconds(n, mean_ctx + 1.0)
