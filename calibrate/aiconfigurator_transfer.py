"""A fused-MoE backend's curve for a shape its table did not time, transferred from that
backend's timing of another shape.

Why: InferenceX ran gpt-oss-120b on H100 and H200 with ``VLLM_MXFP4_USE_MARLIN=1`` (vLLM's
Marlin MoE: 4-bit weights dequantised to bf16 in the kernel), while aiconfigurator-core's
vLLM tables time gpt-oss's shape (2880 x 2880, 128 experts, top-4) on those GPUs only in
the OpenAI Triton kernel, and Marlin only for two other shapes: int4 (Kimi-K2's 7168 x 2048,
384 experts, top-8; the compressed-tensors WNA16 kernel) and mxfp4 (3584 x 3072, 896
experts, top-16), vLLM 0.24.0 tables. At 8,192 tokens on H200 the Triton kernel runs
gpt-oss's experts at 406 TFLOP/s, Marlin both other shapes at 200-220: pricing Marlin
deployments from the Triton curve made their prefills too fast.

The rule (``transfer``): at equal tokens per expert (``tokens x topk / experts``) two shapes
of one kernel run their expert GEMMs at the same arithmetic intensity, so above the kernel
chain's fixed cost the time scales with the expert weights a GPU holds (``experts x hidden
x intermediate``, the same TP/EP split):

    t_target(n) = F + (t_donor(n x (k / E) x (E_d / k_d)) - F) x (E H I) / (E_d H_d I_d)

with F the donor kernel's least time at one token over the splits kept (tp x ep <= 8): the
launches and routing bookkeeping, which do not scale with the weights.

The donor is the int4 Marlin curve. Checked on measured curves (NOTES.md, 2026-12-06 third
session; tests/calibrate/test_aiconfigurator_transfer.py): on L40S and RTX PRO 6000, whose
tables time gpt-oss's own shape in Marlin, the int4 curve transferred gives a median 0.88-
0.97x the measured times per MoE TP (1-8) from 16 tokens up (0.74-1.66 at single points;
0.86-2.81 below 16 tokens, where the fixed cost dominates); on H100 and H200, transferred
to the mxfp4 Marlin shape, a median 0.86-1.01x (0.64-1.61). The mxfp4 curve as donor agrees
within 10 % from 1,024 tokens up, but its one-token floor is 67 us against the int4
kernel's 40 (gpt-oss's Triton kernel: 39-41): with it the gpt-oss H100/H200 rows' decode
steps came out 20-35 % over the measured TPOT at 4-8 clients.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# weight format -> (backend, donor format): the backend's curve of the donor format is
# transferred to the format's shapes
TRANSFER = {"w4a16_mxfp4": ("marlin", "int4_wo")}


def transfer(tokens: np.ndarray, donor_tokens: np.ndarray, donor_ms: np.ndarray,
             donor_shape: tuple[int, int, int, int], floor_ms: float,
             shape: tuple[int, int, int, int]) -> np.ndarray:
    """Times (ms) of SHAPE (hidden, intermediate, experts, top-k) at TOKENS from the donor
    curve of DONOR_SHAPE (module docstring). Between the donor's measured token counts the
    time is interpolated in log-log; beyond the largest it grows in proportion to tokens,
    below the smallest it is the smallest's (as sim/cost/moe.py MoeCurve prices)."""
    h, i, e, k = shape
    dh, di, de, dk = donor_shape
    at = np.asarray(tokens, dtype=np.float64) * (k / e) * (de / dk)
    x, y = np.log(np.asarray(donor_tokens, np.float64)), np.log(np.asarray(donor_ms, np.float64))
    t = np.exp(np.interp(np.log(at), x, y))
    big = at > donor_tokens[-1]
    t = np.where(big, donor_ms[-1] * at / donor_tokens[-1], t)
    return floor_ms + (t - floor_ms) * (e * h * i) / (de * dh * di)


def transferred_rows(rows: pd.DataFrame, table: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """Rows of ``key@backend`` curves (TRANSFER) for the keys of ROWS (the kept curves, with
    ``key`` and ``backend`` columns) that lack one, from TABLE's (the newest moe_perf rows)
    timing of that backend for another shape of the format, same MoE TP / EP split and
    routing; and a note of what was transferred ("" when nothing)."""
    have = set(rows["key"])
    out, what = [], set()
    for fmt, (backend, donor_fmt) in TRANSFER.items():
        donors = table[(table["moe_dtype"] == donor_fmt) & (table["backend"] == backend)]
        if donors.empty:
            continue
        floor = donors[donors["num_tokens"] == donors["num_tokens"].min()] \
            .groupby("kernel_source")["latency"].min()
        mine = rows[(rows["moe_dtype"] == fmt) & ~rows["key"].str.contains("@")]
        for key, g in mine.groupby("key"):
            if f"{key}@{backend}" in have or g["backend"].iloc[0] == backend:
                continue
            r = g.iloc[0]
            shape = tuple(int(r[c]) for c in ("hidden_size", "inter_size", "num_experts", "topk"))
            split = (donors["moe_tp_size"] == r["moe_tp_size"]) & \
                (donors["moe_ep_size"] == r["moe_ep_size"]) & \
                (donors["distribution"] == r["distribution"])
            d = donors[split]
            if d.empty:
                continue
            kernel = d["kernel_source"].value_counts().index[0]
            d = d[d["kernel_source"] == kernel]
            dshape = tuple(int(d[c].iloc[0]) for c in
                           ("hidden_size", "inter_size", "num_experts", "topk"))
            curve = d.groupby("num_tokens")["latency"].median()
            tokens = np.sort(g["num_tokens"].unique())
            ms = transfer(tokens, curve.index.to_numpy(np.float64), curve.to_numpy(np.float64),
                          dshape, float(floor[kernel]), shape)
            name = f"{kernel} transferred from {'x'.join(map(str, dshape))}"
            out.append(pd.DataFrame({
                "key": f"{key}@{backend}", "num_tokens": tokens, "latency": ms,
                "kernel_source": name, "moe_dtype": fmt, "backend": backend}))
            what.add(f"{fmt} {backend} of {'x'.join(map(str, shape))} from {donor_fmt} "
                     f"{'x'.join(map(str, dshape))}")
    if not out:
        return None, ""
    note = ("; ".join(sorted(what)) + " (calibrate/aiconfigurator_transfer.py: equal tokens "
            "per expert, time above the kernel's one-token floor scaled by the expert weights)")
    return pd.concat(out, ignore_index=True), note
