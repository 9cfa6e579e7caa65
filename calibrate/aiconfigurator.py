"""Import NVIDIA's aiconfigurator-core kernel timings (Apache-2.0) as a servesim profile.

aiconfigurator-core ships tables measured on real GPUs under
``aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/*.parquet``
(latency in ms). Rows used, per system and framework (the newest version that has each):

* ``gemm/gemm_perf``: ``gemm_dtype`` bfloat16 (m, n, k) -> our ``gemm`` rows, and fp8
  (per-tensor fp8 weights, dynamically quantized fp8 activations: vLLM's
  ``--quantization fp8``) -> ``gemm`` rows of dtype fp8 (the ``gemm.fp8`` table);
* ``attention/context_attention_perf``: bf16 attention, no sliding window, the system's
  most-measured kernel (FA3 on Hopper, FA2 on L40S, FlashInfer/TRT-LLM on B200), once with
  a bf16 KV cache and once with an fp8 one (kv_dtype fp8: the ``*.fp8_kv`` tables).
  ``isl`` tokens per sequence, no cached prefix -> ``prefill_attn`` (q = isl, p = 0);
* ``attention/generation_attention_perf``: same filters; the KV length is ``isl + step``
  (collector: isl = 1, step = sequence length - 1) -> ``decode_attn`` (ctx = step);
* the same two attention tables' sliding-window rows (windows 128, 1024, 8192): one curve
  per window and head shape over batch x length (``window_context`` /
  ``window_generation``, calibrate/aiconfigurator_curves.py convert_window), which price
  gpt-oss's banded layers;
* ``comm/custom_allreduce_perf``: the CUDA-graph (``vllm_graph``) backend; ``message_size``
  counts bf16 elements -> ``allreduce`` rows of 2 bytes per element.

The roofline the tables are normalised by comes from the system's YAML (datasheet bf16
and fp8 FLOP/s, HBM and NVLink bandwidth). aiconfigurator has no elementwise tables (it
prices norms, activation, RoPE and KV writes as bytes / (HBM bandwidth x
``mem_bw_empirical_scaling_factor``) + ``mem_empirical_constant_latency``); the model file
carries those two figures from the same YAML. It has no per-step host cost either:
calibrate/overhead.py fits one to published end-to-end measurements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from calibrate.profile import COLUMNS, SHAPE_COLUMNS
from sim.cost.profile import work
from sim.cost.profile.model_file import BAR, Elementwise, Hardware, HostOverhead, ModelFile, Norm
from traces.errors import InputError

# aiconfigurator system -> servesim catalog GPU
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "a100_sxm": "a100-80gb",
           "l40s": "l40s", "b200_sxm": "b200", "b300_sxm": "b300"}
PACKAGE = "aiconfigurator-core"
# vLLM's Python API server, per prompt token, before the engine sees a request (tokenizing
# the text prompt, building and sending the request): the host's cost, the same for every
# system; fitted on NVIDIA's measured deployments (benchmarks/silicon, NOTES.md "The API
# server's time per prompt token")
FRONTEND_US_PER_TOKEN = 12.0
FRONTEND_SOURCE = (
    "chosen on the silicon replay (benchmarks/silicon): its 1,102 rows measured through vllm "
    "serve's Python API server with text prompts (InferenceX, InferenceMAX: "
    "benchmark_serving.py), one tokenizing worker (engine.ingress_serial), MoE reach 0.5: at "
    "0/8/10/12/14/16 us per prompt token their TTFT median abs error is "
    "28.2/13.1/11.6/10.6/11.2/12.1 %, least at 12, and every system held out picks 12 from "
    "the other three (python -m benchmarks.silicon --loso frontend_us, 2026-12-06); "
    "InferenceX PR 1634 (the Rust frontend, same engine: TTFT -8 % at 1k/1k, -22 % at "
    "8k/1k) bounds it below at 6-9 us: the per-token figure stands in for more than the "
    "tokenizing. A host figure: set engine.ingress_per_token_us for another frontend (0: "
    "token IDs)")


class ImportDataError(InputError):
    """The aiconfigurator data is missing or unusable for the requested system."""


def package_root() -> tuple[Path, str]:
    """(the package's ``systems`` folder, its version); InputError if not installed."""
    try:
        import aiconfigurator_core
    except ImportError:
        raise ImportDataError("aiconfigurator-core is not installed: pip install "
                              "'servesim[aiconfigurator]' (aiconfigurator-core==0.12.0)") from None
    from importlib.metadata import version

    return Path(aiconfigurator_core.__file__).parent / "systems", version(PACKAGE)


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.\-a-z]+", v) if x)


