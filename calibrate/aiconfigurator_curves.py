"""Import aiconfigurator-core's measured vLLM fused-MoE, MLA and sliding-window attention times
as ``CurveTable``s.

``systems/data/<system>/moe/vllm/<version>/moe_perf.parquet`` holds one fused-MoE layer
(vLLM's ``FusedMoE``: token permutation, the gate+up and down expert GEMMs, activation and
the weighted combine; routing and the all-reduce after the layer excluded) timed on one GPU
per (``moe_dtype``, ``num_tokens``, ``hidden_size``, ``inter_size``, ``topk``,
``num_experts``, ``moe_tp_size``, ``moe_ep_size``, ``distribution``). The shapes are real
models' (Qwen3-MoE, MiniMax-M2, gpt-oss, DeepSeek-V3 / Kimi-K2, Mixtral ...), so a model is
priced from the curve of its own shape, never from another model's.

Kept: tp x ep <= 8 (one node: the deployments servesim models); per key, the kernel with
the most rows in the newest version (aiconfigurator measured several vLLM back-ends for
some formats; the one it measured most is the one it measured across every TP/EP split),
and each other vLLM MoE backend's curve (``key@backend``) from the newest version that
timed it: a deployment run with ``--moe-backend triton`` (MiniMax-M2.5's InferenceX
scripts) is priced from Triton's timing, which B200 has only in the 0.19/0.22 tables.
``distribution``: ``balanced`` (every expert gets tokens * topk / experts),
``power_law_1.01`` and ``power_law_1.2`` (aiconfigurator's skewed routing, its default:
1.2 for Qwen3-MoE/MiniMax/gpt-oss, 1.01 for DeepSeek/Kimi; sdk/models/moe.py and
deepseek.py ``_power_law_alpha``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aiconfigurator_transfer import transferred_rows
from sim.cost.moe import backend_of
from sim.cost.profile.model_file import MLA_KEY, MOE_KEY, WINDOW_KEY, CurveAxis, CurveTable, moe_key

MAX_GPUS = 8  # tp x ep kept (one node)
_COLS = {"dtype": "moe_dtype", "hidden": "hidden_size", "inter": "inter_size",
         "experts": "num_experts", "topk": "topk", "tp": "moe_tp_size", "ep": "moe_ep_size",
         "distribution": "distribution"}


# formats vLLM runs through a kernel another framework's table times for shapes vLLM's
# tables lack: FlashInfer's TRT-LLM-gen MoE with mxfp4 weights and mxfp8 activations
# (vLLM's FLASHINFER_TRTLLM_MXFP4_MXFP8 backend, SGLang's flashinfer_trtllm MoE), borrowed
# per shape only where both frameworks' timings of the sibling format (bf16 activations,
# the same kernel family) agree to within SAME_KERNEL_TOL (median over token counts)
BORROW = {"w4a8_mxfp4_mxfp8": "w4a16_mxfp4"}
SAME_KERNEL_TOL = 0.05


def convert_moe(path: Path, source: str,
                older: tuple[tuple[Path, str], ...] = (),
                borrowed: tuple[tuple[Path, str], ...] = ()) -> tuple[CurveTable, str]:
    """The MoE CurveTable of one ``moe_perf.parquet`` and a note saying what was kept.

    Per key, the most-measured kernel of PATH is the curve ``key`` (what ``moe_backend:
    auto`` prices); every other vLLM MoE backend measured for the key (sim/cost/moe.py
    ``backend_of``) is the curve ``key@backend``, from PATH or else from the newest of
    OLDER ((path, source), newest first) that measured it: vLLM's ``--moe-backend`` of a
    deployment is priced from a timing of that backend. A backend no table timed for a
    shape is transferred from its timing of another shape of the format where
    calibrate/aiconfigurator_transfer.py says so (Marlin for mxfp4 experts)."""
    cols = [_COLS[k] for k in MOE_KEY]
    t = _moe_rows(path, cols)
    best = _best_kernel(t, cols)
    alts, used = _alternates(t, best, older, cols)
    rows = pd.concat([best] + alts, ignore_index=True)
    lent, used_b = _borrow(rows, borrowed, cols)
    rows = pd.concat([rows] + lent, ignore_index=True)
    used += used_b
    moved, what = transferred_rows(rows, t)
    if moved is not None:
        rows = pd.concat([rows, moved], ignore_index=True)
        used.append((source, what))
    tokens = [int(x) for x in np.sort(rows["num_tokens"].unique())]
    grid = rows.pivot_table(index="key", columns="num_tokens", values="latency",
                            aggfunc="median")
    grid = grid.reindex(index=sorted(grid.index), columns=tokens)
    kernels = rows.drop_duplicates("key").set_index("key")["kernel_source"].reindex(grid.index)
    enc, offset, scale = CurveTable.encode(grid.to_numpy(np.float64))
    src = source + "".join(f"; {what} from {s}" for s, what in used)
    table = CurveTable(fields=list(MOE_KEY), axes=[CurveAxis(name="tokens", nodes=tokens)],
                       curves=list(grid.index), kernels=[str(k) for k in kernels],
                       offset=offset, scale=scale, values=enc, source=src)
    n_alt = sum(1 for k in grid.index if "@" in k)
    note = (f"moe: {src}, {len(grid) - n_alt} curves (tp x ep <= {MAX_GPUS}, the most-measured "
            f"kernel per key) and {n_alt} other-backend curves, "
            f"{int(np.isfinite(grid.to_numpy()).sum())} points")
    return table, note


def _moe_rows(path: Path, cols: list[str]) -> pd.DataFrame:
    """One table's rows of one node, with their curve key and vLLM backend."""
    t = pd.read_parquet(path)
    t = t[t["moe_tp_size"] * t["moe_ep_size"] <= MAX_GPUS]
    return t.assign(key=[moe_key(*r) for r in t[cols].itertuples(index=False)],
                    backend=[backend_of(k) for k in t["kernel_source"]])


