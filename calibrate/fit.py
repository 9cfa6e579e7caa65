"""Fit a profile: one table per operation, with a seeded held-out split and its error.

Each operation is modelled as ``time = roofline(FLOPs, bytes) * 2^f(coords)``: the roofline
(sim/cost/profile/work.py, ``max(FLOPs / peak, bytes / bandwidth) + floor``) carries the physics
and the extrapolation; ``f`` is a piecewise-multilinear table over log2 coordinates, fitted
by smoothed least squares (sim/cost/profile/grid.py), so between measured shapes the model
interpolates the measured efficiency and beyond them it keeps the edge efficiency and
scales with the work (roofline extrapolation).

Held out: a row is held out iff crc32(f"{seed}:{key}") / 2^32 < fraction. The rule only
depends on the row's shape key, so ``validate`` recomputes the same split from the seed
and fraction recorded in the model file.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib

import numpy as np
import pandas as pd

from calibrate.profile import profile_hash
from sim.cost.profile import grid, work
from sim.cost.profile.model_file import (
    QUANT_GEMMS,
    Errors,
    Hardware,
    ModelFile,
    Norm,
    OpTable,
    Provenance,
    peak_of,
    table_key,
)

FIT_OPS = ("gemm", "prefill_attn", "decode_attn", "allreduce")
def op_of(key: str) -> str:
    """The operation a table key (sim/cost/profile/model_file.py ``table_key``) times: the part
    before the dtype variant (``gemm.fp8_block`` -> ``gemm``)."""
    return key.split(".", 1)[0]


def table_keys(df: pd.DataFrame) -> np.ndarray:
    """Table key of each profile row: its op, plus the dtype variant (fp8 weights, fp8 KV)."""
    return np.array([table_key(op, w, kv) for op, w, kv in
                     zip(df["op"], df["dtype"].astype(str), df["kv_dtype"].astype(str))],
                    dtype=object)
DEFAULT_FLOOR_S = 5e-6  # roofline floor: a kernel-launch latency scale (seconds)
SMOOTH = 1e-3  # second-difference penalty vs one row's squared log2 error
TOOL = "servesim calibrate fit"


def heldout_mask(keys, seed: int, fraction: float) -> np.ndarray:
    """True for rows held out of the fit (a deterministic function of key and seed)."""
    h = np.array([zlib.crc32(f"{seed}:{k}".encode()) for k in keys], dtype=np.float64)
    return h / 2.0**32 < fraction


def coords_of(op: str, df: pd.DataFrame) -> np.ndarray:
    """Fit coordinates (sim/cost/profile/work.py) of the profile rows of one operation."""
    c = {name: df[name].to_numpy(np.float64) for name in
         ("m", "n", "k", "batch", "q_len", "ctx_len", "num_heads", "num_kv_heads", "head_dim",
          "message_bytes", "num_gpus")}
    if op == "gemm":
        return work.gemm_coords(c["m"], c["n"], c["k"])
    if op == "prefill_attn":
        return work.prefill_coords(c["batch"], c["q_len"], c["ctx_len"], c["num_heads"],
                                   c["num_kv_heads"], c["head_dim"])
    if op == "decode_attn":
        return work.decode_coords(c["batch"], c["ctx_len"] + 1, c["num_heads"],
                                  c["num_kv_heads"], c["head_dim"])
    if op == "allreduce":
        return work.allreduce_coords(c["message_bytes"], c["num_gpus"])
    raise ValueError(f"no fit table for operation {op!r}")



def roofline_of(key: str, df: pd.DataFrame, norm: Norm) -> np.ndarray:
    """Normalising roofline time (seconds) of each row of table ``key``."""
    flops, nbytes = df["flops"].to_numpy(np.float64), df["bytes"].to_numpy(np.float64)
    if key == "allreduce":  # bytes = ring wire bytes
        return nbytes / norm.link_bandwidth + norm.floor_s
    return work.roofline_s(flops, nbytes, peak_of(key, norm), norm.mem_bandwidth, norm.floor_s)


def errors(pred_s: np.ndarray, meas_s: np.ndarray) -> Errors:
    """Absolute percentage error summary of predictions against measurements."""
    if len(meas_s) == 0:
        return Errors(rows=0, median_ape=0.0, p90_ape=0.0, max_ape=0.0)
    ape = np.abs(np.asarray(pred_s) / np.asarray(meas_s) - 1.0) * 100.0
    return Errors(rows=len(ape), median_ape=round(float(np.median(ape)), 3),
                  p90_ape=round(float(np.percentile(ape, 90)), 3),
                  max_ape=round(float(ape.max()), 3))


def choose_nodes(x: np.ndarray, max_unique: int = 80, step: float = 0.5) -> list[float]:
    """Grid nodes of one axis: the distinct coordinates when few, else a regular log2 grid."""
    u = np.unique(np.round(x, 6))
    if len(u) <= max_unique:
        return [float(v) for v in u]
    lo, hi = np.floor(u[0] / step) * step, np.ceil(u[-1] / step) * step
    return [float(v) for v in np.arange(lo, hi + step / 2, step)]


def data_norm(df: pd.DataFrame, floor_s: float = DEFAULT_FLOOR_S) -> Norm:
    """A roofline from the profile itself: the best achieved FLOP/s and bytes/s."""
    sec = df["median_ms"].to_numpy(np.float64) * 1e-3
    flops, nbytes = df["flops"].to_numpy(np.float64), df["bytes"].to_numpy(np.float64)
    compute = df["op"].isin(["gemm", "prefill_attn", "decode_attn"]).to_numpy()
    link = df["op"].eq("allreduce").to_numpy()
    peak = float((flops / sec)[compute].max()) if compute.any() else 1e12
    bw = float((nbytes / sec)[compute].max()) if compute.any() else 1e11
    link_bw = float((nbytes / sec)[link].max()) if link.any() else bw
    return Norm(peak_flops=max(peak, 1.0), mem_bandwidth=max(bw, 1.0),
                link_bandwidth=max(link_bw, 1.0), floor_s=floor_s)


def fit_op(key: str, train: pd.DataFrame, test: pd.DataFrame, norm: Norm,
           smooth: float = SMOOTH) -> OpTable:
    """Fit one table (``key``: an op or its dtype variant) on ``train``; report its error
    on ``train`` and ``test``."""
    op = op_of(key)
    x = coords_of(op, train)
    meas = train["median_ms"].to_numpy(np.float64) * 1e-3
    roof = roofline_of(key, train, norm)
    nodes = [np.asarray(choose_nodes(x[:, d], *policy))
             for d, (_, policy) in enumerate(work.AXES[op])]
    values = grid.fit_grid(nodes, x, np.log2(meas / roof), smooth=smooth)
    enc, offset, scale = OpTable.encode(values)
    axes = [{"name": name, "nodes": [round(v, 6) for v in ax.tolist()]}
            for (name, _), ax in zip(work.AXES[op], nodes)]
    table = OpTable(axes=axes, offset=offset, scale=scale, values=enc,
                    train=Errors(rows=0, median_ape=0, p90_ape=0, max_ape=0))
    table.train = errors(predict_table(table, key, train, norm), meas)
    if len(test):
        table.heldout = errors(predict_table(table, key, test, norm),
                               test["median_ms"].to_numpy(np.float64) * 1e-3)
    return table


def predict_table(table: OpTable, key: str, df: pd.DataFrame, norm: Norm) -> np.ndarray:
    """Seconds the table ``key`` predicts for profile rows ``df`` (of that table)."""
    op = op_of(key)
    return roofline_of(key, df, norm) * np.exp2(table.log2_ratio(coords_of(op, df)))


def predict(mf: ModelFile, df: pd.DataFrame) -> np.ndarray:
    """Predicted seconds for each profile row (NaN where the file has no model of its op)."""
    out = np.full(len(df), np.nan)
    keys = table_keys(df)
    for key in np.unique(keys):
        rows = keys == key
        if key == "step_overhead":
            out[rows] = mf.step_overhead_ms * 1e-3
        elif key in mf.ops and mf.norm is not None:
            out[rows] = predict_table(mf.ops[key], key, df[rows], mf.norm)
    return out


def _versions(df: pd.DataFrame) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in json.loads(str(df["versions"].iloc[0])).items()}
    except (ValueError, AttributeError, IndexError):
        return {}


def profile_dtype(df: pd.DataFrame) -> str:
    """The profile's dtypes as the model file names them ('bfloat16,fp8', 'float32')."""
    return ",".join(sorted(set(df["dtype"].astype(str)), key=lambda d: (d in QUANT_GEMMS, d)))


