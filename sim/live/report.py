"""The fidelity report: ``report.json`` (every number), ``report.md`` (tables) and
``step_times.png`` (the fitted model's step times against the measured ones)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sim.live.compare import KINDS, decode_by_batch, latency_rows, repeat_noise, step_errors

COLORS = {"prefill": "tab:blue", "mixed": "tab:orange", "decode": "tab:green"}


def _heldout(model: Path) -> dict:
    from sim.cost.profile.model_file import load_model_file

    mf = load_model_file(model)
    return {op: (t.heldout.model_dump() if t.heldout else None) for op, t in mf.ops.items()}


def build(r, model: Path, sim, lives, device: str, overhead: dict | None = None) -> dict:
    names = [f"live-{i}" for i in range(1, len(lives) + 1)]
    summaries = {"sim": sim.summary, **{n: lv.output.summary for n, lv in zip(names, lives)}}
    runs = {n: {"steps": s["steps"]["count"], "duration_s": s["duration_s"],
                "finished": s["requests"]["finished"],
                "output_token_per_s": s["throughput"]["output_token_per_s"]}
            for n, s in summaries.items()}
    for n, lv in zip(names, lives):
        runs[n].update(live=lv.output.summary["live"], loadavg_1m=list(lv.loadavg))
    return {
        "scenario": r.scenario.name, "device": device, "model": r.model.name,
        "fitted_model": str(model), "fitted_heldout_ape": _heldout(model),
        "fitted_step_overhead_ms": _overhead_ms(model),
        "fitted_step_overhead": _overhead(model), "overhead_measurement": overhead,
        "runs": runs,
        "step_error": {n: step_errors(lv.steps) for n, lv in zip(names, lives)},
        "decode_by_batch": {n: decode_by_batch(lv.steps) for n, lv in zip(names, lives)},
        "latency": {ref: latency_rows(summaries, ref) for ref in names},
        "noise": {"step_repeat": (repeat_noise(lives[0].steps, lives[1].steps)
                                  if len(lives) > 1 else None)},
    }


def _overhead_ms(model: Path) -> float:
    from sim.cost.profile.model_file import load_model_file

    return load_model_file(model).step_overhead_ms


def _overhead(model: Path) -> dict:
    """The model file's per-step overhead terms (ms)."""
    from sim.cost.profile.model_file import load_model_file

    mf = load_model_file(model)
    table = mf.step_overhead_by_requests
    return {"fixed_ms": mf.step_overhead_ms, "per_request_ms": mf.step_overhead_per_request_ms,
            "per_token_ms": mf.step_overhead_per_token_ms,
            "by_requests": table.model_dump() if table is not None else None}


def _overhead_text(rep: dict) -> str:
    o = rep["fitted_step_overhead"]
    where = " (measured on the live executor)" if rep["overhead_measurement"] else ""
    if o["by_requests"]:
        t = o["by_requests"]
        pairs = ", ".join(f"{n}: {v:.2f}" for n, v in zip(t["requests"], t["ms"]))
        return (f"per-step overhead by requests ({pairs}) ms + {o['per_token_ms']:.3f} "
                f"ms/token{where}")
    return (f"per-step overhead {o['fixed_ms']:.3f} ms + {o['per_request_ms']:.3f} "
            f"ms/request + {o['per_token_ms']:.3f} ms/token{where}")


def write_report(out: Path, r, model: Path, sim, lives, device: str,
                 overhead: dict | None = None) -> dict:
    rep = build(r, model, sim, lives, device, overhead)
    (out / "report.json").write_text(json.dumps(rep, indent=2, default=_plain) + "\n")
    (out / "report.md").write_text(markdown(rep))
    pd.concat([lv.steps.assign(run=f"live-{i}") for i, lv in enumerate(lives, 1)]).to_parquet(
        out / "step_errors.parquet", index=False)
    plot_steps(lives[0].steps, out / "step_times.png", f"{rep['scenario']}: step times")
    return rep


def _plain(x):
    return x.item() if hasattr(x, "item") else str(x)


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.1f}%"