def tables(root: Path, system: str, op_dir: str, framework: str, name: str) -> list[Path]:
    """Every ``<version>/<name>.parquet`` of one op folder, newest version first."""
    found = (root / "data" / system / op_dir / framework).glob(f"*/{name}.parquet")
    return sorted(found, key=lambda p: _version_key(p.parent.name), reverse=True)


def newest_table(root: Path, system: str, op_dir: str, framework: str, name: str) -> Path | None:
    """The newest ``<version>/<name>.parquet`` of one op folder, or None."""
    return next(iter(tables(root, system, op_dir, framework, name)), None)


def _frame(op: str, name: str, rows: int, dtype: str = "bfloat16", kv_dtype: str = "bfloat16",
           **cols) -> pd.DataFrame:
    df = pd.DataFrame({c: 0 for c in SHAPE_COLUMNS}, index=range(rows))
    df["op"], df["name"], df["num_gpus"] = op, name, 1
    df["dtype"], df["kv_dtype"] = dtype, kv_dtype
    for c, v in cols.items():
        df[c] = np.asarray(v).astype(np.int64)
    return df


def _finish(df: pd.DataFrame, latency_ms, flops, nbytes, device: str, versions: dict,
            source: str) -> pd.DataFrame:
    key = None
    for c in SHAPE_COLUMNS:  # the same text as Shape.key(), built column-wise
        part = c + "=" + df[c].astype(str)
        key = part if key is None else key + "|" + part
    df["key"] = key
    ms = np.asarray(latency_ms, dtype=np.float64)
    df["flops"], df["bytes"], df["median_ms"] = flops, nbytes, ms
    df["p10_ms"] = df["p90_ms"] = np.nan  # the tables carry no spread
    df["repeats"] = 0
    df["tflops"] = df["flops"] / (ms * 1e-3) / 1e12
    df["gbps"] = df["bytes"] / (ms * 1e-3) / 1e9
    df["device"], df["backend"] = device, "aiconfigurator"
    df["versions"] = json.dumps(versions, sort_keys=True)
    df["source"], df["measured_at"] = source, ""
    return df[COLUMNS].drop_duplicates("key")


KV_DTYPES = {"bfloat16": 2, "fp8": 1}  # KV-cache dtypes imported, bytes per element
GEMM_DTYPES = {"bfloat16": 2, "fp8": 1, "nvfp4": 0.5}  # weight dtypes imported, bytes per
# element (where the system has them: nvfp4 on Blackwell only). Not fp8_block: its rows
# (DeepGemm / FlashInfer block-scaled kernels) carry a floor of 57-60 us on H100/H200 and
# 170-260 us on B200 at every m (n 2048, k 3072: the per-tensor fp8 kernel takes 8 us), a
# per-call cost a CUDA-graphed decode step does not show, and the MiniMax-M2.5 H200 script
# turns both kernels off; block-scaled fp8 is priced from gemm.fp8 (sim/cost/fitted.py).


