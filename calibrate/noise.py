"""The cross-framework noise floor: how much two measurements of the same kernel shape differ.

aiconfigurator-core measured the same operations on the same GPU once per framework
(vLLM, SGLang, TensorRT-LLM). Where two tables hold the same shape (the profile ``key``:
op, sizes, dtype, KV dtype), |other / vLLM - 1| says how far apart two honest
measurements are: a model fitted to one of them cannot be judged more precisely than
that. GEMMs of the same dtype run the same cuBLAS/CUTLASS families everywhere; attention
kernels may differ (FA3 in vLLM and SGLang, TRT-LLM's own), which the floor then includes.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from calibrate.aiconfigurator import (
    TABLES,
    ImportDataError,
    convert_table,
    newest_table,
    package_root,
)
from calibrate.fit import table_keys
from sim.cost.profile.model_file import ModelFile

OTHERS = ("sglang", "trtllm")
KINDS = ("gemm", "prefill_attn", "decode_attn")


def system_of(mf: ModelFile) -> tuple[str, str] | None:
    """(aiconfigurator system, framework) a model file was imported from, or None."""
    m = re.search(r"\((\w+), (\w+)\)$", mf.provenance.source)
    return (m.group(1), m.group(2)) if m and mf.provenance.source.startswith("aiconfigurator") \
        else None


def framework_rows(system: str, framework: str) -> pd.DataFrame:
    """The GEMM and attention rows one framework's tables give (empty if it has none)."""
    root, version = package_root()
    frames = []
    for kind, op_dir, name in TABLES:
        path = newest_table(root, system, op_dir, framework, name) if kind in KINDS else None
        if path is None:
            continue
        try:
            df, _ = convert_table(path, kind, {"aiconfigurator-core": version},
                             str(path.relative_to(root)))
        except (ImportDataError, IndexError, KeyError):
            continue
        frames.append(df.assign(framework=f"{framework} {path.parent.name}"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def noise_table(base: pd.DataFrame, system: str, others=OTHERS) -> pd.DataFrame:
    """Per (table, other framework): shapes both measured and the median / p90 APE of the
    other's time against ``base``'s (the profile the model was fitted to)."""
    out = []
    b = base.set_index("key")["median_ms"]
    for fw in others:
        rows = framework_rows(system, fw)
        if rows.empty:
            continue
        rows = rows[rows["key"].isin(b.index)]
        keys = table_keys(rows)
        for key in sorted(set(keys)):
            sel = rows[keys == key]
            ape = np.abs(sel["median_ms"].to_numpy() / b.loc[sel["key"]].to_numpy() - 1) * 100
            out.append({"table": key, "against": str(sel["framework"].iloc[0]),
                        "shared_shapes": len(sel), "median_ape": float(np.median(ape)),
                        "p90_ape": float(np.percentile(ape, 90))})
    return pd.DataFrame(out, columns=["table", "against", "shared_shapes", "median_ape",
                                      "p90_ape"])


def render(table: pd.DataFrame, title: str):
    """A rich table of ``noise_table`` output."""
    from rich.table import Table

    t = Table(title=title)
    for col in ("table", "against", "shared shapes", "median APE %", "p90 APE %"):
        t.add_column(col, justify="left" if col in ("table", "against") else "right",
                     no_wrap=True)
    for r in table.itertuples():
        t.add_row(r.table, r.against, str(r.shared_shapes), f"{r.median_ape:.2f}",
                  f"{r.p90_ape:.2f}")
    return t
