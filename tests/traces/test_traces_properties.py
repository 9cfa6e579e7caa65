"""Hypothesis properties: write -> load round-trips exactly; junk input only ever raises
TraceError (never another exception type)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces import TraceError, load_trace, make_trace, write_trace

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Any text a user could put in a cell, except lone surrogates (not encodable as UTF-8).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)


@st.composite
def valid_traces(draw):
    n = draw(st.integers(1, 6))
    block = draw(st.one_of(st.none(), st.integers(8, 64)))

    def column(strategy):
        return draw(st.lists(strategy, min_size=n, max_size=n))

    prompt = column(st.integers(1, 300))
    chains = [None] * n
    if block is not None:
        chains = [
            draw(st.one_of(st.none(), st.lists(st.integers(0, 2**63 - 1), min_size=k, max_size=k)))
            for k in (math.ceil(p / block) for p in prompt)
        ]
    df = {
        "request_id": draw(st.lists(TEXT.filter(bool), min_size=n, max_size=n, unique=True)),
        "arrival_s": column(st.floats(0, 1e9, allow_nan=False, allow_infinity=False)),
        "prompt_tokens": prompt,
        "output_tokens": column(st.integers(1, 2**24)),  # traces.limits.MAX_TOKENS
        "lane": column(TEXT.filter(bool)),
        "priority": column(st.integers(-(2**53), 2**53)),
        "tenant": column(TEXT),
        "prefix_hashes": chains,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_trace(df, source="generated", hash_block_size=block)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    """One folder per module: hypothesis reruns a test body many times per fixture setup."""
    return tmp_path_factory.mktemp("properties")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@SETTINGS
@given(trace=valid_traces())
def test_write_then_load_round_trips(tmp, suffix, trace):
    path = write_trace(trace, tmp / f"roundtrip{suffix}")
    loaded = load_trace(path)
    pd.testing.assert_frame_equal(loaded.df, trace.df)
    assert loaded.hash_block_size == trace.hash_block_size


JUNK = st.one_of(
    TEXT,
    st.sampled_from(["", "-1", "0", "1.5", "nan", "inf", "1e400", "3", '"', ",", "\n", "#"]),
    st.sampled_from(["2023-11-16 18:15:46.6805900", "2023-11-16T18:15:46+05:00", "1 2 3"]),
    st.integers().map(str),
)


def _load_or_trace_error(path: Path, content: str | bytes, fmt: str, **kwargs) -> None:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            load_trace(path, fmt, **kwargs)
        except TraceError as e:
            assert "\n" not in str(e)


@pytest.mark.parametrize(
    ("header", "fmt", "kwargs"),
    [
        ("TIMESTAMP,ContextTokens,GeneratedTokens", "azure", {}),
        (
            "num_prefill_tokens,num_decode_tokens",
            "lengths",
            {"arrivals": {"process": "poisson", "rate": 1.0}},
        ),
        (
            "# hash_block_size=4\nrequest_id,arrival_s,prompt_tokens,output_tokens,lane,priority,"
            "tenant,prefix_hashes",
            "native",
            {},
        ),
        ("", "auto", {}),
    ],
)
@SETTINGS
@given(cells=st.lists(st.lists(JUNK, min_size=1, max_size=9), max_size=5), crlf=st.booleans())
def test_junk_csv_cells_raise_only_trace_error(tmp, header, fmt, kwargs, cells, crlf):
    end = "\r\n" if crlf else "\n"
    lines = ([header] if header else []) + [",".join(row) for row in cells]
    _load_or_trace_error(tmp / f"junk-{fmt}.csv", end.join(lines), fmt, **kwargs)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@SETTINGS
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "timestamp": JSON_VALUES,
                "input_length": st.one_of(st.integers(-2, 2000), JSON_VALUES),
                "output_length": st.one_of(st.integers(-2, 5), JSON_VALUES),
                "hash_ids": st.one_of(st.lists(st.integers(-1, 5), max_size=4), JSON_VALUES),
            },
        ),
        max_size=5,
    ),
    raw=st.lists(TEXT, max_size=2),
)
def test_junk_jsonl_raises_only_trace_error(tmp, records, raw):
    lines = [json.dumps(r, allow_nan=True) for r in records] + raw
    _load_or_trace_error(tmp / "junk.jsonl", "\n".join(lines), "mooncake", spread_s=3.0)


@SETTINGS
@given(data=st.binary(max_size=64))
def test_junk_bytes_raise_only_trace_error(tmp, data):
    for name, fmt in (("b.parquet", "native"), ("b.csv", "azure"), ("b.jsonl", "mooncake")):
        _load_or_trace_error(tmp / name, data, fmt)