def _attention(path: Path) -> list[tuple[pd.DataFrame, str, str]]:
    """(rows, kernel, KV dtype) per KV dtype measured: bf16 attention, no sliding window,
    the most-measured bf16-KV kernel (for fp8 KV the same kernel when it was measured,
    else the most-measured fp8-KV one)."""
    t = pd.read_parquet(path)
    t = t[(t["attn_dtype"] == "bfloat16") & (t["beam_width"] == 1)]
    if "window_size" in t:
        t = t[t["window_size"] == 0]
    out, kernel = [], None
    for kv in KV_DTYPES:
        rows = t[t["kv_cache_dtype"] == kv]
        if rows.empty:
            continue
        counts = rows["kernel_source"].value_counts()
        k = kernel if kernel in counts.index else str(counts.index[0])
        kernel = kernel or k
        out.append((rows[rows["kernel_source"] == k], k, kv))
    if not out or out[0][2] != "bfloat16":
        raise ImportDataError(f"{path}: no bf16 rows")
    return out


def convert_table(path: Path, kind: str, ver: dict, rel: str) -> tuple[pd.DataFrame, str]:
    """Profile rows of one aiconfigurator table and a note saying what was kept."""
    if kind == "gemm":
        return _gemm(path, ver, rel)
    if kind in ("prefill_attn", "decode_attn"):
        return _attention_rows(path, kind, ver, rel)
    if kind == "allreduce":
        t = pd.read_parquet(path)
        t = t[(t["backend"] == "vllm_graph") & (t["allreduce_dtype"] == "bfloat16")]
        msg = t["message_size"].to_numpy(np.int64) * 2
        df = _frame("allreduce", "aiconfigurator", len(t), num_gpus=t["num_gpus"],
                    message_bytes=msg)
        f, b = np.zeros(len(t)), work.allreduce_wire_bytes(msg, df["num_gpus"])
        note = f"allreduce: {rel}, vllm_graph backend, {len(t)} rows"
        return _done(path, df, t, f, b, ver, rel), note
    raise ValueError(f"unknown table kind {kind!r}")


def _done(path: Path, df: pd.DataFrame, t: pd.DataFrame, f, b, ver: dict,
          rel: str) -> pd.DataFrame:
    ver = {**ver, "framework_version": path.parent.name}
    if t.empty:  # e.g. no vllm_graph bfloat16 all-reduce rows in this system's table
        raise ImportDataError(f"{rel}: no rows servesim reads in this table ({len(df)} after "
                              "filtering); this system cannot be imported")
    return _finish(df, t["latency"], f, b, str(t["device"].iloc[0]), ver,
                   f"{PACKAGE} {ver[PACKAGE]} {rel}")


SPIKE = 1.5  # a GEMM row this many times the fastest shape dominating it is collector noise


def dominance_envelope(t: pd.DataFrame) -> pd.Series:
    """The least latency over the shapes with at least a row's m, n and k (reverse cumulative
    minima along m, n and k of the (m, n, k) grid): a GEMM can always be run as a larger one
    with padded rows and columns."""
    ms, ns_, ks = (np.sort(t[c].unique()) for c in ("m", "n", "k"))
    im, in_, ik = (np.searchsorted(v, t[c].to_numpy()) for v, c in
                   ((ms, "m"), (ns_, "n"), (ks, "k")))
    cube = np.full((len(ms), len(ns_), len(ks)), np.inf)
    np.minimum.at(cube, (im, in_, ik), t["latency"].to_numpy(dtype=np.float64))
    for axis in range(3):
        cube = np.flip(np.minimum.accumulate(np.flip(cube, axis), axis=axis), axis)
    return pd.Series(cube[im, in_, ik], index=t.index)


def without_spikes(t: pd.DataFrame) -> pd.Series:
    """Each row's latency, or the dominance envelope's where the row is more than SPIKE
    times it. A smaller shape cannot need that much more time than a larger one (padding),
    and the tables say where the line lies: in the bf16, fp8 and nvfp4 tables of H100, H200,
    B200 and B300 (vLLM 0.24.0) at most 1.2 % of rows exceed 1.5x the envelope (the rest
    spread from 1.0 to 1.3x: shapes a tile fits better), except B200 fp8
    (CutlassFP8ScaledMMLinearKernel), where 12 % do, about 20 us above both neighbours at
    every m (m 4, k 8192: n 1536 30.1 us, n 2048 11.7; n 2560 32.4, n 3072 13.2); the fit
    took them for shape effects (held-out p90 31.9 %)."""
    env = dominance_envelope(t)
    return t["latency"].where(t["latency"] <= SPIKE * env, env)


