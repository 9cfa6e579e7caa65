"""--executor ray runs each point as a Ray task and writes the same points.parquet."""

from __future__ import annotations

import pandas as pd
import pytest

from .helpers import TINY, cli

pytest.importorskip("ray", reason="the ray extra is installed by `make test`")


def test_ray_and_local_give_the_same_points(tmp_path):
    args = ["sweep", TINY, "--grid", "engine.max_num_seqs=8,64", "--rate", "6,12", "-q",
            "--no-plots"]
    assert cli(*args, "--executor", "local", "--jobs", "1", "--out", tmp_path / "local") == 0
    assert cli(*args, "--executor", "ray", "--jobs", "2", "--out", tmp_path / "ray") == 0
    local = pd.read_parquet(tmp_path / "local" / "points.parquet")
    ray = pd.read_parquet(tmp_path / "ray" / "points.parquet")
    assert len(local) == 4
    pd.testing.assert_frame_equal(local, ray)
    assert (tmp_path / "local" / "points.parquet").read_bytes() == (
        tmp_path / "ray" / "points.parquet").read_bytes()
