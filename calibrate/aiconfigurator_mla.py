"""aiconfigurator's vLLM MLA module tables, corrected where its earlier collector timed them.

aiconfigurator-core 0.12.0 re-collected vLLM's MLA module tables on B200 only: its
collection_meta.yaml there says "Re-collected 2026-07-27 on B200 with the fused-op collector
fix (ai-dynamo/aiconfigurator#1423) ... the previous rows ran the never-in-serving native
chain (+34%)" and names the new method (``norm_dispatch``); every other system's table is of
the earlier collector. B300's earlier-collector rows are 1.69x B200's (median; 2.15x under
50 us) while every table collected alike on both is 0.88-0.98x (GEMM, attention, fused MoE,
TensorRT-LLM's MLA modules), and NVIDIA's measured Kimi-K2.5 fp4 serving on B300 runs at
0.87-1.06x B200's TPOT at the same TP, concurrency and lengths (NOTES.md).

* MLA_RECOLLECTED: the system takes its re-collected sibling's table, scaled by the median
  per-shape ratio of the two systems' TensorRT-LLM MLA module tables (one collector on both).
* MLA_EXCESS (Hopper, which has no re-collected table). ASSUMPTION: the earlier collector's
  excess is the same fraction per shape there as measured on Blackwell, where both collectors
  timed one GPU model: B300's earlier table over B200's re-collected one x the TensorRT-LLM
  ratio (median 1.75, 1.13-2.34 over shapes for generation; 1.74, 1.40-2.18 for context;
  NVIDIA's one anchor: +34 % earlier vs -9 % now against an in-engine trace, 1.47). Each
  shape of an earlier-collector Hopper table is divided by that shape's factor (the median
  where B300 or B200 lacks it). On NVIDIA's measured Kimi-K2.5 int4 serving on H200 (the only
  MLA rows on Hopper; 45 rows) TPOT moved from +18.6 % to -4.2 % (NOTES.md).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from calibrate.aiconfigurator import PACKAGE, newest_table, package_root

MLA_RECOLLECTED = {"b300_sxm": "b200_sxm"}  # earlier-collector system -> re-collected sibling
MLA_EXCESS = {"h100_sxm": ("b300_sxm", "b200_sxm"), "h200_sxm": ("b300_sxm", "b200_sxm")}
MLA_RATIO_KEY = ["kv_cache_dtype", "gemm_type", "num_heads", "batch_size"]


def _key(phase: str) -> list[str]:
    return MLA_RATIO_KEY + ["isl" if phase == "context" else "step"]


def corrected_mla(system: str, phase: str, framework: str = "vllm"):
    """The corrected CurveTable of ``system``'s MLA module table of one phase, or None when
    it needs none (re-collected, not named above, another framework, a table missing)."""
    if framework != "vllm":
        return None
    name = f"mla_{phase}_module_perf"
    root, pkg_version = package_root()
    if mla_recollected(root, system, framework, name):
        return None
    if system in MLA_RECOLLECTED:
        return _from_sibling(root, pkg_version, system, MLA_RECOLLECTED[system], name, phase)
    if system in MLA_EXCESS:
        return _less_excess(root, pkg_version, system, MLA_EXCESS[system], name, phase)
    return None


def _from_sibling(root: Path, pkg_version: str, system: str, sibling: str, name: str,
                  phase: str):
    """The sibling's re-collected table x the TensorRT-LLM ratio of ``system`` to it."""
    from calibrate.aiconfigurator_curves import convert_mla

    scale = mla_scale(root, system, sibling, name, phase)
    path = newest_table(root, sibling, "mla", "vllm", name)
    if scale is None or path is None or not mla_recollected(root, sibling, "vllm", name):
        return None
    source = (f"{PACKAGE} {pkg_version} {path.relative_to(root)} (re-collected with the "
              f"fused-op fix) x {scale:.3f}: {system}'s own table predates the fix (+34 % per "
              f"NVIDIA); {scale:.3f} = median {system} / {sibling} of TensorRT-LLM's MLA "
              "module tables (calibrate/aiconfigurator_mla.py MLA_RECOLLECTED)")
    return convert_mla(path, phase, source, scale=scale)


def _less_excess(root: Path, pkg_version: str, system: str, pair: tuple[str, str], name: str,
                 phase: str):
    """``system``'s own table, each shape divided by the excess measured on ``pair``."""
    from calibrate.aiconfigurator_curves import convert_mla

    path = newest_table(root, system, "mla", "vllm", name)
    factor = mla_excess(root, *pair, name, phase)
    if path is None or factor is None:
        return None
    t = pd.read_parquet(path).merge(factor.rename("excess").reset_index(), on=_key(phase),
                                    how="left")
    t["latency"] = t["latency"] / t["excess"].fillna(float(factor.median()))
    source = (f"{PACKAGE} {pkg_version} {path.relative_to(root)} (earlier collector), each "
              f"shape / its excess measured on Blackwell ({pair[0]}'s earlier table / "
              f"{pair[1]}'s re-collected one x their TensorRT-LLM ratio; median "
              f"{float(factor.median()):.2f}): ASSUMPTION, calibrate/aiconfigurator_mla.py "
              "MLA_EXCESS")
    return convert_mla(t, phase, source)


def mla_recollected(root: Path, system: str, framework: str, name: str) -> bool:
    """Whether the newest ``name`` MLA table of ``system`` was collected with the fused-op
    fix (its collection_meta.yaml names ``norm_dispatch`` for the table)."""
    path = newest_table(root, system, "mla", framework, name)
    meta = path.parent / "collection_meta.yaml" if path is not None else None
    if meta is None or not meta.exists():
        return False
    entry = (yaml.safe_load(meta.read_text()) or {}).get("tables", {}).get(name) or {}
    return "norm_dispatch" in entry


def mla_scale(root: Path, system: str, sibling: str, name: str, phase: str) -> float | None:
    """Median of ``system`` / ``sibling`` over the shapes both TensorRT-LLM MLA ``name``
    tables timed (one collector, heads per GPU), or None without both."""
    mine, theirs = (newest_table(root, s, "mla", "trtllm", name) for s in (system, sibling))
    if mine is None or theirs is None:
        return None
    a, b = (pd.read_parquet(p).groupby(_key(phase))["latency"].median()
            for p in (mine, theirs))
    r = (a / b).dropna()
    return float(r.median()) if len(r) else None


def mla_excess(root: Path, earlier: str, recollected: str, name: str, phase: str):
    """Per shape (MLA_RATIO_KEY + length), ``earlier``'s earlier-collector time over
    ``recollected``'s re-collected one scaled to ``earlier`` by the TensorRT-LLM ratio; None
    unless both tables are there and of those collectors."""
    scale = mla_scale(root, earlier, recollected, name, phase)
    paths = [newest_table(root, s, "mla", "vllm", name) for s in (earlier, recollected)]
    if scale is None or None in paths or mla_recollected(root, earlier, "vllm", name) or \
            not mla_recollected(root, recollected, "vllm", name):
        return None
    a, b = (pd.read_parquet(p).query("tp_size == 1").groupby(_key(phase))["latency"].median()
            for p in paths)
    return (a / (b * scale)).dropna()
