"""The three `run` inputs issue 24 found still leaking: a huge hash_block_size
(OverflowError), a naive timestamp among zoned ones (silently hours off), list-valued
Parquet cells (numpy warnings first, or a one-element list taken for a number). Each is one
line on stderr, exit 2, nothing else printed, nothing written."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.cli import main

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _csv(text: str, name: str = "t.csv"):
    def build(d):
        (d / name).write_text(text)
        return d / name
    return build


def _parquet(**cols):
    def build(d):
        base = {"request_id": ["a", "b"], "arrival_s": [0.0, 1.0], "prompt_tokens": [5, 6],
                "output_tokens": [3, 3]}
        pd.DataFrame(base | cols).to_parquet(d / "t.parquet")
        return d / "t.parquet"
    return build


CASES = {
    "block-1e30": (_csv("# hash_block_size=1000000000000000000000000000000\n"
                        "request_id,arrival_s,prompt_tokens,output_tokens\nr,0,5,3\n"),
                   "hash_block_size"),
    "block-2^63": (_csv("# hash_block_size=9223372036854775808\n"
                        "request_id,arrival_s,prompt_tokens,output_tokens\nr,0,5,3\n"),
                   "hash_block_size"),
    "naive-then-zoned": (_csv(AZURE + "2023-11-16 18:15:46.68,5,3\n"
                              "2023-11-16 18:15:47.68+05:00,5,3\n2023-11-16 18:15:48.68,5,3\n"),
                         "row 2: TIMESTAMP"),
    "zoned-then-naive": (_csv(AZURE + "2023-11-16T18:15:46Z,5,3\n2023-11-16T18:15:47,5,3\n"),
                         "row 2: TIMESTAMP"),
    "list-prompt": (_parquet(prompt_tokens=[[1, 2], [3]]), "prompt_tokens"),
    "one-element-lists": (_parquet(arrival_s=[[0.0], [1.0]], output_tokens=[[5], [5]]),
                          "arrival_s"),
}


@pytest.mark.parametrize("name", CASES)
def test_one_line_and_nothing_else(name, tmp_path, capsys):
    build, needle = CASES[name]
    trace = build(tmp_path)
    code = main(["run", "--trace", str(trace), "-o", str(tmp_path / "out"), "-q", "--no-plots"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("servesim: error: ") and needle in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_zoned_timestamps_of_different_zones_are_one_clock(tmp_path, capsys):
    trace = _csv(AZURE + "2023-11-16T18:15:46+05:00,5,3\n2023-11-16T13:15:47Z,5,3\n")(tmp_path)
    assert main(["run", "--trace", str(trace), "-o", str(tmp_path / "out"), "-q",
                 "--no-plots"]) == 0
    req = pd.read_parquet(tmp_path / "out" / "requests.parquet")
    assert sorted(req["arrival_s"].round(6)) == [0.0, 1.0]
