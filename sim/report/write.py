"""Write a run's results to a folder, all or nothing.

Files: summary.json, config.json (the resolved scenario with derived values),
requests.parquet, steps.parquet, ttft_cdf.png, kv_vs_waiting.png, and
steps.jsonl with --step-log. Everything is written into a sibling temporary
folder that replaces the destination only when complete, so a failed run never
leaves half a result behind.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from sim.report import plots
from sim.report.tables import requests_table, steps_table
from sim.runner import RunResult


def dump_json(obj, path: Path) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"cannot serialize {type(x).__name__}")


class ResultWriter:
    """Stages files in a temporary folder; ``commit`` moves it into place."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", dir=self.out.parent))

    def path(self, name: str) -> Path:
        return self.tmp / name

    def write(self, res: RunResult, summary: dict, config: dict, *, plot: bool = True) -> None:
        dump_json(summary, self.path("summary.json"))
        dump_json(config, self.path("config.json"))
        req, steps = requests_table(res), steps_table(res)
        req.to_parquet(self.path("requests.parquet"), index=False)
        steps.to_parquet(self.path("steps.parquet"), index=False)
        if plot:
            title = res.resolved.scenario.name
            plots.ttft_cdf(req, self.path("ttft_cdf.png"), f"{title}: time to first token")
            plots.kv_vs_waiting(steps, self.path("kv_vs_waiting.png"),
                                f"{title}: KV occupancy vs waiting queue")

    def commit(self) -> Path:
        if self.out.exists():
            shutil.rmtree(self.out)
        self.tmp.rename(self.out)
        return self.out

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
