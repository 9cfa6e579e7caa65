"""`servesim plot DIR`: every plot of a sweep or capacity folder, PNG and SVG, in DIR/plots.

    rate_curves   each budget's metric vs offered rate, one line per configuration
    frontier      output tokens/s per GPU vs tokens/s per user, Pareto front
    kv_timeline   KV occupancy vs requests waiting on KV memory over time for the chosen point,
                  preemptions marked
    ttft_cdf, tpot_cdf   that point's latency distributions, percentiles and budget marked

The chosen point is simulated again (results in DIR/chosen, as `servesim run` writes
them): the best configuration at its capacity for a capacity search; for a sweep the
highest load where the engine kept up and every budget held (or ``--point ID``). A capacity
folder's ``--point ID`` runs into DIR/point-ID: its chosen/ stays the search's answer.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd

from sim import pipeline
from sim.plan.grid import LOAD_UNITS, RATE_KEY, Point, short_key
from sim.plan.point import Base
from sim.plan.slo import Budget, parse_slo, scenario_slo
from sim.plan.store import load_points
from sim.report import plots, sweep_plots
from sim.report.outpath import OutPathError
from traces.errors import InputError, clip, clip_path
from traces.files import read_parquet

FORMATS = ("svg",)  # besides the PNG
CHOSEN = "chosen"


def budgets_of(manifest: dict) -> tuple[Budget, ...]:
    if manifest.get("slo"):
        return parse_slo(",".join(manifest["slo"]))
    try:
        return scenario_slo(Base.of_manifest(manifest).load().scenario)
    except InputError:
        return ()


def overrides_text(sets) -> str:
    """The command line's --set lines as a title shows them (SLOs are drawn, not listed)."""
    shown = [s for s in sets if not s.startswith(("slo.", "gpu_hour_price"))]
    return " ".join(f"{short_key(k)}={v}" for k, _, v in (s.partition("=") for s in shown))


def headline(base: Base, seeds) -> str:
    sc = base.load().scenario
    seeds = list(seeds)
    folded = f", worst of {len(seeds)} seeds" if len(seeds) > 1 else f", seed {seeds[0]}"
    sets = overrides_text(base.sets)
    return (f"{sc.name}{f' [{sets}]' if sets else ''}: {sc.model_spec.name} on "
            f"{sc.tensor_parallel_size}x {sc.gpu_spec.name}{folded}")


def point_of(rec: dict, load_key: str | None) -> Point:
    params = dict(rec["params"])
    seed = params.pop("seed")
    load = params.pop(load_key) if load_key else None
    return Point(tuple(params.items()), load_key, load, seed)


def default_point(df: pd.DataFrame, budgets) -> str:
    """The highest-load point where the engine kept up and every budget held."""
    ok = df["engine_sustains"].astype(bool)
    for b in budgets:  # failures (rejected, unfinished) counted, as capacity judges them
        ok &= pd.Series([b.holds(m) for m in df.to_dict("records")], index=df.index, dtype=bool)
    if ok.any():
        pick = df[ok].sort_values("offered_rate_mean", kind="stable").iloc[-1]
    else:
        pick = df.sort_values("offered_rate_mean", kind="stable").iloc[0]
    return str(pick["point_id"])


def simulate_chosen(out: Path, base: Base, point: Point, folder: str = CHOSEN
                    ) -> pipeline.RunOutput:
    """Run ``point`` again with every output (requests, steps) into DIR/``folder``."""
    dest = Path(out) / folder
    meta = json.dumps({"id": point.id, "overrides": point.overrides, "label": point.label},
                      indent=2) + "\n"
    try:
        return pipeline.run(base.load(point.overrides), dest, plots=False,
                            files={"point.json": meta})
    except OutPathError as e:  # the folder is servesim's choice here, not an --out given
        raise OutPathError(str(e).replace(f"--out {clip_path(dest)!r}: ", f"{clip_path(dest)}: ",
                                          1).removesuffix(" or choose another --out")) from None


def _chosen(out: Path, df: pd.DataFrame, manifest: dict, base: Base, point_id: str | None,
            budgets) -> tuple[Path, dict]:
    dest = out / CHOSEN
    meta = dest / "point.json"
    if point_id is None and meta.exists():
        return dest, json.loads(meta.read_text())
    pid = point_id or default_point(df, budgets)
    point = point_of(_point_record(out, pid), manifest["load_key"])
    # a capacity search's chosen/ is its answer (chosen.yaml runs to it again): another
    # point's run goes beside it
    folder = f"point-{pid}" if point_id and manifest.get("kind") == "capacity" else CHOSEN
    simulate_chosen(out, base, point, folder)
    return out / folder, json.loads((out / folder / "point.json").read_text())


