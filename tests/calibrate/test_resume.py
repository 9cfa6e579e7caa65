"""An interrupted profile resumes where it stopped and re-measures nothing already written."""

from __future__ import annotations

import pandas as pd
import pytest

from calibrate import timing
from calibrate.profile import COLUMNS, ProfileError, read_profile, run_profile
from calibrate.shapes import PRESETS, derive_shapes
from sim.catalog import get_model
from sim.cli import main
from traces.errors import InputError

SHAPES = derive_shapes(get_model("tiny-2l"), 1, max_num_batched_tokens=32, max_num_seqs=8,
                       max_model_len=1024, grid=PRESETS["quick"], dtype="float32")


class CountingTimer:
    """calibrate.timing.measure with fewer repeats, remembering which calls it timed."""

    def __init__(self):
        self.calls = 0

    def __call__(self, fn, device, **kw):
        self.calls += 1
        return timing.measure(fn, device, warmup=1, repeats=2, wall=kw.get("wall", False))


def test_resume_measures_only_the_missing_shapes(tmp_path):
    path = tmp_path / "p.parquet"
    first = CountingTimer()
    run = run_profile(SHAPES, path, "cpu", max_rows=7, timer=first)
    assert (run.measured, first.calls, run.remaining) == (7, 7, len(SHAPES) - 7)
    written = read_profile(path)
    assert len(written) == 7  # the file is complete after the interruption

    second = CountingTimer()
    run = run_profile(SHAPES, path, "cpu", timer=second)
    assert (run.skipped, run.measured, second.calls) == (7, len(SHAPES) - 7, len(SHAPES) - 7)
    done = read_profile(path)
    assert len(done) == len(SHAPES) and done["key"].is_unique
    assert set(done["key"]) == {s.key() for s in SHAPES}
    # rows written before the interruption are kept exactly as they were
    kept = done.set_index("key").loc[written["key"], "median_ms"]
    assert list(kept) == list(written["median_ms"])

    third = CountingTimer()
    run = run_profile(SHAPES, path, "cpu", timer=third)
    assert (run.measured, third.calls) == (0, 0)


def test_cli_max_rows_interrupts_and_a_rerun_completes(tmp_path, capsys):
    out = tmp_path / "p.parquet"
    args = ["calibrate", "profile", "--model", "tiny-2l", "--device", "cpu", "--grid", "quick",
            "--max-num-batched-tokens", "16", "--max-num-seqs", "4", "--max-model-len", "512",
            "--warmup", "0", "--repeats", "1", "-q", "--out", str(out)]
    assert main([*args, "--max-rows", "5"]) == 0
    assert "rerun to resume" in capsys.readouterr().out
    assert len(pd.read_parquet(out)) == 5
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "5 already there" in printed and "left" not in printed


def test_a_profile_of_another_device_is_not_extended(tmp_path):
    path = tmp_path / "p.parquet"
    run_profile(SHAPES[:2], path, "cpu", timer=CountingTimer())
    df = pd.read_parquet(path)
    df["device"] = "NVIDIA H100 80GB HBM3"
    df.to_parquet(path)
    with pytest.raises(ProfileError, match="NVIDIA H100"):
        run_profile(SHAPES, path, "cpu", timer=CountingTimer())


def test_bad_profiles_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_profile(tmp_path / "missing.parquet")
    text = tmp_path / "x.parquet"
    text.write_text("not parquet")
    with pytest.raises(InputError, match="not a parquet profile"):
        read_profile(text)
    other = tmp_path / "o.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(other)
    with pytest.raises(InputError, match="missing columns"):
        read_profile(other)
    bad = tmp_path / "b.parquet"
    pd.DataFrame([{c: 0 for c in COLUMNS} | {"op": "gemm", "median_ms": -1.0}]).to_parquet(bad)
    with pytest.raises(InputError, match="median_ms"):
        read_profile(bad)


@pytest.mark.parametrize("args, needle", [
    (["fit", "{tmp}/missing.parquet"], "profile not found"),
    (["validate", "{tmp}/missing.yaml", "{tmp}/missing.parquet"], "model file not found"),
    (["profile", "--model", "no-such-model", "--device", "cpu"], "--model"),
    (["profile", "--model", "tiny-2l", "--device", "tpu"], "--device"),
    (["fit-steps", "{tmp}/missing.csv"], "step log not found"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, args, needle):
    code = main(["calibrate", *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("servesim: error: ") and needle in lines[0]