def _gemm(path: Path, ver: dict, rel: str) -> tuple[pd.DataFrame, str]:
    """bf16 and fp8 GEMM rows (fp8: 1-byte weights, 16-bit activations in and out), the
    collector's spikes taken out (without_spikes)."""
    g = pd.read_parquet(path)
    frames, counts = [], []
    for dtype, w in GEMM_DTYPES.items():
        t = g[g["gemm_dtype"] == dtype]
        if t.empty:
            continue
        t = t.assign(latency=without_spikes(t))
        df = _frame("gemm", "aiconfigurator", len(t), dtype=dtype, m=t["m"], n=t["n"],
                    k=t["k"])
        f, b = work.gemm_work(df["m"], df["n"], df["k"], 2, w)
        frames.append(_done(path, df, t, f, b, ver, rel))
        counts.append(f"{dtype} {len(t)}")
    return pd.concat(frames, ignore_index=True), f"gemm: {rel}, {', '.join(counts)} rows"


def _attention_rows(path: Path, kind: str, ver: dict, rel: str) -> tuple[pd.DataFrame, str]:
    frames, parts = [], []
    for t, kernel, kv in _attention(path):
        heads = dict(batch=t["batch_size"], num_heads=t["num_heads"],
                     num_kv_heads=t["num_key_value_heads"], head_dim=t["head_dim"])
        e = KV_DTYPES[kv]
        if kind == "prefill_attn":
            df = _frame(kind, "aiconfigurator", len(t), kv_dtype=kv, q_len=t["isl"], ctx_len=0,
                        **heads)
            f, b = work.prefill_work(df["batch"], df["q_len"], 0, df["num_heads"],
                                     df["num_kv_heads"], df["head_dim"], 2, e)
        else:
            df = _frame(kind, "aiconfigurator", len(t), kv_dtype=kv, q_len=1,
                        ctx_len=t["isl"] + t["step"] - 1, **heads)
            f, b = work.decode_work(df["batch"], df["ctx_len"] + 1, df["num_heads"],
                                    df["num_kv_heads"], df["head_dim"], 2, e)
        frames.append(_done(path, df, t, f, b, {**ver, "kernel": kernel}, rel))
        parts.append(f"{kv} KV: kernel {kernel}, {len(t)} rows")
    return (pd.concat(frames, ignore_index=True),
            f"{kind}: {rel}, no window; {'; '.join(parts)}")


TABLES = (("gemm", "gemm", "gemm_perf"), ("prefill_attn", "attention", "context_attention_perf"),
          ("decode_attn", "attention", "generation_attention_perf"),
          ("allreduce", "comm", "custom_allreduce_perf"))


def import_profile(system: str, framework: str = "vllm") -> tuple[pd.DataFrame, Norm, list[str]]:
    """(profile rows, the system's datasheet roofline, notes) of one aiconfigurator system."""
    root, pkg_version = package_root()
    if not (root / "data" / system).is_dir():
        known = ", ".join(sorted(p.name for p in (root / "data").iterdir() if p.is_dir()))
        raise ImportDataError(f"--system {system!r}: unknown aiconfigurator system "
                              f"(known: {known})")
    frames, notes = [], []
    for kind, op_dir, name in TABLES:
        path = newest_table(root, system, op_dir, framework, name)
        if path is None:
            if kind != "allreduce":
                raise ImportDataError(f"--system {system} --framework {framework}: "
                                      f"aiconfigurator has no {name} table")
            notes.append("allreduce: no table; the cost model uses the catalog roofline")
            continue
        rel = str(path.relative_to(root))
        df, note = convert_table(path, kind, {PACKAGE: pkg_version}, rel)
        frames.append(df)
        notes.append(note)
    gpu = system_spec(system)["gpu"]
    has_fp8 = any(f["dtype"].isin(["fp8", "fp8_block"]).any() for f in frames)
    has_fp4 = any((f["dtype"] == "nvfp4").any() for f in frames)
    norm = Norm(peak_flops=float(gpu["bfloat16_tc_flops"]), mem_bandwidth=float(gpu["mem_bw"]),
                link_bandwidth=float(system_spec(system)["node"]["intra_node_bw"]),
                floor_s=5e-6,
                fp8_peak_flops=float(gpu["fp8_tc_flops"]) if has_fp8 else None,
                fp4_peak_flops=float(gpu["fp4_tc_flops"]) if has_fp4 and "fp4_tc_flops" in gpu
                else None)
    return pd.concat(frames, ignore_index=True), norm, notes


