"""Data flows one way: the simulator core reads the cost profile format (sim/cost/profile)
and never imports the calibration harness, which writes it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from sim import pipeline
from sim.config.load import load_scenario
res = pipeline.run(load_scenario(None, ("workload.num_requests=50",)), None, plots=False)
assert res.summary["requests"]["finished"] == 50, res.summary["requests"]
print(sorted(m for m in sys.modules if m == "calibrate" or m.startswith("calibrate.")))
"""


def test_a_run_imports_no_calibration_module():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
