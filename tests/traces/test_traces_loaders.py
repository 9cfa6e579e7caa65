"""Each format's loader on tiny inline files, format detection and bad files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.traces.trace_fixtures import AZURE_CSV, LENGTHS_CSV, MOONCAKE_JSONL, NATIVE_CSV
from traces import FORMATS, ArrivalSpec, TraceError, TraceWarning, detect_format, load_trace


def error_of(*args, **kwargs) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


# ---- azure ---------------------------------------------------------------------------------


def test_azure_crlf_seven_digit_fractions_no_trailing_newline(write):
    path = write("conv.csv", AZURE_CSV)
    assert not path.read_bytes().endswith(b"\n") and b"\r\n" in path.read_bytes()
    t = load_trace(path)
    assert detect_format(path) == "azure"
    assert t.arrival_s == pytest.approx([0.0, 4.314579, 4.541877], abs=1e-9)
    assert t.prompt_tokens.tolist() == [374, 396, 879]
    assert t.output_tokens.tolist() == [44, 109, 55]
    assert t.df["request_id"].tolist() == ["0", "1", "2"]
    assert t.hash_block_size is None and t.source == str(path)


def test_azure_unsorted_rows_warn_and_shift_to_earliest(write):
    lines = AZURE_CSV.split("\r\n")
    path = write("conv.csv", "\r\n".join([lines[0], lines[2], lines[1], lines[3]]))
    with pytest.warns(TraceWarning, match=r"conv\.csv: 1 row\(s\) out of order"):
        t = load_trace(path, "azure")
    assert t.arrival_s[0] == 0.0 and t.df["request_id"].tolist() == ["1", "0", "2"]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            "2023-11-16 18:15:50.9951690,396,-3",
            "row 2: field 'GeneratedTokens' is -3; must be an integer >= 1",
        ),
        (
            "2023-11-16 18:15:50.9951690,,109",
            "row 2: field 'ContextTokens' is missing; must be an integer >= 1",
        ),
        (
            "yesterday,396,109",
            "row 2: field 'TIMESTAMP' is 'yesterday'; must be a date-time "
            "like 2023-11-16 18:15:46.6805900",
        ),
    ],
)
def test_azure_bad_cells(write, row, expected):
    lines = AZURE_CSV.split("\r\n")
    path = write("conv.csv", "\r\n".join([lines[0], lines[1], row, lines[3]]))
    assert error_of(path) == f"{path}: {expected}"


def test_azure_missing_column_and_empty(write):
    path = write("conv.csv", "TIMESTAMP,ContextTokens\r\n2023-11-16 18:15:46.6805900,3")
    assert error_of(path, "azure") == (
        f"{path}: missing column 'GeneratedTokens'; required columns: TIMESTAMP, ContextTokens, "
        "GeneratedTokens"
    )
    empty = write("empty.csv", "")
    assert error_of(empty, "azure") == f"{empty}: the file is empty; expected a CSV header line"
    header = write("header.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
    assert error_of(header) == f"{header}: no requests; a trace needs at least one data row"


def test_ragged_csv_is_a_trace_error(write):
    path = write("conv.csv", AZURE_CSV + "\r\n2023-11-16 18:15:52.0,1,2,3,4")
    assert error_of(path).startswith(f"{path}: not a readable CSV file (")


# ---- mooncake ------------------------------------------------------------------------------


def test_mooncake(write):
    path = write("trace.jsonl", MOONCAKE_JSONL)
    t = load_trace(path)
    assert detect_format(path) == "mooncake" and t.hash_block_size == 512
    assert t.arrival_s.tolist() == [0.0, 0.0, 3.0, 5.999]
    assert t.prompt_tokens.tolist() == [1000, 513, 1024, 10]
    assert [h.tolist() for h in t.prefix_hashes] == [[0, 1], [0, 2], [0, 1], [3]]


@pytest.mark.parametrize("name", ["trace.jsonl.gz", "trace.jsonl", "trace.gz"])
def test_a_gzipped_mooncake_trace_reads_as_the_plain_one(write, tmp_path, name):
    """As the jsonl format: gzip is detected from the first bytes, whatever the name (it
    was refused as 'not UTF-8' or of an unknown format)."""
    import gzip

    plain = load_trace(write("plain.jsonl", MOONCAKE_JSONL))
    p = tmp_path / name
    p.write_bytes(gzip.compress(("\ufeff" + MOONCAKE_JSONL).encode()))  # a BOM inside
    for fmt in ("auto", "mooncake"):
        t = load_trace(p, fmt)
        assert t.arrival_s.tolist() == plain.arrival_s.tolist()
        assert t.prompt_tokens.tolist() == plain.prompt_tokens.tolist()
        assert [h.tolist() for h in t.prefix_hashes] == [h.tolist() for h in plain.prefix_hashes]


def test_mooncake_spread(write):
    path = write("trace.jsonl", MOONCAKE_JSONL)
    a = load_trace(path, spread_s=3.0, seed=1)
    b = load_trace(path, spread_s=3.0, seed=1)
    c = load_trace(path, spread_s=3.0, seed=2)
    pd.testing.assert_frame_equal(a.df, b.df)
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    t = a.arrival_s
    assert 0 <= t[0] <= t[1] < 3.0 and 3.0 <= t[2] < 6.0 and 5.999 <= t[3] < 8.999
    assert a.df["request_id"].tolist() == ["0", "1", "2", "3"]  # file order kept in a bucket


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"timestamp": 0, "input_length": 5', "line 2: malformed JSON ("),
        ("[1, 2]", "line 2: expected a JSON object, got list"),
        (
            '{"timestamp": 0, "input_length": 5, "output_length": 0}',
            "row 2: field 'output_length' is 0; must be an integer >= 1",
        ),
        (
            '{"timestamp": -5, "input_length": 5, "output_length": 1}',
            "row 2: field 'timestamp' is -5; must be a number of milliseconds >= 0",
        ),
        (
            '{"timestamp": 0, "output_length": 1}',
            "row 2: field 'input_length' is missing; must be an integer >= 1",
        ),
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [4]}',
            "row 2: field 'hash_ids' has 1 id; must have ceil(600 / 512) = 2, one per 512-token "
            "block of the prompt",
        ),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": ["a"]}',
            "row 2: field 'hash_ids' is ['a']; must be a list of integer hash ids >= 0, one per "
            "hash block of the prompt",
        ),
    ],
)
def test_mooncake_bad_lines(write, line, expected):
    first = MOONCAKE_JSONL.splitlines()[0]
    path = write("trace.jsonl", f"{first}\n{line}\n")
    msg = error_of(path, "mooncake")
    assert msg.startswith(f"{path}: {expected}"), msg


def test_mooncake_rows_without_hash_ids_warn(write):
    """hash_ids is optional per line; rows without it share no prefix: one line says so."""
    first = MOONCAKE_JSONL.splitlines()[0]
    bare = '{"timestamp": 0, "input_length": 5, "output_length": 1}'
    path = write("trace.jsonl", f"{first}\n\n{bare}\n{bare}\n")
    with pytest.warns(TraceWarning, match=r"2 of 3 rows \(the first at line 3\) have no "
                      r"hash_ids: their prompts share no prefix"):
        t = load_trace(path)
    assert [h is None for h in t.prefix_hashes] == [False, True, True]
    path = write("bare.jsonl", f"{bare}\n")
    with pytest.warns(TraceWarning, match=r"bare.jsonl: no row has hash_ids: their"):
        load_trace(path, "mooncake")


def test_mooncake_blank_lines_keep_line_numbers(write):
    first = MOONCAKE_JSONL.splitlines()[0]
    bad = first.replace('"output_length": 5', '"output_length": -1')
    path = write("trace.jsonl", f"{first}\n\n{bad}")
    assert error_of(path).startswith(f"{path}: row 3: field 'output_length' is -1;")


# ---- lengths -------------------------------------------------------------------------------


def test_lengths_needs_arrivals(write):
    path = write("sharegpt.csv", LENGTHS_CSV)
    assert detect_format(path) == "lengths"
    msg = error_of(path)
    assert msg.startswith(f"{path}: format 'lengths' has no arrival times; pass arrivals=")


def test_lengths_with_arrivals(write):
    path = write("sharegpt.csv", LENGTHS_CSV)
    t = load_trace(path, arrivals={"process": "constant", "rate": 2.0})
    assert t.arrival_s.tolist() == [0.0, 0.5, 1.0]
    assert t.prompt_tokens.tolist() == [74, 290, 10] and t.output_tokens.tolist() == [918, 905, 5]
    p = load_trace(path, arrivals=ArrivalSpec(process="poisson", rate=5.0), seed=3)
    q = load_trace(path, arrivals=ArrivalSpec(process="poisson", rate=5.0), seed=3)
    pd.testing.assert_frame_equal(p.df, q.df)
    assert p.prompt_tokens.tolist() == [74, 290, 10]  # file order
    s = load_trace(path, arrivals={"process": "constant", "rate": 2.0}, shuffle=True, seed=5)
    assert sorted(s.prompt_tokens.tolist()) == [10, 74, 290]
    assert s.arrival_s.tolist() == [0.0, 0.5, 1.0]
    bad = error_of(path, arrivals={"process": "gamma", "rate": 1.0})
    assert bad.startswith(f"{path}: arrivals: ") and "cv" in bad


def test_lengths_bad_cell_names_file_column(write):
    path = write("sharegpt.csv", LENGTHS_CSV.replace("290,905", "290,x"))
    assert error_of(path, "lengths", arrivals={"process": "constant", "rate": 1.0}) == (
        f"{path}: row 2: field 'num_decode_tokens' is 'x'; must be an integer >= 1"
    )


def test_timed_trace_can_be_retimed(write):
    path = write("conv.csv", AZURE_CSV)
    t = load_trace(path, arrivals={"process": "constant", "rate": 1.0})
    assert t.arrival_s.tolist() == [0.0, 1.0, 2.0] and t.prompt_tokens.tolist() == [374, 396, 879]
    assert load_trace(path, arrivals={"process": "replay"}).arrival_s[1] == pytest.approx(4.314579)


# ---- native --------------------------------------------------------------------------------


def test_native_csv(write):
    path = write("mine.csv", NATIVE_CSV)
    t = load_trace(path)
    assert detect_format(path) == "native" and t.hash_block_size == 4
    assert t.df["request_id"].tolist() == ["a", "b", "c"]
    assert t.lanes.tolist() == ["interactive", "default", "batch"]
    assert t.priority.tolist() == [0, 0, 2]
    assert t.df["tenant"].tolist() == ["acme", "", ""]
    assert t.df["prefix_hashes"].tolist() == [[0, 1], None, [0, 7]]


def test_native_csv_bad_cells(write):
    path = write("mine.csv", NATIVE_CSV.replace("0 7", "0 x"))
    assert error_of(path) == (
        f"{path}: row 3: field 'prefix_hashes' is '0 x'; must be space-separated integer hash "
        "ids >= 0, one per hash block of the prompt"
    )
    path = write("bad.csv", NATIVE_CSV.replace("hash_block_size=4", "hash_block_size=four"))
    assert error_of(path) == (f"{path}: line 1: hash_block_size is 'four'; must be an integer "
                              "from 1 to 16,777,216 (tokens)")
    path = write("dup.csv", NATIVE_CSV.replace("\nc,", "\na,"))
    assert error_of(path) == (
        f"{path}: row 3: field 'request_id' is 'a'; it repeats row 1; request ids must be unique"
    )


def test_native_minimal_columns(write):
    path = write("min.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n2.5,3,4\n")
    t = load_trace(path)
    assert t.arrival_s.tolist() == [0.0, 2.5] and t.hash_block_size is None


# ---- detection and options -----------------------------------------------------------------


def test_detection_and_format_errors(write, tmp_path):
    unknown = write("x.csv", "a,b\n1,2\n")
    assert error_of(unknown) == (
        f"{unknown}: cannot detect the trace format (first line 'a,b'); give it (--format, or "
        "workload.format) as one of azure, vllm-bench, vllm-result, jsonl, mooncake, vidur, "
        "lengths, native"
    )
    good = write("conv.csv", AZURE_CSV)
    assert error_of(good, "splitwise") == (
        f"{good}: unknown trace format 'splitwise'; allowed: auto, azure, vllm-bench, "
        "vllm-result, jsonl, mooncake, vidur, lengths, native"
    )
    assert error_of(good, spread_s=3.0) == (
        f"{good}: option 'spread_s' does not apply to format 'azure' (its options: none)"
    )
    assert error_of(tmp_path / "nope.csv") == f"{tmp_path / 'nope.csv'}: no such file"
    assert error_of(tmp_path) == f"{tmp_path}: not a regular file"
    partial = write("partial.csv", "arrival_s,prompt_tokens\n0,5\n")  # detected as native
    assert error_of(partial) == (
        f"{partial}: missing column 'output_tokens'; required columns: arrival_s, "
        "prompt_tokens, output_tokens"
    )
    assert set(FORMATS) == {"azure", "vllm-bench", "vllm-result", "jsonl", "mooncake", "vidur",
                            "lengths", "native"}
    assert FORMATS["azure"](good).prompt_tokens.tolist() == [374, 396, 879]


def test_a_gzipped_csv_is_named_as_such(tmp_path):
    """CSV formats read plain text: a .csv.gz says it is gzip, not that its (decompressed)
    native header is unrecognised or that byte 0x8b is not UTF-8."""
    import gzip

    p = tmp_path / "t.csv.gz"
    p.write_bytes(gzip.compress(b"arrival_s,prompt_tokens,output_tokens\n0,10,5\n"))
    with pytest.raises(TraceError, match=r"t\.csv\.gz: is gzip-compressed.*gunzip"):
        detect_format(p)
    for fmt in ("native", "azure"):
        with pytest.raises(TraceError, match="is gzip-compressed"):
            load_trace(p, fmt)