def _num(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def _by_batch(rep: dict, names: list[str]) -> list[str]:
    """Decode steps by batch size: median bias and time bias per live run."""
    groups = {g["requests"]: g for g in rep["decode_by_batch"][names[0]]}
    if not groups:
        return []
    per = {n: {g["requests"]: g for g in rep["decode_by_batch"][n]} for n in names}
    lines = ["", "Decode steps by batch size: median bias / time bias (sum predicted / sum "
             "measured - 1).", "", "| requests | " + " | ".join(
                 f"{n} steps | {n} bias" for n in names) + " |",
             "|---|" + "---|---|" * len(names)]
    for label in groups:
        cells = []
        for n in names:
            g = per[n].get(label)
            cells += ([str(g["steps"]), f"{g['median_bias']:+.1f}% / {g['time_bias']:+.1f}%"]
                      if g else ["0", "-"])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def markdown(rep: dict) -> str:
    names = [n for n in rep["runs"] if n != "sim"]
    live1 = rep["runs"][names[0]]["live"]
    lines = [f"# Fidelity: {rep['scenario']} ({rep['model']}) on {rep['device']}", "",
             f"Live: {live1['device_name']}, {live1['dtype']}, attention {live1['attention']}, "
             f"clock {live1['clock']}, {live1['layers_executed']}/{live1['model_layers']} "
             f"layers executed (scale {live1['layer_scale']:g}). Fitted model: "
             f"`{rep['fitted_model']}`.", ""]
    lines += ["## Per-step time error", "",
              "The fitted model prices each live step's own plan; APE = |predicted / measured"
              " - 1|, bias = median of predicted / measured - 1.", "",
              "| run | steps | class | median APE | p90 APE | median bias |",
              "|---|---|---|---|---|---|"]
    for n in names:
        for kind in ("all", *KINDS):
            e = rep["step_error"][n][kind]
            if e["steps"]:
                lines.append(f"| {n} | {e['steps']} | {kind} | {e['median_ape']:.1f}% | "
                             f"{e['p90_ape']:.1f}% | {e['median_bias']:+.1f}% |")
    lines += _by_batch(rep, names)
    noise = rep["noise"]["step_repeat"]
    if noise and noise["steps"]:
        lines += ["", f"Repeat noise: {noise['steps']} steps with identical plans in "
                  f"live-1 and live-2: median |live-2 / live-1 - 1| {noise['median_ape']:.1f}%, "
                  f"p90 {noise['p90_ape']:.1f}%."]
    lines += ["", "## Latency (ms): fitted simulation vs live", ""]
    head = ["metric", "stat", "sim", *names, *[f"sim vs {n}" for n in names],
            *[f"{n} vs live-1" for n in names[1:]]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    per_ref = {ref: rep["latency"][ref] for ref in names}
    for i, row in enumerate(per_ref[names[0]]):
        errs = [_pct(100 * per_ref[n][i]["sim_err"]) for n in names]
        noise_cols = [_pct(100 * row[f"{n}_err"]) for n in names[1:]]
        lines.append("| " + " | ".join([row["metric"], row["stat"], _num(row["sim"]),
                                        *[_num(row[n]) for n in names], *errs, *noise_cols])
                     + " |")
    lines += ["", "## Runs", "", "| run | steps | duration (s) | finished | output tok/s | "
              "load (1 min) |", "|---|---|---|---|---|---|"]
    for n, run in rep["runs"].items():
        load = "-" if "loadavg_1m" not in run else "{:.1f} -> {:.1f}".format(*run["loadavg_1m"])
        lines.append(f"| {n} | {run['steps']} | {run['duration_s']:.2f} | {run['finished']} | "
                     f"{run['output_token_per_s']:.1f} | {load} |")
    held = rep["fitted_heldout_ape"]
    lines += ["", "Fitted model held-out error (median / p90 APE): " + ", ".join(
        f"{op} {h['median_ape']:.1f}% / {h['p90_ape']:.1f}%" for op, h in held.items() if h)
        + "; " + _overhead_text(rep) + "."]
    return "\n".join(lines) + "\n"


def plot_steps(steps: pd.DataFrame, path: Path, title: str) -> None:
    """Left: predicted vs measured per step (log-log, by class). Right: both over steps."""
    fig = Figure(figsize=(11, 4.5))
    ax, ax2 = fig.subplots(1, 2)
    meas, pred = steps["duration_s"] * 1e3, steps["predicted_s"] * 1e3
    for kind in KINDS:
        m = (steps["kind"] == kind).to_numpy()
        if m.any():
            ax.scatter(meas[m], pred[m], s=6, alpha=0.5, color=COLORS[kind], label=kind)
    if len(steps):
        lo, hi = float(min(meas.min(), pred.min())), float(max(meas.max(), pred.max()))
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, label="predicted = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("live step time (ms)")
    ax.set_ylabel("fitted model (ms)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    x = np.arange(len(steps))
    ax2.plot(x, meas, color="0.6", lw=0.6, label="live (measured)")
    ax2.plot(x, pred, color="tab:red", lw=0.6, alpha=0.8, label="fitted model")
    ax2.set_xlabel("step")
    ax2.set_ylabel("step time (ms)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
