"""MLA attention (DeepSeek-V3, Kimi-K2) from a profile's measured module times.

aiconfigurator-core times vLLM's whole MLA attention layer -- the q_a/q_b and kv_a
projections, the absorbed kv_b, attention over the compressed latent cache and o_proj --
per (architecture, KV-cache dtype, projection GEMM format, heads per GPU), in two phases
(calibrate/aiconfigurator_curves.py): ``context`` over batch x prompt length (no cached
prefix) and ``generation`` over batch x KV length. So an MLA layer's attention and its
projections are priced together, from these, and not from the GEMM/attention tables.

* A prefill chunk of ``q`` tokens after ``p`` cached ones costs C(p + q) - C(p), C(n) the
  measured prefill of n tokens (causal work is cumulative: the chunk adds the rows the
  longer prefill has beyond the shorter one), and at least C(q). Requests of one step add.
* ``n`` decoding requests at mean context ``s`` cost G(n, s) (bilinear in log2 batch and
  log2 length; beyond the measured lengths in proportion to length).
"""

from __future__ import annotations

import numpy as np

from sim.cost.profile.model_file import CurveTable
from traces.errors import InputError


class _Grid:
    """One curve of a 2-D table: log2 ms on (log2 batch, log2 length) nodes."""

    def __init__(self, table: CurveTable, key: str, what: str):
        idx = table.index()
        if key not in idx:
            have = ", ".join(sorted(table.curves))
            raise InputError(f"{what}: the profile has no MLA timing for {key} "
                             f"(architecture|KV dtype|GEMM format|heads per GPU); it has {have}")
        ms = table.ms()[idx[key]]
        self.b = np.log2(np.asarray(table.axes[0].nodes, dtype=np.float64))
        self.n = np.log2(np.maximum(np.asarray(table.axes[1].nodes, dtype=np.float64), 1.0))
        # a node the collector missed: the nearest measured length of the same batch
        lg = np.log2(ms * 1e-3)
        for i in range(lg.shape[0]):
            ok = np.isfinite(lg[i])
            if not ok.any():
                lg[i] = lg[i - 1] if i else np.nan
            elif not ok.all():
                lg[i] = np.interp(self.n, self.n[ok], lg[i][ok])
        if not np.isfinite(lg).all():
            raise InputError(f"{what}: MLA curve {key} has a batch size with no measurement")
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


class MlaModule:
    """Seconds of one MLA attention layer (projections included) for a step's requests."""

    def __init__(self, context: CurveTable, generation: CurveTable, key: str, what: str):
        self.ctx = _Grid(context, key, what)
        self.gen = _Grid(generation, key, what)
        self._memo: dict[tuple[int, int], float] = {}

    def prefill_one(self, q: int, p: int) -> float:
        key = (q, p)
        t = self._memo.get(key)
        if t is None:
            full = self.ctx.seconds(1, p + q)
            t = max(full - self.ctx.seconds(1, p), self.ctx.seconds(1, q)) if p else full
            if len(self._memo) < 1_000_000:
                self._memo[key] = t
        return t

    def prefill(self, qs, ps) -> float:
        return sum(self.prefill_one(int(q), int(p)) for q, p in zip(qs, ps))

    def decode(self, n: int, mean_ctx: float) -> float:
        return self.gen.seconds(n, mean_ctx + 1.0)
