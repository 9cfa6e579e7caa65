"""`profile --passes`: later sweeps re-time the shapes measured in the run and each row
keeps its quietest pass; the file is complete after every row."""

from __future__ import annotations

from calibrate.profile import read_profile, run_profile
from calibrate.shapes import PRESETS, derive_shapes
from calibrate.timing import Timing
from sim.catalog import get_model

SHAPES = derive_shapes(get_model("tiny-2l"), 1, max_num_batched_tokens=32, max_num_seqs=8,
                       max_model_len=1024, grid=PRESETS["quick"], dtype="float32")


class ScriptedTimer:
    """Call c of shape i takes medians[c][i % 3] ms: a burst of contention in pass 0 for
    shape 0, in pass 1 for shape 1, none for shape 2 (times in every pass equal)."""

    medians = ((9.0, 2.0, 3.0), (1.0, 8.0, 3.0), (1.5, 2.5, 3.0))

    def __init__(self, shapes):
        self.index = {s.key(): i for i, s in enumerate(shapes)}
        self.calls: dict[int, int] = {}

    def builder(self, shape, device):
        return shape.key(), False  # the "function" is the key: no torch needed

    def __call__(self, key, device, **kw):
        i = self.index[key]
        c = self.calls.get(i, 0)
        self.calls[i] = c + 1
        m = self.medians[c][i % 3]
        return Timing(m, m * 0.9, m * 1.1, kw["repeats"])


def test_each_row_keeps_its_quietest_pass(tmp_path):
    path, shapes = tmp_path / "p.parquet", SHAPES[:6]
    timer = ScriptedTimer(shapes)
    run = run_profile(shapes, path, "cpu", repeats=4, passes=3, timer=timer,
                      builder=timer.builder)
    assert run.measured == 6 and set(timer.calls.values()) == {3}
    df = read_profile(path).set_index("key")
    got = [df.loc[s.key(), "median_ms"] for s in shapes]
    assert got == [1.0, 2.0, 3.0] * 2
    assert (df["repeats"] == 4).all() and len(df) == 6
    assert df.loc[shapes[0].key(), "p90_ms"] == 1.1  # the spread is the kept pass's


def test_later_passes_cover_only_the_rows_of_this_run(tmp_path):
    path, shapes = tmp_path / "p.parquet", SHAPES[:6]
    first = ScriptedTimer(shapes)
    run = run_profile(shapes, path, "cpu", passes=2, max_rows=4, timer=first,
                      builder=first.builder)
    assert (run.measured, run.remaining) == (4, 2)
    assert first.calls == {0: 2, 1: 2, 2: 2, 3: 2}
    kept = read_profile(path).set_index("key")["median_ms"].to_dict()
    assert kept[shapes[0].key()] == 1.0 and kept[shapes[1].key()] == 2.0

    second = ScriptedTimer(shapes)
    run = run_profile(shapes, path, "cpu", passes=2, timer=second, builder=second.builder)
    assert (run.skipped, run.measured) == (4, 2) and second.calls == {4: 2, 5: 2}
    df = read_profile(path).set_index("key")
    assert len(df) == 6 and df.loc[shapes[0].key(), "median_ms"] == 1.0  # kept as written
