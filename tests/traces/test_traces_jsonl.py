"""The JSONL trace loader (arrival_s, prompt_len, max_tokens), plain and gzipped."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces import TraceError, detect_format, load_trace

ROWS = [{"arrival_s": 0.0, "prompt_len": 512, "max_tokens": 128},
        {"request_id": "r1", "arrival_s": 0.25, "prompt_len": 96, "max_tokens": 32,
         "lane": "batch", "planned_arrival_s": 0.2},
        {"arrival_s": 1.5, "prompt_len": 7, "max_tokens": 1, "priority": 2}]


def text(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize("name, gz", [("t.jsonl", False), ("t.jsonl.gz", True),
                                      ("t.json", True)])
def test_reads_plain_and_gzip(write, name, gz):
    data = text(ROWS).encode()
    path = write(name, gzip.compress(data) if gz else data)
    assert detect_format(path) == "jsonl"
    t = load_trace(path)
    assert t.arrival_s.tolist() == [0.0, 0.25, 1.5]
    assert t.prompt_tokens.tolist() == [512, 96, 7] and t.output_tokens.tolist() == [128, 32, 1]
    assert t.df["request_id"].tolist() == ["0", "r1", "2"]
    assert t.df["lane"].tolist() == ["default", "batch", "default"]
    assert t.priority.tolist() == [0, 0, 2]


@pytest.mark.parametrize("content, needle", [
    ('{"arrival_s": 0, "prompt_len": 5}\n', "line 1: missing field 'max_tokens'"),
    ('\n{"arrival_s": 0, "prompt_len": 5, "max_tokens": 0}\n',
     "row 2: field 'max_tokens' is 0; must be an integer >= 1"),
    ('{"arrival_s": -1, "prompt_len": 5, "max_tokens": 3}\n', "row 1: field 'arrival_s'"),
    ('{"arrival_s": 0, "prompt_len": 5, "max_tokens": 3}\n[1]\n', "line 2: expected a JSON "
     "object"),
    ("", "cannot detect the trace format"),
])
def test_bad_lines_name_the_line(write, content, needle):
    path = write("t.jsonl", content)
    with pytest.raises(TraceError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        load_trace(path, "jsonl" if content else "auto")


def test_truncated_gzip_is_one_line(write):
    path = write("t.jsonl.gz", gzip.compress(text(ROWS).encode())[:20])
    with pytest.raises(TraceError) as e:
        load_trace(path, "jsonl")
    assert "not a readable gzip file" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TraceError) as e:  # the format detected, not "gunzip it first"
        load_trace(path)
    assert "gzip data that cannot be read (Compressed file ended" in str(e.value)
    assert "gunzip" not in str(e.value) and "\n" not in str(e.value)


def test_gzipped_json_lines_of_no_known_format_are_not_told_to_gunzip(write):
    """A gzip of JSON lines servesim reads but does not recognise (an engine recording's
    requests.jsonl.gz): the format is what is missing, not gunzipping; a gzipped CSV is
    still told to gunzip."""
    path = write("r.jsonl.gz", gzip.compress(b'{"request_id": "0", "send_s": 0.1}\n'))
    with pytest.raises(TraceError, match=r"cannot detect the trace format \(first line "):
        load_trace(path)
    path = write("t.csv.gz", gzip.compress(b"arrival_s,prompt_tokens,output_tokens\n0,1,1\n"))
    with pytest.raises(TraceError, match="gunzip it first"):
        load_trace(path)


record = st.fixed_dictionaries({
    "arrival_s": st.floats(0, 1e6, allow_nan=False),
    "prompt_len": st.integers(1, 10**6), "max_tokens": st.integers(1, 10**5)})


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(record, min_size=1, max_size=20), gz=st.booleans())
def test_round_trips_any_valid_records(write, rows, gz):
    rows = sorted(rows, key=lambda r: r["arrival_s"])
    data = text(rows).encode()
    t = load_trace(write("t.jsonl", gzip.compress(data) if gz else data), "jsonl")
    assert t.arrival_s.tolist() == [r["arrival_s"] for r in rows]
    assert t.prompt_tokens.tolist() == [r["prompt_len"] for r in rows]
    assert t.output_tokens.tolist() == [r["max_tokens"] for r in rows]
