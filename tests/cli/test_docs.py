"""README stays in sync with the code it documents."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim.cli import main
from sim.config.reference import embedded, reference
from sim.metrics.recorder import STEP_COLUMNS
from tests.cli.test_cli_errors import write
from tests.cli.test_cli_run import SMALL

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_scenario_reference_matches_the_schema():
    # refresh with: python -m sim.config.reference README.md
    assert embedded(README) == reference()


def test_readme_shows_the_two_commands():
    assert "make run" in README and "make test" in README


def test_output_reference_names_every_column_and_key(tmp_path):
    out = tmp_path / "o"
    assert main(["run", str(write(tmp_path, SMALL)), "--out", str(out), "-q", "--no-plots"]) == 0
    requests = pd.read_parquet(out / "requests.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    for col in [*requests.columns, *steps.columns, *STEP_COLUMNS]:
        assert f"`{col}`" in README, col
    summary = json.loads((out / "summary.json").read_text())
    for key in summary:
        assert f"| `{key}` |" in README, key
