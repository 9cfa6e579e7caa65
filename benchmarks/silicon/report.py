"""The silicon replay's error table and scatter plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

METRICS = ("ttft", "tpot")


def errors(df: pd.DataFrame) -> pd.DataFrame:
    """Signed relative error (%) of each simulated metric against the measured one."""
    out = df.copy()
    for m in METRICS:
        out[f"{m}_err_pct"] = 100.0 * (out[f"sim_{m}_ms"] / out[f"{m}_ms"] - 1.0)
    return out


def _stats(group: pd.DataFrame) -> dict:
    row = {"rows": len(group)}
    for m in METRICS:
        e = group[f"{m}_err_pct"].to_numpy()
        row[f"{m}_median_abs"] = float(np.median(np.abs(e)))
        row[f"{m}_p90_abs"] = float(np.percentile(np.abs(e), 90))
        row[f"{m}_bias"] = float(np.median(e))
    return row


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Error figures for all rows, per system, per system's mixture-of-experts rows (the
    MoE issue's bar is per system) and per model + precision (absolute %, median and p90;
    bias = median signed %)."""
    parts = [{"group": "all", **_stats(df)}]
    moe = model_classes(df).str.startswith("moe")
    groups = {"system": df["system"], "moe": df["system"].where(moe), "family": df["family"]}
    for key, by in groups.items():
        for name, g in sorted(df.groupby(by), key=lambda kv: kv[0]):
            parts.append({"group": f"{key} {name}", **_stats(g)})
    return pd.DataFrame(parts)


def model_classes(df: pd.DataFrame) -> pd.Series:
    """Each row's model class (_model_class), worked out once per model and precision."""
    pairs = list(zip(df["model_path"], df["precision"]))
    cls = {pair: _model_class(*pair) for pair in set(pairs)}
    return pd.Series([cls[pair] for pair in pairs], index=df.index, dtype=object)


def _model_class(model_path: str, precision: str) -> str:
    """sim/cost/validation.py's class of the row's served model ("moe fp8", "dense 4-bit")."""
    from benchmarks.silicon.rows import MODELS
    from sim.catalog import get_model
    from sim.config.hardware import ModelSpec
    from sim.cost.validation import model_class

    entry, fields = MODELS[model_path][precision]
    spec = ModelSpec.model_validate({**get_model(entry).model_dump(exclude={"dtype_bytes"}),
                                     **fields})
    return model_class(spec)


def record_bands(df: pd.DataFrame, csv: Path) -> Path:
    """Write the error band of each GPU and model class (sim/cost/validation.py reads it)."""
    import datetime

    import yaml

    from benchmarks.silicon.rows import SYSTEMS
    from sim.cost.validation import BANDS_FILE

    bands: dict = {}
    cls = model_classes(df)
    for (system, c), g in sorted(df.groupby([df["system"], cls]), key=lambda kv: kv[0]):
        st = _stats(g)
        bands.setdefault(SYSTEMS[system], {})[c] = {
            "rows": st["rows"], "models": sorted(g["model_path"].unique().tolist()),
            **{m: {k: round(st[f"{m}_{k}"], 1) for k in ("median_abs", "p90_abs", "bias")}
               for m in METRICS}}
    doc = {"source": f"benchmarks/silicon replay of {csv.name} (aiconfigurator-core 0.12.0, "
                     "NVIDIA's measured vLLM deployments): |servesim / measured - 1| in %",
           "created": datetime.date.today().isoformat(), "bands": bands,
           "published": published_section()}
    BANDS_FILE.write_text("# written by python -m benchmarks.silicon --record; do not edit\n"
                          + yaml.safe_dump(doc, sort_keys=False, width=100))
    return BANDS_FILE


def published_section() -> dict:
    """vLLM's CI latency benchmark points (calibrate/published.py) by GPU: measured and
    simulated batch latency with the shipped profile, signed error (%)."""
    from calibrate.published import LATENCY_BENCH, simulate

    out: dict = {}
    for p in LATENCY_BENCH:
        sim = simulate(p)
        out.setdefault(p.gpu, []).append({
            "name": p.name, "metric": p.metric, "measured_ms": round(p.measured_ms, 1),
            "simulated_ms": round(sim, 1), "error_pct": round(100 * (sim / p.measured_ms - 1), 1),
            "source": p.source})
    return out


def format_table(t: pd.DataFrame) -> str:
    head = (f"{'rows':<40} {'n':>4}  {'TTFT med':>8} {'p90':>7} {'bias':>7}  "
            f"{'TPOT med':>8} {'p90':>7} {'bias':>7}   (abs %, bias signed %)")
    lines = [head]
    for r in t.itertuples():
        lines.append(
            f"{r.group:<40} {r.rows:>4}  {r.ttft_median_abs:>8.1f} {r.ttft_p90_abs:>7.1f} "
            f"{r.ttft_bias:>+7.1f}  {r.tpot_median_abs:>8.1f} {r.tpot_p90_abs:>7.1f} "
            f"{r.tpot_bias:>+7.1f}")
    return "\n".join(lines)


def scatter(df: pd.DataFrame, path: Path) -> None:
    """Simulated vs measured TTFT and TPOT, log axes, one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, m, label in zip(axes, METRICS, ("TTFT (ms)", "TPOT (ms)")):
        for system, g in sorted(df.groupby("system"), key=lambda kv: kv[0]):
            ax.scatter(g[f"{m}_ms"], g[f"sim_{m}_ms"], s=14, alpha=0.75, label=system)
        lo = float(min(df[f"{m}_ms"].min(), df[f"sim_{m}_ms"].min())) * 0.8
        hi = float(max(df[f"{m}_ms"].max(), df[f"sim_{m}_ms"].max())) * 1.25
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
        for f in (0.85, 1.15):
            ax.plot([lo, hi], [lo * f, hi * f], color="grey", lw=0.6, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"servesim {label}")
        ax.set_title(f"{label}: {len(df)} vLLM rows (dashed: +/-15 %)")
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("servesim vs NVIDIA silicon_sample.csv (aiconfigurator-core 0.12.0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