def moe_of(system: str, framework: str = "vllm"):
    """The system's measured fused-MoE layer table (calibrate/aiconfigurator_curves.py), or
    None when aiconfigurator has none for this framework."""
    from calibrate.aiconfigurator_curves import convert_moe

    root, pkg_version = package_root()
    found = tables(root, system, "moe", framework, "moe_perf")
    if not found:
        return None
    src = [(p, f"{PACKAGE} {pkg_version} {p.relative_to(root)}") for p in found]
    lenders = tables(root, system, "moe", "sglang", "moe_perf") if framework == "vllm" else []
    lent = tuple((p, f"{PACKAGE} {pkg_version} {p.relative_to(root)}") for p in lenders)
    return convert_moe(*src[0], older=tuple(src[1:]), borrowed=lent)[0]


def mla_of(system: str, phase: str, framework: str = "vllm"):
    """The system's measured MLA attention-module table of one phase, or None; a table of
    aiconfigurator's earlier collector is corrected (calibrate/aiconfigurator_mla.py)."""
    from calibrate.aiconfigurator_curves import convert_mla
    from calibrate.aiconfigurator_mla import corrected_mla

    table = corrected_mla(system, phase, framework)
    if table is not None:
        return table
    return _phase_table(system, "mla", framework, f"mla_{phase}_module_perf", convert_mla,
                        phase)


def window_of(system: str, phase: str, framework: str = "vllm"):
    """The system's measured sliding-window attention of one phase (``context`` or
    ``generation``) from the same table as its full attention, or None."""
    from calibrate.aiconfigurator_curves import convert_window

    return _phase_table(system, "attention", framework, f"{phase}_attention_perf",
                        convert_window, phase)


def _phase_table(system: str, op_dir: str, framework: str, name: str, convert, phase: str):
    """``convert(path, phase, source)`` of the newest ``name`` table, or None without one."""
    root, pkg_version = package_root()
    path = newest_table(root, system, op_dir, framework, name)
    if path is None:
        return None
    return convert(path, phase, f"{PACKAGE} {pkg_version} {path.relative_to(root)}")


def system_spec(system: str) -> dict:
    """aiconfigurator's system YAML (datasheet figures and empirical corrections)."""
    root, _ = package_root()
    return yaml.safe_load((root / f"{system}.yaml").read_text())


def elementwise_of(system: str) -> Elementwise:
    """aiconfigurator's own pricing of memory-bound ops on ``system``: bytes / (HBM
    bandwidth x mem_bw_empirical_scaling_factor) + mem_empirical_constant_latency per kernel;
    the embedding gather at efficiency 0.3 (its models' ``Embedding(..., 0.3)``)."""
    gpu = system_spec(system)["gpu"]
    eff = float(gpu.get("mem_bw_empirical_scaling_factor", 0.8))
    floor = float(gpu.get("mem_empirical_constant_latency", 3e-6))
    return Elementwise(mem_efficiency=eff, gather_efficiency=0.3, kernel_floor_s=floor,
                       source=f"{PACKAGE} systems/{system}.yaml: mem_bw_empirical_scaling_factor "
                       f"{eff}, mem_empirical_constant_latency {floor * 1e6:g} us; embedding "
                       "efficiency 0.3 as its model definitions (no measured elementwise table)")