def _alternates(t: pd.DataFrame, best: pd.DataFrame, older, cols: list[str]):
    """Rows of the other backends' curves (key renamed ``key@backend``), each from the
    newest table that measured it, and which older tables gave some (source, what)."""
    have = set(zip(best["key"], best["backend"]))
    out, used = [], []
    for path, src in ((None, None),) + tuple(older):
        tab = t if path is None else _moe_rows(path, cols)
        tab = tab[tab["backend"].notna()]
        new = tab[[(k, b) not in have for k, b in zip(tab["key"], tab["backend"])]]
        if new.empty:
            continue
        new = _best_kernel(new, cols + ["backend"])
        have |= set(zip(new["key"], new["backend"]))
        out.append(new.assign(key=new["key"] + "@" + new["backend"]))
        if src is not None:
            used.append((src, ", ".join(sorted(set(new["moe_dtype"] + " " + new["backend"])))))
    return out, used


def _borrow(rows: pd.DataFrame, borrowed, cols: list[str]):
    """Rows of BORROW formats from other frameworks' tables (``borrowed``: (path, source))
    for keys ``rows`` lack, where the lender's sibling-format curve of that shape and
    kernel family agrees with vLLM's own (the kernel is the same; see BORROW); and which
    sources gave some (source, what)."""
    have = set(rows["key"])
    mine = rows.pivot_table(index="key", columns="num_tokens", values="latency",
                            aggfunc="median")
    out, used = [], []
    for path, src in borrowed:
        tab = _moe_rows(path, cols)
        lent = []
        for fmt, sibling in BORROW.items():
            same = tab[tab["backend"] == "flashinfer_trtllm"]
            cand = same[(same["moe_dtype"] == fmt) & ~same["key"].isin(have)]
            theirs = same[same["moe_dtype"] == sibling].pivot_table(
                index="key", columns="num_tokens", values="latency", aggfunc="median")
            for key, g in cand.groupby("key"):
                sib = sibling + key[len(fmt):]
                if sib not in mine.index or sib not in theirs.index:
                    continue
                ratio = (theirs.loc[sib] / mine.loc[sib]).dropna()
                if len(ratio) and float((ratio - 1).abs().median()) <= SAME_KERNEL_TOL:
                    lent.append(_best_kernel(g, cols))
        if lent:
            new = pd.concat(lent, ignore_index=True)
            have |= set(new["key"])
            out.append(new)
            used.append((src, ", ".join(sorted(set(new["moe_dtype"] + " " + new["backend"])))
                         + f" (same kernel: its {'/'.join(BORROW.values())} timings agree "
                         f"with vLLM's to {SAME_KERNEL_TOL:.0%})"))
    return out, used