def this_machine(df: pd.DataFrame, source: str = "this machine (the fit's; the profile is "
                 "taken as measured here)") -> Hardware:
    """The fingerprint of the machine fitting ``df`` (profile then fit, as fidelity does)."""
    from calibrate.fingerprint import capture
    from sim.cost.profile.model_file import hardware_of

    hw = hardware_of(capture(profile_dtype(df)), source)
    on_cpu = df["device"].astype(str).str.lower().str.startswith("cpu").all()
    return hw.model_copy(update={"gpu": None}) if on_cpu else hw


def fit_profile(df: pd.DataFrame, *, profile: str = "", seed: int = 0, heldout: float = 0.2,
                norm: Norm | None = None, gpu: str = "", framework: str = "",
                source: str | None = None, notes: list[str] | None = None,
                step_overhead_ms: float | None = None, step_overhead_source: str = "",
                model: str = "", hardware: Hardware | None = None) -> ModelFile:
    """Fit every operation present in the profile ``df`` and return the model file."""
    held = heldout_mask(df["key"], seed, heldout)
    train, test = df[~held], df[held]
    norm = norm or data_norm(train)
    k_train, k_test = table_keys(train), table_keys(test)
    ops = {k: fit_op(k, train[k_train == k], test[k_test == k], norm)
           for k in sorted(set(k_train)) if op_of(k) in FIT_OPS}
    over = train[train["op"] == "step_overhead"]["median_ms"]
    if step_overhead_ms is None:
        step_overhead_ms = float(over.median()) if len(over) else 0.0
        step_overhead_source = step_overhead_source or (
            "median empty-step time of the profile (a floor: no scheduler work)" if len(over)
            else "none measured")
    devices = sorted(set(df["device"].astype(str)))
    prov = Provenance(
        source=source or str(df["source"].iloc[0]), device=", ".join(devices),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        tool=TOOL, profile=profile, profile_sha256=profile_hash(df), rows=len(df),
        versions=_versions(df), seed=seed, heldout_fraction=heldout, notes=notes or [])
    return ModelFile(gpu=gpu or devices[0], framework=framework, dtype=profile_dtype(df),
                     model=model, provenance=prov, hardware=hardware, norm=norm, ops=ops,
                     step_overhead_ms=round(step_overhead_ms, 6),
                     step_overhead_source=step_overhead_source)