def import_and_fit(system: str, framework: str = "vllm", seed: int = 0,
                   heldout: float = 0.2) -> tuple[ModelFile, pd.DataFrame]:
    """Convert one system's tables and fit them; (model file, converted profile)."""
    from calibrate.fit import fit_profile
    from sim.catalog import get_gpu

    df, norm, notes = import_profile(system, framework)
    gpu = SYSTEMS.get(system, system)
    overhead = get_gpu(gpu).step_overhead_s * 1e3 if system in SYSTEMS else 0.0
    notes = notes + [
        "prefill attention was measured without a cached prefix; chunks with a prefix are "
        "priced by the roofline ratio at prefix 0 (FLOP-proportional)",
        "decode attention was measured with equal context lengths; a batch is priced at its "
        "mean context",
    ]
    mf = fit_profile(df, profile=f"{PACKAGE} systems/data/{system} ({framework})", seed=seed,
                     heldout=heldout, norm=norm, gpu=gpu, framework=framework, notes=notes,
                     step_overhead_ms=overhead,
                     step_overhead_source="servesim catalog estimate (sim/catalog/gpus.py "
                     "step_overhead_s), used only without host_overhead; aiconfigurator has "
                     "no per-step host cost")
    mf.provenance.source = f"{PACKAGE} {_pkg(df)} ({system}, {framework})"
    mf.moe = moe_of(system, framework)
    mf.mla_context, mf.mla_generation = (mla_of(system, ph, framework)
                                         for ph in ("context", "generation"))
    mf.window_context, mf.window_generation = (window_of(system, ph, framework)
                                               for ph in ("context", "generation"))
    for what, t in (("fused-MoE", mf.moe), ("MLA context", mf.mla_context),
                    ("MLA generation", mf.mla_generation),
                    ("sliding-window context attention", mf.window_context),
                    ("sliding-window generation attention", mf.window_generation)):
        if t is not None:
            mf.provenance.notes.append(f"{what}: {len(t.curves)} curves from {t.source} "
                                       "(calibrate/aiconfigurator_curves.py)")
    mf.elementwise = elementwise_of(system)
    mf.host_overhead = shipped_host_overhead(gpu)
    mf.frontend_us_per_token, mf.frontend_source = FRONTEND_US_PER_TOKEN, FRONTEND_SOURCE
    mf.hardware = Hardware(source=f"aiconfigurator tables ({system}; not this machine)",
                           gpu=gpu, dtype=mf.dtype)
    mark_variants_over_bar(mf)
    return mf, df


def mark_variants_over_bar(mf: ModelFile) -> list[str]:
    """Name in the notes every dtype-variant table (gemm.fp8, *.fp8_kv) whose held-out error
    misses ``BAR``. The table is kept: aiconfigurator ships it, and a model of that dtype is
    priced from it rather than refused; `cost fitted` warns once per run that uses it, with
    the error. (A base table that misses it keeps the whole GPU unshipped, as L40S.)"""
    marked = []
    for key in [k for k in mf.ops if "." in k]:
        h = mf.ops[key].heldout
        if h is not None and h.over_bar():
            marked.append(key)
            mf.provenance.notes.append(
                f"{key}: held-out median / p90 APE {h.median_ape:.2f} / {h.p90_ape:.2f} % "
                f"above the {BAR['median_ape']:g} / {BAR['p90_ape']:g} % bar; kept, and a run "
                "priced by it warns")
    return marked


def shipped_host_overhead(gpu: str) -> HostOverhead | None:
    """The host cost of the shipped ``<gpu>/vllm`` profile, else of any shipped profile (one
    model serves every GPU: calibrate/overhead.py); refit with ``fit-overhead``."""
    from sim.cost.profile.model_file import load_model_file, shipped_profiles

    shipped = shipped_profiles()
    names = [f"{gpu}/vllm"] + sorted(shipped)
    for name in (n for n in names if n in shipped):
        h = load_model_file(shipped[name]).host_overhead
        if h is not None:
            return h
    return None


def _pkg(df: pd.DataFrame) -> str:
    return str(json.loads(df["versions"].iloc[0]).get(PACKAGE, "?"))
