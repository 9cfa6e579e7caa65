"""Whether two simulated results served the same workload rows, up to its scales.

``compare`` matches requests by id and lengths, so that two traces both numbering their
requests 0..n-1 are not taken for one. The same trace rows with prompts 4x longer
(``workload.prompt_scale``), or replayed faster (``rate_scale``), or the same generated
rows at another ``arrival.rate`` (the lengths stream does not depend on the arrivals) are
the same requests with other lengths or times: their workloads (config.json) agree once
the scales are left out, and the seed and trace file are the same.
"""

from __future__ import annotations

import json
from pathlib import Path

from traces.errors import InputError
from traces.files import read_utf8

SCALES = ("prompt_scale", "output_scale", "rate_scale", "warmup_s")
CONFIG_MAX_BYTES = 64 << 20  # a result's config.json (the resolved scenario) is kilobytes


def rows_key(path: Path) -> dict | None:
    """The result's workload and seed without its scales (None without config.json)."""
    try:  # a regular file only: a FIFO of that name would block the read
        cfg = json.loads(read_utf8(path / "config.json", "config.json", CONFIG_MAX_BYTES))
        w = dict(cfg["workload"])
    except (InputError, ValueError, KeyError, TypeError):
        return None
    for k in SCALES:
        w.pop(k, None)
    if isinstance(w.get("arrival"), dict):
        w["arrival"] = {k: v for k, v in w["arrival"].items() if k != "rate"}
    if w.get("trace"):
        w["trace"] = str((path / w["trace"]).resolve())  # relative to the result's folder
    return {"seed": cfg.get("seed"), "workload": w}


def same_rows(a: Path, b: Path) -> bool:
    key = rows_key(a)
    return key is not None and key == rows_key(b)
