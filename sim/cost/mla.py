"""MLA attention (DeepSeek-V3, Kimi-K2) from a profile's measured module times.

aiconfigurator-core times vLLM's whole MLA attention layer -- the q_a/q_b and kv_a
projections, the absorbed kv_b, attention over the compressed latent cache and o_proj --
per (architecture, KV-cache dtype, projection GEMM format, heads per GPU), in two phases
(calibrate/aiconfigurator_curves.py): ``context`` over batch x prompt length (no cached
prefix) and ``generation`` over batch x KV length. So an MLA layer's attention and its
projections are priced together, from these, and not from the GEMM/attention tables.

A prefill chunk and a batch of decodes are priced from the two curves as
sim/cost/curve_grid.py MeasuredAttention says (chunks by cumulative causal work).
"""

from __future__ import annotations

from sim.cost.curve_grid import MeasuredAttention
from sim.cost.profile.model_file import CurveTable


class MlaModule(MeasuredAttention):
    """Seconds of one MLA attention layer (projections included) for a step's requests."""

    def __init__(self, context: CurveTable, generation: CurveTable, key: str, what: str):
        super().__init__(context, generation, key, what, "MLA")
