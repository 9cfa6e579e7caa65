"""`python -m benchmarks.silicon`: replay NVIDIA's measured vLLM deployments through servesim.

Reads every vLLM aggregated-serving row of aiconfigurator-core's `silicon_sample.csv` (the
`aiconfigurator` extra; or `--csv` a file of the same columns, plain or gzipped), replays each
row servesim can represent the way it was measured (benchmarks/silicon/rows.py names the
protocol of each and its sources), prints the error table, and writes to `--out`:
  rows.csv            every replayed row: measured and simulated TTFT/TPOT, signed errors
  errors.csv          the table printed (all, per system, each system's MoE rows, per family)
  unrepresentable.csv every row not replayed, with the reason
  scatter.png         simulated vs measured, log axes, one colour per system
`--record` also writes the error band per GPU and model class to
calibrate/models/validation.yaml, which `servesim run`, `capacity` and `replay-bench` print
beside their answers (sim/cost/validation.py); it needs the whole shipped CSV.
`--loso [all|frontend_us|moe_reach|eager_ms|eager_ms_hopper|eager_moe_ms]` also replays the
rows that read each value chosen on these rows (the API server's time per prompt token; the
MoE layers' expert reach; the eager launch time per dense block on Blackwell and on Hopper,
and per MoE block) at each of its candidates and prints, per system held out, its errors at
the value chosen on the other systems beside the in-sample ones (loso.csv, loso_rows.csv;
benchmarks/silicon/loso.py; about fifteen times the plain run for all five).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from benchmarks.silicon import loso, report
from benchmarks.silicon.replay import model_spec, replay
from benchmarks.silicon.rows import Row, protocol, read_rows, unrepresentable


def shipped_csv() -> Path:
    try:
        import aiconfigurator_core
    except ImportError:
        sys.exit("benchmarks.silicon: aiconfigurator-core is not installed "
                 "(pip install 'servesim[aiconfigurator]'), or give --csv")
    return Path(aiconfigurator_core.__file__).parent / "systems" / "silicon_sample.csv"


def _one(row: Row, knob: str | None = None, value: float | None = None) -> dict:
    """One replayed row, or ``{"id", "refused"}``: servesim refused the deployment (a
    shape or split no shipped table prices, KV that does not fit) in one line. KNOB,
    VALUE: one of the values chosen on these rows at a candidate instead of the shipped
    one (benchmarks/silicon/loso.py)."""
    from traces.errors import InputError

    p, sets = (protocol(row), ()) if knob is None else loso.KNOBS[knob].at(row, value)
    try:
        sim = replay(row, p, sets)
    except (InputError, ValueError) as e:
        return {"id": row.id, "refused": str(e).splitlines()[0]}
    return {**asdict(row), "family": row.family, "protocol": p.name,
            "num_prompts": p.num_prompts, "served_tp": p.tensor_parallel or row.tp,
            "served_dp": p.data_parallel or row.attn_dp,
            "served_ep": row.moe_ep > 1 if p.expert_parallel is None else p.expert_parallel,
            "kv_fp8": model_spec(row, p).get("kv_dtype_bytes") == 1,
            "sim_ttft_ms": sim["ttft_mean"], "sim_tpot_ms": sim["tpot_mean"],
            "sim_ttft_median_ms": sim["ttft_median"], "sim_tpot_median_ms": sim["tpot_median"],
            "sim_preemptions": sim["preemptions"], "sim_warnings": sim["warnings"]}


def run(rows: list[Row], jobs: int = 1, knob: str | None = None,
        value: float | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """(replayed rows with their errors, rows servesim refused with the reason)."""
    knobs, values = [knob] * len(rows), [value] * len(rows)
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_one, rows, knobs, values, chunksize=4))
    else:
        done = list(map(_one, rows, knobs, values))
    refused = [d for d in done if "refused" in d]
    by_id = {r.id: r for r in rows}
    skipped = [{"id": d["id"], "model_path": by_id[d["id"]].model_path,
                "system": by_id[d["id"]].system, "precision": by_id[d["id"]].precision,
                "reason": f"refused: {d['refused']}"} for d in refused]
    return report.errors(pd.DataFrame([d for d in done if "refused" not in d])), skipped


def _leave_one_out(df: pd.DataFrame, rows: list[Row], jobs: int, knob: loso.Knob):
    """(loso.table, every row's errors by candidate) over every candidate of KNOB: the rows
    that read it replayed at each, the others as they ran at the shipped value (``df``)."""
    shipped = knob.shipped()
    mine = [r for r in rows if knob.depends(r)]
    ids = {r.id for r in mine}
    df = df.assign(moe=report.model_classes(df).str.startswith("moe").to_numpy(),
                   depends=df["id"].isin(ids))
    moe = dict(zip(df["id"], df["moe"]))
    fixed = df[~df["depends"]]
    by_value = {shipped: df}
    for v in knob.candidates:
        if v != shipped:
            again, _ = run(mine, jobs, knob.name, v)
            again = again.assign(moe=again["id"].map(moe).astype(bool), depends=True)
            by_value[v] = pd.concat([fixed, again], ignore_index=True)
    return loso.table(by_value, shipped, knob.metric), by_value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.silicon", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, help="silicon CSV (default: aiconfigurator-core's)")
    ap.add_argument("--out", type=Path, default=Path("results/silicon"),
                    help="results folder (a servesim result folder or a new path)")
    ap.add_argument("--match", default="", help="replay only rows whose id contains this")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--record", action="store_true",
                    help="write the error bands to calibrate/models/validation.yaml")
    ap.add_argument("--loso", nargs="?", const="all", choices=["all", *loso.KNOBS],
                    help="also the leave-one-system-out figures of the values chosen on "
                    "these rows (all, or one: " + ", ".join(loso.KNOBS) + "; loso.csv)")
    args = ap.parse_args(argv)

    from sim.report.write import ResultWriter
    from traces.errors import InputError

    if args.record and (args.csv is not None or args.match):
        ap.error("--record needs the whole shipped CSV (no --csv, no --match)")
    try:
        rows = read_rows(args.csv or shipped_csv())
        writer = ResultWriter(args.out)
    except InputError as e:  # bad --csv or --out: one line, exit 2, nothing written
        print(f"python -m benchmarks.silicon: {e}", file=sys.stderr)
        return 2
    rows = [r for r in rows if args.match in r.id]
    skipped = [{"id": r.id, "model_path": r.model_path, "system": r.system,
                "precision": r.precision, "reason": unrepresentable(r)}
               for r in rows if unrepresentable(r)]
    todo = [r for r in rows if not unrepresentable(r)]
    try:
        df, refused = run(todo, args.jobs)
        skipped += refused
        t = report.table(df)
        df.to_csv(writer.path("rows.csv"), index=False)
        t.to_csv(writer.path("errors.csv"), index=False)
        pd.DataFrame(skipped, columns=["id", "model_path", "system", "precision",
                                       "reason"]).to_csv(
            writer.path("unrepresentable.csv"), index=False)
        report.scatter(df, writer.path("scatter.png"))
        held = []
        for name in ([] if not args.loso else
                     loso.KNOBS if args.loso == "all" else [args.loso]):
            knob = loso.KNOBS[name]
            t_k, by_value = _leave_one_out(df, todo, args.jobs, knob)
            held.append((knob, t_k.assign(knob=name), loso.scores(by_value)))
            mode = "a" if len(held) > 1 else "w"
            pd.concat([d.assign(knob=name, value=v) for v, d in by_value.items()]).to_csv(
                writer.path("loso_rows.csv"), index=False, mode=mode, header=mode == "w")
        if held:
            pd.concat([t_k for _, t_k, _ in held]).to_csv(writer.path("loso.csv"), index=False)
    except BaseException:
        writer.abort()
        raise
    out = writer.commit()
    if args.record:
        path = report.record_bands(df, shipped_csv())
        print(f"error bands: {path}")
    print(report.format_table(t))
    for knob, t_k, by_v in held:
        m = knob.metric.upper()
        print(f"\n{knob.what} ({knob.name}, chosen on {m}): {m} median abs error (all rows / "
              "the rows that read it) " + ", ".join(
                  f"{r.value:g}: {getattr(r, knob.metric + '_median'):.2f} / "
                  f"{getattr(r, 'depends_' + knob.metric + '_median'):.2f}"
                  for r in by_v.itertuples()))
        print(loso.format_table(t_k))
    reasons = pd.Series([s["reason"] for s in skipped]).value_counts()
    print(f"\n{len(df)} of {len(rows)} vLLM aggregated rows replayed; not represented:")
    for reason, n in reasons.items():
        print(f"  {n:>4}  {reason}")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