def _best_kernel(t: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Rows of the most-measured kernel per key (ties: the first name)."""
    counts = t.groupby(cols + ["kernel_source"]).size().reset_index(name="n")
    best = counts.sort_values(["n", "kernel_source"], ascending=[False, True]) \
        .drop_duplicates(cols)
    return t.merge(best[cols + ["kernel_source"]], on=cols + ["kernel_source"])


def convert_mla(path: Path | pd.DataFrame, phase: str, source: str,
                scale: float = 1.0) -> CurveTable:
    """The MLA attention-module CurveTable of one ``mla_<phase>_module_perf.parquet``:
    one curve per (architecture, KV-cache dtype, projection GEMM format, heads per GPU)
    over batch x sequence length (context: the prompt ``isl``, no cached prefix;
    generation: the KV length ``step``). The module is vLLM's MLA attention layer with
    its projections (q_a/q_b, kv_a, the absorbed kv_b, o_proj), the latent KV cache read
    and written (aiconfigurator's collector). PATH may be the table's rows, corrected
    (calibrate/aiconfigurator_mla.py MLA_EXCESS); ``scale`` multiplies every time (a sibling
    GPU's table standing in, MLA_RECOLLECTED)."""
    t = path if isinstance(path, pd.DataFrame) else pd.read_parquet(path)
    t = t[t["tp_size"] == 1]  # heads are per GPU: a TP split is its heads count
    if scale != 1.0:
        t = t.assign(latency=t["latency"] * scale)
    length = "isl" if phase == "context" else "step"
    return _batch_length_table(t, ["architecture", "kv_cache_dtype", "gemm_type", "num_heads"],
                               MLA_KEY, length, source)


def convert_window(path: Path, phase: str, source: str) -> CurveTable | None:
    """The sliding-window attention CurveTable of one ``<phase>_attention_perf.parquet``
    (``context`` or ``generation``), or None when it has no windowed rows: bf16 attention,
    one curve per (window, KV-cache dtype, query heads, KV heads, head dim; heads per GPU)
    over batch x length (context: the prompt ``isl``, no cached prefix; generation: the KV
    length ``isl + step``, the collector's isl = 1), the most-measured kernel per key.
    aiconfigurator times windows of 128 (gpt-oss), 1024 and 8192 tokens."""
    t = pd.read_parquet(path)
    if "window_size" not in t:
        return None
    t = t[(t["window_size"] > 0) & (t["attn_dtype"] == "bfloat16") & (t["beam_width"] == 1)]
    if t.empty:
        return None
    if phase == "generation":
        t = t.assign(kv_len=t["isl"] + t["step"])
    cols = ["window_size", "kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim"]
    return _batch_length_table(t, cols, WINDOW_KEY, "isl" if phase == "context" else "kv_len",
                               source)


def _batch_length_table(t: pd.DataFrame, cols: list[str], fields: tuple[str, ...],
                        length: str, source: str) -> CurveTable:
    """One curve per ``cols`` key (the most-measured kernel's rows, median latency) over
    batch x ``length``; NaN where the collector did not measure."""
    t = _best_kernel(t, cols)
    t = t.assign(key=["|".join(str(v) for v in r) for r in t[cols].itertuples(index=False)])
    batch = [int(x) for x in np.sort(t["batch_size"].unique())]
    lens = [int(x) for x in np.sort(t[length].unique())]
    keys = sorted(t["key"].unique())
    grid = np.full((len(keys), len(batch), len(lens)), np.nan)
    med = t.groupby(["key", "batch_size", length])["latency"].median()
    ki, bi, li = ({k: i for i, k in enumerate(v)} for v in (keys, batch, lens))
    for (k, b, n), ms in med.items():
        grid[ki[k], bi[int(b)], li[int(n)]] = ms
    kernels = t.drop_duplicates("key").set_index("key")["kernel_source"].reindex(keys)
    enc, offset, scale = CurveTable.encode(grid)
    return CurveTable(fields=list(fields), axes=[CurveAxis(name="batch", nodes=batch),
                                                 CurveAxis(name=length, nodes=lens)],
                      curves=keys, kernels=[str(k) for k in kernels], offset=offset,
                      scale=scale, values=enc, source=source)