def _point_record(out: Path, pid: str) -> dict:
    """The finished point ``pid``'s record (points/<pid>.json)."""
    path = out / "points" / f"{pid}.json"
    if not re.fullmatch(r"[0-9a-f]{1,64}", pid) or not path.is_file():
        raise InputError(f"--point {clip(pid)!r}: no such point in {clip_path(out)} (see "
                         "points.parquet point_id)")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        point_of(rec, None)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"{clip_path(path)}: unreadable point record; rerun the sweep with "
                         "--resume to redo it") from None
    return rec


def _load_text(overrides, load_key) -> str:
    parts = []
    for k, v in overrides:
        if k == load_key:
            parts.append(f"{v:g} req/s" if k == RATE_KEY else f"{LOAD_UNITS[k]} {v:g}")
        elif k != "seed":
            parts.append(f"{short_key(k)}={v}")
    seed = dict(overrides).get("seed")
    return " ".join(parts) + (f", seed {seed}" if seed is not None else "")


def plot_dir(out: Path, point_id: str | None = None) -> list[Path]:
    out = Path(out)
    manifest, df = load_points(out)
    if df.empty:
        raise InputError(f"{clip_path(out)}: its points table has no rows, nothing to plot; "
                         "rerun the sweep (--resume runs the points missing)")
    base = Base.of_manifest(manifest)
    head = headline(base, manifest["seeds"])  # the scenario loads: checked before any file
    budgets = budgets_of(manifest)
    if point_id is not None:
        _point_record(out, point_id)
    load_key = manifest["load_key"]
    _check_plots_folder(out / "plots")
    # the chosen point's tables first (simulated again if missing): a bad one stops the
    # command before any plot is drawn
    chosen, meta = _chosen(out, df, manifest, base, point_id, budgets)
    steps = _table(chosen / "steps.parquet", ("start_s", "kv_used_fraction", "num_waiting",
                                                "num_preempted"))
    reqs = _table(chosen / "requests.parquet", ("ttft_s", "tpot_s"))
    dest = _plots_folder(out)
    x_col, x_label = (("load", "offered rate (req/s)") if load_key == RATE_KEY else
                      ("offered_rate_mean", "offered mean rate (req/s)"))
    sweep_plots.rate_curves(df, budgets, dest / "rate_curves.png", x_col=x_col, x_label=x_label,
                            title=head, formats=FORMATS)
    sweep_plots.frontier_plot(df, dest / "frontier.png", title=f"{head}: throughput vs "
                              "interactivity", formats=FORMATS)
    sets = overrides_text(base.sets)
    what = (f"{base.load().scenario.name}{f' [{sets}]' if sets else ''}: "
            f"{_load_text(meta['overrides'], load_key)}")
    plots.kv_vs_waiting(steps, dest / "kv_timeline.png",
                        f"{what}: KV occupancy vs waiting on KV memory", formats=FORMATS)
    slo = {b.metric: b.ms for b in budgets}
    plots.latency_cdf(reqs, "ttft_s", dest / "ttft_cdf.png", title=f"{what}: TTFT",
                      what="TTFT", slo_ms=slo.get("ttft"), formats=FORMATS)
    plots.latency_cdf(reqs, "tpot_s", dest / "tpot_cdf.png", title=f"{what}: TPOT",
                      what="TPOT", slo_ms=slo.get("tpot"), formats=FORMATS)
    return sorted(dest.glob("*.png"))


def _table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A parquet table the chosen point's run wrote, with the columns the plots read."""
    df = read_parquet(path, f"; remove {path.parent.name}/ to simulate the point again",
                      "parquet table")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{clip_path(path)}: no column {missing[0]!r}; not as servesim "
                         f"wrote it: remove {path.parent.name}/ to simulate the point again")
    return df


def _check_plots_folder(dest: Path) -> None:
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_dir()):
        raise OutPathError(f"{clip_path(dest)}: not a folder servesim made (a link or a "
                           "file); remove it to redraw the plots")


def _plots_folder(out: Path) -> Path:
    """DIR/plots, made if missing; a link or a file there is refused."""
    dest = out / "plots"
    _check_plots_folder(dest)
    try:
        dest.mkdir(exist_ok=True)
    except OSError as e:
        raise OutPathError(f"{clip_path(dest)}: cannot create the plots folder "
                           f"({e.strerror or e})") from None
    return dest
