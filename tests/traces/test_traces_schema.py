"""make_trace validation (one-line messages, first bad row) and Trace methods."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traces import COLUMNS, InputError, TraceError, TraceWarning, make_trace
from traces.validate import FileContext


def rows(**columns):
    base = {"arrival_s": [0.0, 1.0, 2.0], "prompt_tokens": [10, 20, 30]}
    return {**base, "output_tokens": [1, 2, 3], **columns}


def error_of(df_like, **kwargs) -> str:
    with pytest.raises(TraceError) as info:
        make_trace(df_like, source="trace.csv", **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_error_hierarchy():
    assert issubclass(TraceError, InputError) and issubclass(InputError, ValueError)
    assert issubclass(TraceWarning, UserWarning)


def test_defaults_and_dtypes():
    t = make_trace(rows(), source="x")
    assert tuple(t.df.columns) == COLUMNS
    assert t.df["request_id"].tolist() == ["0", "1", "2"]
    assert t.df["lane"].tolist() == ["default"] * 3
    assert t.df["tenant"].tolist() == [""] * 3
    assert t.priority.tolist() == [0, 0, 0] and t.priority.dtype == np.int64
    assert t.prompt_tokens.dtype == np.int64 and t.arrival_s.dtype == np.float64
    assert t.df["prefix_hashes"].tolist() == [None] * 3
    assert t.hash_block_size is None and t.prefix_hashes == [None] * 3
    assert list(t.df.index) == [0, 1, 2] and len(t) == 3 and t.source == "x"
    assert t.lanes.tolist() == ["default"] * 3


def test_text_cells_are_parsed():
    cells = rows(arrival_s=["0", "0.5", "2"], prompt_tokens=["10", "20.0", " 3 "])
    t = make_trace(cells, source="x")
    assert t.arrival_s.tolist() == [0.0, 0.5, 2.0]
    assert t.prompt_tokens.tolist() == [10, 20, 3]


INT = "must be an integer >= 1"
SECONDS = "must be a finite number of seconds >= 0"
NAN = float("nan")


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ({"output_tokens": [1, 2, -3]}, f"row 3: field 'output_tokens' is -3; {INT}"),
        ({"prompt_tokens": [10, 0, 3]}, f"row 2: field 'prompt_tokens' is 0; {INT}"),
        ({"prompt_tokens": [10, 2.5, 3]}, f"row 2: field 'prompt_tokens' is 2.5; {INT}"),
        ({"output_tokens": [1, "abc", 3]}, f"row 2: field 'output_tokens' is 'abc'; {INT}"),
        ({"output_tokens": [1, None, 3]}, f"row 2: field 'output_tokens' is missing or NaN; {INT}"),
        ({"output_tokens": [1, NAN, 3]}, f"row 2: field 'output_tokens' is missing or NaN; {INT}"),
        ({"arrival_s": [0, -1.0, 2]}, f"row 2: field 'arrival_s' is -1.0; {SECONDS}"),
        ({"arrival_s": [0, float("inf"), 2]}, f"row 2: field 'arrival_s' is inf; {SECONDS}"),
        ({"arrival_s": [0, 1, "soon"]}, f"row 3: field 'arrival_s' is 'soon'; {SECONDS}"),
        (
            {"priority": [0, "x", 1]},
            "row 2: field 'priority' is 'x'; must be an integer (lower = more urgent)",
        ),
        (
            {"request_id": ["a", "b", "a"]},
            "row 3: field 'request_id' is 'a'; it repeats row 1; request ids must be unique",
        ),
        (
            {"request_id": ["a", "", "c"]},
            "row 2: field 'request_id' is missing; must be a non-empty string, unique in the trace",
        ),
    ],
)
def test_bad_cells_one_line(columns, expected):
    assert error_of(rows(**columns)) == f"trace.csv: {expected}"


def test_first_bad_row_wins_across_fields():
    # row 3 has a bad prompt, row 2 a bad output: row 2 is reported
    msg = error_of(rows(prompt_tokens=[1, 2, -1], output_tokens=[1, 0, 1]))
    assert msg.startswith("trace.csv: row 2: field 'output_tokens'")
    # same row: the earlier column is reported
    msg = error_of(rows(prompt_tokens=[1, -5, 1], output_tokens=[1, 0, 1]))
    assert msg.startswith("trace.csv: row 2: field 'prompt_tokens'")


def test_huge_integer():
    msg = error_of(rows(prompt_tokens=[1, 1e30, 3]))
    assert msg == (
        "trace.csv: row 2: field 'prompt_tokens' is 1e+30; must be an integer from 1 to "
        "16,777,216"
    )
    msg = error_of(rows(priority=[0, 1e30, 3]))
    assert msg == (
        "trace.csv: row 2: field 'priority' is 1e+30; must be an integer of magnitude "
        "at most 9007199254740992"
    )


@pytest.mark.parametrize("value", [2**24 + 1, 2**32 + 1, 99999999999])
def test_a_token_count_past_the_bound_is_refused_in_one_line(value):
    # 2**32 + 1 used to load and stall the run behind it (every request left waiting)
    msg = error_of(rows(prompt_tokens=[1, value, 3]))
    assert msg == (f"trace.csv: row 2: field 'prompt_tokens' is {value}; must be an integer "
                   "from 1 to 16,777,216")
    assert make_trace(rows(prompt_tokens=[1, 2**24, 3]), source="trace.csv").prompt_tokens[1] \
        == 2**24


def test_missing_column_and_empty():
    assert error_of({"arrival_s": [0], "prompt_tokens": [1]}) == (
        "trace.csv: missing column 'output_tokens'; required columns: arrival_s, "
        "prompt_tokens, output_tokens"
    )
    empty = {"arrival_s": [], "prompt_tokens": [], "output_tokens": []}
    assert error_of(empty) == "trace.csv: no requests; a trace needs at least one data row"


def test_context_names_file_rows_and_columns():
    ctx = FileContext(rows=np.array([5, 7, 9]), names={"output_tokens": "GeneratedTokens"})
    msg = error_of(rows(output_tokens=[1, 2, 0]), context=ctx)
    assert msg == "trace.csv: row 9: field 'GeneratedTokens' is 0; must be an integer >= 1"


def test_prefix_hash_checks():
    chains = [[0], None, [0, 5, 6]]  # prompts 10, 20, 30 tokens in 10-token blocks
    ok = make_trace(rows(prefix_hashes=chains), source="x", hash_block_size=10)
    assert ok.hash_block_size == 10
    arrays = ok.prefix_hashes
    assert arrays[1] is None and arrays[0].dtype == np.int64
    assert arrays[2].tolist() == [0, 5, 6]
    with pytest.raises(ValueError):
        arrays[0][0] = 9  # read-only views
    msg = error_of(rows(prefix_hashes=[[0, 1, 2], [0, 1], None]), hash_block_size=4)
    assert msg == (
        "trace.csv: row 2: field 'prefix_hashes' has 2 ids; must have ceil(20 / 4) = 5, "
        "one per 4-token block of the prompt"
    )
    msg = error_of(rows(prefix_hashes=[[0, 1, -2], None, None]), hash_block_size=4)
    assert msg.startswith("trace.csv: row 1: field 'prefix_hashes' is [0, 1, -2]; must be a list")
    msg = error_of(rows(prefix_hashes=[None, "1 2", None]), hash_block_size=4)
    assert msg.startswith("trace.csv: row 2: field 'prefix_hashes' is '1 2'; must be a list")
    msg = error_of(rows(prefix_hashes=[[0, 1, 2], None, None]))
    assert msg == (
        "trace.csv: row 1: field 'prefix_hashes' is set but the trace has no hash_block_size"
    )
    assert error_of(rows(), hash_block_size=0).startswith("trace.csv: hash_block_size is 0;")
    # no chains at all: the block size is dropped
    assert make_trace(rows(), source="x", hash_block_size=16).hash_block_size is None


def test_unsorted_rows_are_sorted_with_warning():
    ids = ["a", "b", "c"]
    with pytest.warns(TraceWarning, match=r"^trace\.csv: 2 row\(s\) out of order"):
        t = make_trace(rows(arrival_s=[2.0, 1.0, 0.5], request_id=ids), source="trace.csv")
    assert t.df["request_id"].tolist() == ["c", "b", "a"]
    with pytest.warns(TraceWarning, match="1 row"):
        t = make_trace(rows(arrival_s=[1.0, 0.0, 1.0], request_id=ids), source="trace.csv")
    assert t.df["request_id"].tolist() == ["b", "a", "c"]  # stable: a before c at t = 1
    assert list(t.df.index) == [0, 1, 2]


def test_trace_methods():
    t = make_trace(rows(arrival_s=[0.0, 10.0, 20.0]), source="x")
    assert t.with_lane("batch").lanes.tolist() == ["batch"] * 3
    assert t.with_priority(3).priority.tolist() == [3, 3, 3]
    assert t.with_tenant("acme").df["tenant"].tolist() == ["acme"] * 3
    assert len(t.head(2)) == 2 and t.head(10).df.equals(t.df)
    w = t.window(5.0, 20.0)
    assert w.arrival_s.tolist() == [5.0] and w.df["request_id"].tolist() == ["1"]
    re = t.with_arrivals([3.0, 1.0, 2.0])
    assert re.df["request_id"].tolist() == ["1", "2", "0"] and re.arrival_s.tolist() == [1, 2, 3]
    s = t.shuffled(np.random.default_rng(0))
    assert s.arrival_s.tolist() == t.arrival_s.tolist()
    assert sorted(s.df["request_id"]) == ["0", "1", "2"]
    for bad in (
        lambda: t.window(30, 40),
        lambda: t.head(0),
        lambda: t.with_lane(""),
        lambda: t.with_arrivals([1.0]),
        lambda: t.window(5, 5),
    ):
        with pytest.raises(TraceError):
            bad()
    assert isinstance(t.df, pd.DataFrame)
