"""`servesim capacity SCENARIO --target-rate R`: the fewest replicas holding the SLOs at R.

Prints one row per replica count probed and the answer (replicas, GPUs, cost per hour with
--gpu-hour-price); writes DIR/points.parquet (every probe), DIR/sizing.csv and
DIR/sizing.yaml.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer
import yaml

from sim.cli.sweep import executor, interrupted
from sim.fleet.sizing import answer_line, size_fleet, sizing_rows
from sim.plan.slo import describe


def size(loaded, rate: float, budgets, seeds, out: Path, max_replicas: int, ex_args,
         resume: bool, quiet: bool, sets) -> None:
    try:
        with executor(*ex_args) as ex:
            s = size_fleet(loaded, rate, budgets, seeds, out, ex, max_replicas=max_replicas,
                           resume=resume, quiet=quiet, sets=sets)
    except KeyboardInterrupt:
        raise interrupted(out) from None
    sc = loaded.scenario
    price, router = sc.gpu_hour_price, (sc.cluster.router.name if sc.cluster else
                                        "round_robin")
    rows = sizing_rows(s, price)
    pd.DataFrame(rows).to_csv(out / "sizing.csv", index=False)
    doc = {"target_rate_req_s": rate, "rate_scale": s.rate_scale, "replicas": s.replicas,
           "gpus": s.gpus, "gpus_per_replica": s.gpus_per_replica, "router": router,
           "slo": {f"{b.name}_ms": b.ms for b in budgets}, "seeds": list(seeds),
           "cost_per_hour": (s.gpus * price if price and s.gpus else None),
           "probes": rows}
    (out / "sizing.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    if not quiet:
        typer.echo(f"SLO: {describe(budgets)}; every replica must keep up; worst of "
                   f"{len(seeds)} seed(s)")
        typer.echo(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    typer.echo(answer_line(s, price, router))
    typer.echo(f"probes: {out / 'points.parquet'} ({s.ran:,} simulated, {s.wall_s:.1f} s)")
