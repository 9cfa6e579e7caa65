"""Vidur's trace format: arrivals from `arrived_at` (seconds), lengths from Vidur's columns."""

from __future__ import annotations

import pytest

from tests.traces.trace_fixtures import AZURE_CSV, LENGTHS_CSV, VIDUR_CSV
from traces import TraceError, TraceWarning, build_workload, detect_format, load_trace

ROWS = [  # (arrival s, prompt, output) row by row, as written in VIDUR_CSV
    (0.0, 374, 44),
    (4.314579, 396, 109),
    (4.541877, 879, 55),
    (7.25, 12, 1),
]


def rows(trace) -> list[tuple[float, int, int]]:
    return list(zip(trace.arrival_s.tolist(), trace.prompt_tokens.tolist(),
                    trace.output_tokens.tolist()))


def test_vidur_rows_keep_their_arrivals_and_lengths(write):
    path = write("splitwise_conv.csv", VIDUR_CSV)
    assert detect_format(path) == "vidur"
    t = load_trace(path)
    assert rows(t) == ROWS
    assert t.df["request_id"].tolist() == ["0", "1", "2", "3"]
    assert t.source == str(path) and t.hash_block_size is None


def test_vidur_replays_through_a_workload(write, tmp_path):
    write("conv.csv", VIDUR_CSV)
    t = build_workload({"trace": "conv.csv"}, seed=0, base_dir=tmp_path)
    assert rows(t) == ROWS
    fast = build_workload({"trace": "conv.csv", "rate_scale": 2.0}, seed=0, base_dir=tmp_path)
    assert fast.arrival_s.tolist() == [a / 2 for a, _, _ in ROWS]
    win = build_workload({"trace": "conv.csv", "window_s": [4.0, 8.0]}, seed=0,
                         base_dir=tmp_path)
    assert win.arrival_s == pytest.approx([0.314579, 0.541877, 3.25], abs=1e-12)


def test_vidur_keeps_its_own_zero_and_sorts_late_rows(write):
    lines = VIDUR_CSV.splitlines()
    shifted = lines[0] + "\n" + "\n".join(["10.5,5,2", lines[2], "3.0,7,3"]) + "\n"
    path = write("v.csv", shifted)
    with pytest.warns(TraceWarning, match=r"v\.csv: 2 row\(s\) out of order"):
        t = load_trace(path)
    assert rows(t) == [(3.0, 7, 3), (4.314579, 396, 109), (10.5, 5, 2)]
    assert t.df["request_id"].tolist() == ["2", "1", "0"]


def test_same_requests_as_the_azure_file_it_was_made_from(write):
    """Vidur's splitwise_conv.csv is the Azure conv trace re-expressed in seconds."""
    azure = load_trace(write("conv.csv", AZURE_CSV))
    vidur = load_trace(write("v.csv", VIDUR_CSV.replace("7.25,12,1,13,12.0\n", "")))
    assert vidur.arrival_s == pytest.approx(azure.arrival_s, abs=1e-9)
    assert vidur.prompt_tokens.tolist() == azure.prompt_tokens.tolist()
    assert vidur.output_tokens.tolist() == azure.output_tokens.tolist()


def test_lengths_only_files_stay_lengths(write):
    path = write("arxiv.csv", LENGTHS_CSV)
    assert detect_format(path) == "lengths"
    with pytest.raises(TraceError, match="format 'lengths' has no arrival times"):
        load_trace(path)
    forced = load_trace(write("v.csv", VIDUR_CSV), "lengths",
                        arrivals={"process": "constant", "rate": 1.0})
    assert forced.arrival_s.tolist() == [0.0, 1.0, 2.0, 3.0]  # arrived_at ignored when forced


@pytest.mark.parametrize(("edit", "message"), [
    (("0.0,374", "-1,374"), "row 1: field 'arrived_at' is -1; must be a finite number of "
                            "seconds >= 0"),
    (("4.541877,879", "soon,879"), "row 3: field 'arrived_at' is 'soon'; must be a finite "
                                   "number of seconds >= 0"),
    (("396,109", "396,0"), "row 2: field 'num_decode_tokens' is 0; must be an integer >= 1"),
])
def test_bad_cells_name_the_row_and_vidur_column(write, edit, message):
    path = write("v.csv", VIDUR_CSV.replace(*edit))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == f"{path}: {message}"


def test_missing_column_is_named(write):
    path = write("v.csv", "arrived_at,num_prefill_tokens\n0.0,5\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == (f"{path}: missing column 'num_decode_tokens'; required columns: "
                               "arrived_at, num_prefill_tokens, num_decode_tokens")
