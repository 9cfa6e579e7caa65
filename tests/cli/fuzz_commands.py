"""The fuzz corpus of every command besides `run` (issue 24), generated here.

replay-bench, compare, sweep, capacity, plot, trace export, calibrate fit-steps, fidelity and
check:
hostile input files (missing, folders, devices, FIFOs, binary, UTF-16, truncated, garbage),
every measured field set to NaN, infinity, a negative, a string, a boolean, a 30-digit
number, and hostile output paths (devices, folders, a user's file, under a file, links,
FIFOs, inside a result). ``Fixtures`` are built once (a scenario, two runs, a benchmark
result, a step log, a sweep); each Case copies what it needs into its own folder and
returns the command line. A failing case must exit 2 with one line naming ``needles`` and
change nothing; an ``ok`` case may create only ``writes`` and writes strict JSON.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tests.calibrate.test_steps import records
from tests.cli.test_cli_errors import GOOD
from tests.cli.test_replay_bench import fake_result
from tests.live.helpers import write_scenario


@dataclass
class Fixtures:
    root: Path
    scenario: Path  # GOOD
    live: Path  # a tiny live scenario (fidelity)
    truth: Path  # a run of GOOD
    bench: dict  # a vllm bench serve result of that run
    steps: list[dict]  # a step log's records
    sweep: Path  # a finished sweep of GOOD


def build_fixtures(root: Path, main) -> Fixtures:
    sc = root / "good.yaml"
    sc.write_text(GOOD)
    for name in ("truth",):
        assert main(["run", str(sc), "-o", str(root / name), "-q", "--no-plots"]) == 0
    assert main(["sweep", str(sc), "--rate", "1,2", "-o", str(root / "sweep"), "-j", "1", "-q",
                 "--no-plots"]) == 0
    live = write_scenario(root, n=3, name="live.yaml")
    return Fixtures(root, sc, live, root / "truth", fake_result(root / "truth"),
                    records(n=200), root / "sweep")


Build = Callable[[Path, Fixtures], list[str]]


@dataclass(frozen=True)
class Case:
    command: str
    id: str
    build: Build
    needles: tuple[str, ...] = ()
    ok: bool = False
    writes: tuple[str, ...] = ()  # names an ok case creates in its folder
    stdout_json: bool = False  # an ok case prints strict JSON


# ---- hostile paths --------------------------------------------------------------------
def _fifo(d: Path, name: str = "fifo") -> str:
    os.mkfifo(d / name)
    return str(d / name)


def _link(d: Path) -> str:
    (d / "link").symlink_to(d / "sentinel.txt")
    return str(d / "link")


def _result(d: Path) -> Path:
    (d / "res").mkdir()
    (d / "res" / ".servesim-result").write_text("{}")
    return d / "res"


# (name, target, needle): places a file output must refuse
FILE_OUTS: tuple[tuple[str, Callable[[Path], str], str], ...] = (
    ("dev-null", lambda d: "/dev/null", "device"),
    ("dev-full", lambda d: "/dev/full", "device"),
    ("folder", lambda d: str(d / "user"), "folder"),
    ("user-file", lambda d: str(d / "sentinel.txt"), "did not write"),
    ("hidden-user-file", lambda d: str(d / "user" / ".hidden-sentinel"), "did not write"),
    ("under-file", lambda d: str(d / "sentinel.txt" / "x.out"), "which is a file"),
    ("missing-folder", lambda d: str(d / "nope" / "x.out"), "does not exist"),
    ("link", _link, "symbolic link"),
    ("fifo", _fifo, "FIFO"),
    ("folder-slash", lambda d: str(d / "user") + "/", "folder"),
    ("empty", lambda d: "", "folder"),  # typer reads "" as the path "."
    ("staging-name", lambda d: str(d / ".x.servesim-staging-0123abcd"), "staging"),
    ("long-name", lambda d: str(d / ("n" * 240)), "longer than"),
    ("inside-result", lambda d: str(_result(d) / "x.out"), "inside"),
    ("proc", lambda d: "/proc/servesim-fuzz.out", "/proc"),
)

# places a result folder (--out of sweep, capacity, fidelity, replay-bench) must refuse
FOLDER_OUTS: tuple[tuple[str, Callable[[Path], str], str], ...] = (
    ("dot", lambda d: ".", "current folder"),
    ("empty", lambda d: "", "current folder"),
    ("root", lambda d: "/", "root"),
    ("dotdot", lambda d: "..", "current folder"),
    ("user-folder", lambda d: str(d / "user"), "did not write"),
    ("user-deep", lambda d: str(d / "user" / "deep"), "did not write"),
    ("file", lambda d: str(d / "sentinel.txt"), "is a file"),
    ("under-file", lambda d: str(d / "sentinel.txt" / "x" / "y"), "a file"),
    ("fifo", _fifo, "FIFO"),
    ("link", lambda d: (d / "link").symlink_to(d / "user") or str(d / "link"), "symbolic link"),
    ("dev-null", lambda d: "/dev/null", "device"),
    ("proc", lambda d: "/proc/servesim-fuzz", "cannot"),
    ("inside-result", lambda d: str(_result(d) / "sub"), "inside"),
    ("long-name", lambda d: str(d / ("n" * 240)), "longer than"),
    ("internal-name", lambda d: str(d / ".r.servesim-staging-0123abcd"), "staging"),
)

# input files every reader must refuse: (name, make(d) -> path, needle)
BAD_BYTES = {
    "binary": bytes(range(256)) * 4,
    "utf16": '{"a": 1}\n'.encode("utf-16"),
    "empty": b"",
    "nul": b"\0" * 64,
    "truncated-gzip": gzip.compress(b'{"a": 1}\n' * 100)[:40],
}


def _bytes_file(name: str, data: bytes):
    def make(d: Path) -> str:
        (d / name).write_bytes(data)
        return str(d / name)
    return make


INPUTS: tuple[tuple[str, Callable[[Path], str], str], ...] = (
    ("missing", lambda d: str(d / "nope.json"), "nope.json"),
    ("folder", lambda d: str(d / "user"), "user"),
    ("dev-null", lambda d: "/dev/null", "/dev/null"),
    ("dev-zero", lambda d: "/dev/zero", "/dev/zero"),
    ("fifo", lambda d: _fifo(d, "in.fifo"), "in.fifo"),
    *((f"bytes-{k}", _bytes_file(f"in-{k}.json", v), f"in-{k}.json")
      for k, v in BAD_BYTES.items()),
)

BAD_NUMBERS = {"nan": float("nan"), "inf": float("inf"), "negative": -1, "text": "x",
               "null": None, "bool": True, "huge": 10 ** 30, "1e300": 1e300}


def _json(d: Path, name: str, doc) -> str:
    (d / name).write_text(json.dumps(doc))  # Python writes NaN / Infinity as given
    return str(d / name)


# ---- replay-bench -----------------------------------------------------------------------
def _bench(mutate: Callable[[dict], None], *extra: str, arrivals: str = "measured") -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        doc = copy.deepcopy(f.bench)
        mutate(doc)
        return ["replay-bench", _json(d, "bench.json", doc), "--scenario", str(f.scenario),
                "--arrivals", arrivals, *extra]
    return build


def _set_first(key: str, value):
    def mutate(doc: dict) -> None:
        doc[key][0] = value
    return mutate


def _set(key: str, value):
    def mutate(doc: dict) -> None:
        if value is _DROP:
            doc.pop(key)
        else:
            doc[key] = value
    return mutate


_DROP = object()


def replay_bench_cases() -> list[Case]:
    out = []
    for name, make, needle in INPUTS:
        out.append(Case("replay-bench", f"rb-input-{name}", lambda d, f, m=make: [
            "replay-bench", m(d), "--scenario", str(f.scenario)], (needle,)))
    for key in ("input_lens", "output_lens", "ttfts", "latencies", "start_times",
                "queue_times"):
        for bad, value in BAD_NUMBERS.items():
            if key == "start_times" and bad == "negative":
                continue  # a client clock may be negative
            out.append(Case("replay-bench", f"rb-{key}-{bad}", _bench(_set_first(key, value)),
                            ("bench.json", key)))
    for key in ("input_lens", "output_lens"):
        out.append(Case("replay-bench", f"rb-{key}-fraction", _bench(_set_first(key, 1.5)),
                        (key,)))
    for bad, value in {"int": 1, "negative": [-1.0], "text": ["x"], "nan": [float("nan")],
                       "nested": [[0.1]]}.items():
        out.append(Case("replay-bench", f"rb-itls-{bad}", _bench(_set_first("itls", value)),
                        ("itls",)))
    traffic = {
        ("request_rate", "zero"): 0, ("request_rate", "negative"): -1.0,
        ("request_rate", "text"): "fast", ("request_rate", "nan"): float("nan"),
        ("burstiness", "zero"): 0, ("burstiness", "negative"): -1.0,
        ("burstiness", "text"): "x", ("burstiness", "nan"): float("nan"),
        ("max_concurrency", "zero"): 0, ("max_concurrency", "negative"): -3,
        ("max_concurrency", "fraction"): 1.5, ("max_concurrency", "text"): "x",
        ("duration", "zero"): 0, ("duration", "negative"): -1.0,
        ("duration", "text"): "x", ("duration", "missing"): _DROP,
    }
    for (key, bad), value in traffic.items():
        out.append(Case("replay-bench", f"rb-{key}-{bad}",
                        _bench(_set(key, value), arrivals="process"), (key,)))

    def no_requests(doc):
        for k in ("input_lens", "output_lens", "ttfts", "latencies", "itls", "start_times",
                  "queue_times", "errors"):
            doc[k] = []

    def late_ttft(doc):
        doc["ttfts"][0] = doc["latencies"][0] + 1.0

    def short_list(doc):
        doc["ttfts"] = doc["ttfts"][:-1]

    def not_object(doc):
        doc.clear()

    out += [Case("replay-bench", "rb-no-requests", _bench(no_requests), ("no requests",)),
            Case("replay-bench", "rb-ttft-after-latency", _bench(late_ttft), ("not in order",)),
            Case("replay-bench", "rb-short-list", _bench(short_list), ("ttfts",)),
            Case("replay-bench", "rb-empty-object", _bench(not_object), ("input_lens",))]
    two = lambda d, f: ["replay-bench", str(_two_results(d, f)), "--scenario",  # noqa: E731
                        str(f.scenario)]
    out.append(Case("replay-bench", "rb-two-results", two, ("2 results",)))
    out.append(Case("replay-bench", "rb-bad-arrivals", _bench(lambda doc: None,
                    arrivals="sometimes"), ("--arrivals",)))
    out.append(Case("replay-bench", "rb-scenario-missing", lambda d, f: [
        "replay-bench", _json(d, "bench.json", f.bench), "--scenario", str(d / "nope.yaml")],
        ("nope.yaml",)))
    for name, target, needle in FOLDER_OUTS[4:9]:
        out.append(Case("replay-bench", f"rb-out-{name}", lambda d, f, t=target: [
            "replay-bench", _json(d, "bench.json", f.bench), "--scenario", str(f.scenario),
            "--out", t(d)], ("--out", needle)))
    out.append(Case("replay-bench", "rb-ok-json", _bench(lambda doc: None, "--json"), ok=True,
                    writes=("bench.json",), stdout_json=True))
    return out


def _two_results(d: Path, f: Fixtures) -> Path:
    p = d / "two.json"
    p.write_text(json.dumps(f.bench) + "\n" + json.dumps(f.bench) + "\n")
    return p


# ---- compare ----------------------------------------------------------------------------
def _copy_run(d: Path, f: Fixtures, name: str = "b") -> Path:
    dest = d / name
    shutil.copytree(f.truth, dest)
    return dest


def _mutated(edit: Callable[[Path], None], *extra: str) -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        b = _copy_run(d, f)
        edit(b)
        return ["compare", str(f.truth), str(b), "--no-plot", *extra]
    return build


def _write(name: str, data: bytes):
    def edit(b: Path) -> None:
        (b / name).unlink()
        (b / name).write_bytes(data)
    return edit


def _table(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]):
    def edit(b: Path) -> None:
        df = change(pd.read_parquet(b / name))
        (b / name).unlink()
        df.to_parquet(b / name, index=False)
    return edit


def _cell(col: str, value):
    def change(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        if isinstance(value, str):
            df[col] = df[col].astype(str)
        df.loc[df.index[0], col] = value
        return df
    return change


def compare_cases() -> list[Case]:
    out = []
    for name, make, _needle in INPUTS[:3]:
        out.append(Case("compare", f"cmp-path-{name}", lambda d, f, m=make: [
            "compare", str(f.truth), m(d), "--no-plot"], ("no such result folder",)
            if name == "missing" else ("not a result folder",)))
    out.append(Case("compare", "cmp-path-empty-folder", lambda d, f: [
        "compare", str(f.truth), str(d / "user" / "deep"), "--no-plot"], ("not a result",)))
    for name, data in BAD_BYTES.items():
        out.append(Case("compare", f"cmp-summary-{name}", _mutated(_write("summary.json", data)),
                        ("summary.json",)))
    for name, data in (("nan", b'{"latency_ms": NaN}'), ("list", b"[1, 2]"),
                       ("infinity", b'{"a": Infinity}'), ("truncated", b'{"a": ')):
        out.append(Case("compare", f"cmp-summary-{name}", _mutated(_write("summary.json", data)),
                        ("summary.json",)))
    for table in ("requests.parquet", "steps.parquet"):
        for name, data in (("garbage", b"PAR1 not really PAR1"), ("empty", b""),
                           ("text", b"a,b\n1,2\n")):
            out.append(Case("compare", f"cmp-{table}-{name}", _mutated(_write(table, data)),
                            (table, "Parquet")))
    fifo = lambda b: ((b / "steps.parquet").unlink(), os.mkfifo(b / "steps.parquet"))  # noqa
    out.append(Case("compare", "cmp-steps-fifo", _mutated(fifo), ("steps.parquet",)))
    drop = {"request_id": "requests.parquet", "ttft_s": "requests.parquet",
            "e2el_s": "requests.parquet", "duration_s": "steps.parquet",
            "start_s": "steps.parquet"}
    for col, table in drop.items():
        out.append(Case("compare", f"cmp-no-{col}", _mutated(_table(table, lambda df, c=col:
                        df.drop(columns=[c]))), (repr(col),)))
    cells = {("requests.parquet", "ttft_s"): ("nan", float("nan")),
             ("requests.parquet", "e2el_s"): ("negative", -1.0),
             ("requests.parquet", "arrival_s"): ("inf", float("inf")),
             ("requests.parquet", "finish_s"): ("1e300", 1e300),
             ("steps.parquet", "duration_s"): ("nan", float("nan")),
             ("steps.parquet", "start_s"): ("negative", -5.0)}
    for (table, col), (bad, value) in cells.items():
        out.append(Case("compare", f"cmp-{col}-{bad}", _mutated(_table(table, _cell(col, value))),
                        (col,)))
    out.append(Case("compare", "cmp-ttft-text", _mutated(_table("requests.parquet",
                    _cell("ttft_s", "x"))), ("ttft_s", "numbers")))
    late = lambda df: df.assign(ttft_s=df["e2el_s"] + 1.0)  # noqa: E731
    out.append(Case("compare", "cmp-ttft-after-e2el", _mutated(_table("requests.parquet", late)),
                    ("not in order",)))
    for flag in ("--plot", "--json"):
        for name, target, needle in FILE_OUTS:
            out.append(Case("compare", f"cmp{flag[1:]}-{name}", lambda d, f, t=target, g=flag: [
                "compare", str(f.truth), str(f.truth), g, t(d),
                *(["--no-plot"] if g == "--json" else [])], (flag, needle)))
    out += [
        Case("compare", "cmp-ok-self-json", lambda d, f: [
            "compare", str(f.truth), str(f.truth), "--no-plot", "--json", str(d / "c.json")],
            ok=True, writes=("c.json",)),
        Case("compare", "cmp-ok-default-png", lambda d, f: (
            (d / "compare.png").write_text("mine"),
            ["compare", str(f.truth), str(f.truth)])[1], ok=True,
            writes=("compare.png", "compare-2.png")),
    ]
    return out


# ---- calibrate fit-steps -------------------------------------------------------------------
def _log(mutate: Callable[[list[dict]], None] | None = None, *extra: str) -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        recs = copy.deepcopy(f.steps)
        if mutate:
            mutate(recs)
        p = d / "steps.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        return ["calibrate", "fit-steps", str(p), "-o", str(d / "m.yaml"), *extra]
    return build


def _rec(key: str, value, i: int = 3):
    def mutate(recs: list[dict]) -> None:
        recs[i][key] = value
    return mutate


def _csv_log(text: str) -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        (d / "steps.csv").write_text(text)
        return ["calibrate", "fit-steps", str(d / "steps.csv"), "-o", str(d / "m.yaml")]
    return build


def fit_steps_cases() -> list[Case]:
    out = []
    for name, make, needle in INPUTS:
        if name == "missing":
            needle = "not found"
        out.append(Case("fit-steps", f"fs-input-{name}", lambda d, f, m=make: [
            "calibrate", "fit-steps", m(d), "-o", str(d / "m.yaml")], (needle,)))
    for key in ("num_ctx_tokens", "num_generation_requests"):
        for bad in ("huge", "negative", "text", "null", "bool", "nan"):
            out.append(Case("fit-steps", f"fs-{key}-{bad}", _log(_rec(key, BAD_NUMBERS[bad])),
                            ("line 4", key)))
        out.append(Case("fit-steps", f"fs-{key}-fraction", _log(_rec(key, 1.5)), (key,)))
    for key in ("start_s", "end_s", "scheduled_s", "exec_end_s"):
        for bad in ("nan", "inf", "text", "1e300", "bool"):
            out.append(Case("fit-steps", f"fs-{key}-{bad}", _log(_rec(key, BAD_NUMBERS[bad])),
                            ("line 4", key)))
    for bad in ("nan", "negative", "text"):
        out.append(Case("fit-steps", f"fs-elapsed-{bad}", _log(_rec("elapsed_ms",
                        BAD_NUMBERS[bad])), ("elapsed_ms",)))
    for bad, value in {"huge": {"p0": 10 ** 30}, "negative": {"p0": -1}, "text": "x",
                       "list": [1, 2]}.items():
        out.append(Case("fit-steps", f"fs-tokens-{bad}", _log(_rec("tokens", value)),
                        ("tokens",)))

    def ends_first(recs):
        recs[3]["end_s"] = recs[3]["start_s"] - 0.01

    def reversed_times(recs):
        starts = [r["start_s"] for r in recs]
        for r, t in zip(recs, reversed(starts)):
            shift = t - r["start_s"]
            for k in ("start_s", "scheduled_s", "exec_end_s", "end_s"):
                r[k] += shift

    def identical(recs):
        recs[:] = [dict(recs[0], start_s=i * 0.05, scheduled_s=i * 0.05 + 1e-4,
                        exec_end_s=i * 0.05 + 0.01, end_s=i * 0.05 + 0.011)
                   for i in range(len(recs))]

    def no_context(recs):
        recs[3]["context"] = {}

    out += [Case("fit-steps", "fs-ends-before-start", _log(ends_first), ("before start_s",)),
            Case("fit-steps", "fs-time-reversed", _log(reversed_times), ("time order",)),
            Case("fit-steps", "fs-identical-steps", _log(identical), ("same shape",)),
            Case("fit-steps", "fs-context-missing", _log(no_context), ("context",)),
            Case("fit-steps", "fs-too-few", _log(lambda r: r.__delitem__(slice(5, None))),
                 ("at least",)),
            Case("fit-steps", "fs-gpu-unknown", _log(None, "--gpu", "h900"), ("--gpu", "h900")),
            Case("fit-steps", "fs-csv-zero", _csv_log("prefill_tokens,decode_seqs,step_ms\n"
                                                      + "5,1,0\n" * 10), ("step_ms",)),
            Case("fit-steps", "fs-csv-text", _csv_log("prefill_tokens,decode_seqs,step_ms\n"
                                                      + "5,x,3\n" * 10), ("decode_seqs",)),
            Case("fit-steps", "fs-csv-missing", _csv_log("prefill_tokens,step_ms\n5,3\n"),
                 ("decode_seqs",))]
    for name, target, needle in FILE_OUTS:
        out.append(Case("fit-steps", f"fs-out-{name}", lambda d, f, t=target: [
            *_log()(d, f)[:3], "-o", t(d)], ("--out", needle)))
    out.append(Case("fit-steps", "fs-ok", _log(), ok=True, writes=("steps.jsonl", "m.yaml")))
    return out


# ---- trace export ---------------------------------------------------------------------------
def _scenario_file(data: bytes):
    def make(d: Path) -> str:
        (d / "s.yaml").write_bytes(data)
        return str(d / "s.yaml")
    return make


def export_cases() -> list[Case]:
    out = []
    for name, target, needle in FILE_OUTS:
        out.append(Case("trace export", f"te-out-{name}", lambda d, f, t=target: [
            "trace", "export", str(f.scenario), "-o", t(d)], ("--out", needle)))
    scen = {"missing": (lambda d: str(d / "nope.yaml"), "nope.yaml"),
            "folder": (lambda d: str(d / "user"), "folder"),
            "dev-null": (lambda d: "/dev/null", "device"),
            "binary": (_scenario_file(bytes(range(256))), "s.yaml"),
            "utf16": (_scenario_file(GOOD.encode("utf-16")), "UTF-16"),
            "list": (_scenario_file(b"[1, 2]"), "s.yaml")}
    for name, (make, needle) in scen.items():
        out.append(Case("trace export", f"te-scenario-{name}", lambda d, f, m=make: [
            "trace", "export", m(d), "-o", str(d / "w.jsonl")], (needle,)))
    traces = {"missing": (lambda d: str(d / "nope.csv"), "no such file"),
              "folder": (lambda d: str(d / "user"), "not a regular file"),
              "dev-null": (lambda d: "/dev/null", "not a regular file"),
              "bad-cell": (_bytes_file("t.csv", b"arrival_s,prompt_tokens,output_tokens\n0,x,3\n"),
                           "prompt_tokens")}
    for name, (make, needle) in traces.items():
        out.append(Case("trace export", f"te-trace-{name}", lambda d, f, m=make: [
            "trace", "export", "--trace", m(d), "-o", str(d / "w.jsonl")], (needle,)))
    for name, s in {"nan-rate": "workload.arrival.rate=.nan",
                    "unknown-key": "workload.nope=1", "syntax": "workload"}.items():
        out.append(Case("trace export", f"te-set-{name}", lambda d, f, v=s: [
            "trace", "export", str(f.scenario), "--set", v, "-o", str(d / "w.jsonl")],
            ("--set",)))
    out.append(Case("trace export", "te-format", lambda d, f: [
        "trace", "export", str(f.scenario), "--format", "csv", "-o", str(d / "w.jsonl")],
        ("--format",)))
    out += [Case("trace export", "te-ok", lambda d, f: [
                "trace", "export", str(f.scenario), "-o", str(d / "w.jsonl")], ok=True,
                writes=("w.jsonl",)),
            Case("trace export", "te-ok-default-kept", lambda d, f: (
                (d / "workload.jsonl").write_text("mine"),
                ["trace", "export", str(f.scenario)])[1], ok=True,
                writes=("workload.jsonl", "workload-2.jsonl"))]
    return out


# ---- sweep and capacity -------------------------------------------------------------------
def _sweep(*args: str, out: str = "sw") -> Build:
    return lambda d, f: ["sweep", str(f.scenario), "--rate", "1,2", "-j", "1", "-q",
                         "--no-plots", "-o", str(d / out), *args]


def _resume(edit: Callable[[Path], None]) -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        shutil.copytree(f.sweep, d / "sw")
        edit(d / "sw")
        return _sweep("--resume")(d, f)
    return build


def sweep_cases() -> list[Case]:
    out = []
    for name, target, needle in FOLDER_OUTS:
        out.append(Case("sweep", f"sw-out-{name}", lambda d, f, t=target: [
            "sweep", str(f.scenario), "--rate", "1,2", "-j", "1", "-q", "-o", t(d)],
            ("--out", needle)))
    rates = {"zero": "0", "negative": "-1", "nan": "nan", "inf": "inf", "step-zero": "1:2:0",
             "backwards": "2:1:1", "text": "a,b", "empty": ",", "huge-count": "1:1e9:1e-9"}
    for name, value in rates.items():
        out.append(Case("sweep", f"sw-rate-{name}", lambda d, f, v=value: [
            "sweep", str(f.scenario), "--rate", v, "-j", "1", "-q", "-o", str(d / "sw")],
            ("--rate",)))
    grids = {"no-equals": "engine.max_num_seqs", "unknown": "engine.nope=1,2",
             "empty": "engine.max_num_seqs=", "text": "engine.max_num_seqs=a,b",
             "negative": "engine.max_num_seqs=-1,2"}
    for name, value in grids.items():
        out.append(Case("sweep", f"sw-grid-{name}", lambda d, f, v=value: [
            "sweep", str(f.scenario), "--grid", v, "--rate", "1", "-j", "1", "-q",
            "-o", str(d / "sw")], ("engine",)))
    out += [
        Case("sweep", "sw-seeds-zero", _sweep("--seeds", "0"), ("--seeds",)),
        Case("sweep", "sw-executor", _sweep("--executor", "nope"), ("nope",)),
        Case("sweep", "sw-ray-client", _sweep("--executor", "ray", "--ray-address",
                                               "ray://127.0.0.1:1"), ("--ray-address",)),
        Case("sweep", "sw-resume-manifest-garbage", _resume(
            lambda s: (s / "manifest.json").write_bytes(b"\xff\xfe garbage")), ("manifest",)),
        Case("sweep", "sw-resume-manifest-list", _resume(
            lambda s: (s / "manifest.json").write_text("[]")), ("manifest",)),
        Case("sweep", "sw-resume-other-plan", lambda d, f: (
            shutil.copytree(f.sweep, d / "sw"),
            ["sweep", str(f.scenario), "--rate", "1,3", "-j", "1", "-q", "--no-plots", "-o",
             str(d / "sw"), "--resume"])[1], ("different",)),
        Case("sweep", "sw-exists-no-resume", lambda d, f: (
            shutil.copytree(f.sweep, d / "sw"), _sweep()(d, f))[1], ("--resume",)),
        Case("sweep", "sw-scenario-binary", lambda d, f: [
            "sweep", _scenario_file(bytes(range(256)))(d), "--rate", "1", "-o",
            str(d / "sw")], ("s.yaml",)),
        Case("sweep", "sw-ok-resume-corrupt-point", _resume(
            lambda s: sorted((s / "points").glob("*.json"))[0].write_text("{half")), ok=True,
            writes=("sw",)),
    ]
    return out


def _capacity(*args: str) -> Build:
    return lambda d, f: ["capacity", str(f.scenario), "-j", "1", "-q", "--no-plots",
                         "--seeds", "1", "-o", str(d / "cap"), *args]


def capacity_cases() -> list[Case]:
    out = []
    slos = {"zero": "ttft_p95=0ms", "negative": "ttft_p95=-5ms", "nan": "ttft_p95=nanms",
            "inf": "ttft_p95=1e999ms", "text": "abc", "no-value": "ttft_p95",
            "metric": "foo_p95=1ms", "stat": "ttft_p42=1ms", "unit": "ttft_p95=1parsec",
            "twice": "ttft_p95=1ms,ttft_p95=2ms", "empty": ",", "negative-s": "tpot_p50=-0.1s"}
    for name, value in slos.items():
        needle = ("must be > 0",) if name in ("zero", "negative", "inf", "negative-s") else ()
        out.append(Case("capacity", f"cap-slo-{name}", _capacity("--slo", value),
                        ("--slo", *needle)))
    for name, value in {"zero": "0", "negative": "-1", "text": "abc", "percent": "100%",
                        "nan": "nan"}.items():
        out.append(Case("capacity", f"cap-tol-{name}", _capacity("--tol", value), ("--tol",)))
    for name, target, needle in FOLDER_OUTS:
        out.append(Case("capacity", f"cap-out-{name}", lambda d, f, t=target: [
            "capacity", str(f.scenario), "--slo", "ttft_p95=500ms", "-j", "1", "-q",
            "-o", t(d)], ("--out", needle)))
    out += [Case("capacity", "cap-emit", _capacity("--emit", "sglang"), ("--emit",)),
            Case("capacity", "cap-seeds-zero", _capacity("--seeds", "0"), ("--seeds",)),
            *(Case("capacity", f"cap-spread-{name}", _capacity("--spread", value),
                   ("--spread",)) for name, value in (("one", "1"), ("negative", "-1"),
                                                      ("huge", "99"))),
            Case("capacity", "cap-target-with-grid", _capacity(
                "--target-rate", "5", "--grid", "engine.max_num_seqs=8,16"), ("--grid",)),
            Case("capacity", "cap-grid-unknown", _capacity("--grid", "engine.nope=1,2"),
                 ("engine",))]
    return out


# ---- plot -------------------------------------------------------------------------------------
def _plot(edit: Callable[[Path], None], *extra: str) -> Build:
    def build(d: Path, f: Fixtures) -> list[str]:
        shutil.copytree(f.sweep, d / "sw")
        edit(d / "sw")
        return ["plot", str(d / "sw"), *extra]
    return build


def _replace(name: str, data: bytes | None = None, *, folder: bool = False, fifo: bool = False):
    def edit(s: Path) -> None:
        p = s / name
        if p.is_dir():
            shutil.rmtree(p)
        elif os.path.lexists(p):
            p.unlink()
        if folder:
            p.mkdir()
        elif fifo:
            os.mkfifo(p)
        elif data is not None:
            p.write_bytes(data)
    return edit


def _manifest(change: Callable[[dict], None]):
    def edit(s: Path) -> None:
        doc = json.loads((s / "manifest.json").read_text())
        change(doc)
        (s / "manifest.json").write_text(json.dumps(doc))
    return edit


def plot_cases() -> list[Case]:
    out = []
    for name, make, _ in INPUTS[:3]:
        out.append(Case("plot", f"plot-path-{name}", lambda d, f, m=make: ["plot", m(d)],
                        ("sweep or capacity folder",)))
    out.append(Case("plot", "plot-path-file", lambda d, f: ["plot", str(d / "sentinel.txt")],
                    ("sweep or capacity folder",)))
    for name, data in BAD_BYTES.items():
        out.append(Case("plot", f"plot-manifest-{name}", _plot(_replace("manifest.json", data)),
                        ("manifest",)))
    for name, text in {"object": b"{}", "list": b"[]", "number": b"3", "nan": b"NaN",
                       "kind-only": b'{"kind": "sweep"}'}.items():
        out.append(Case("plot", f"plot-manifest-{name}", _plot(_replace("manifest.json", text)),
                        ("manifest",)))
    out += [Case("plot", "plot-manifest-folder", _plot(_replace("manifest.json", folder=True)),
                 ("sweep or capacity folder",)),
            Case("plot", "plot-manifest-fifo", _plot(_replace("manifest.json", fifo=True)),
                 ("sweep or capacity folder",)),
            Case("plot", "plot-manifest-missing", _plot(_replace("manifest.json")),
                 ("sweep or capacity folder",))]
    for name, data in (("garbage", b"garbage"), ("empty", b""), ("magic", b"PAR1 PAR1")):
        out.append(Case("plot", f"plot-points-{name}", _plot(_replace("points.parquet", data)),
                        ("points.parquet",)))
    out += [Case("plot", "plot-points-missing", _plot(_replace("points.parquet")),
                 ("points.parquet",)),
            Case("plot", "plot-points-folder", _plot(_replace("points.parquet", folder=True)),
                 ("points.parquet",)),
            Case("plot", "plot-points-columns", _plot(_table_file("points.parquet")),
                 ("point_id",)),
            Case("plot", "plot-point-unknown", _plot(lambda s: None, "--point", "nope"),
                 ("--point",)),
            Case("plot", "plot-plots-file", _plot(_replace("plots", b"x")), ("plots",)),
            Case("plot", "plot-plots-link", _plot(lambda s: (
                _replace("plots")(s), (s / "plots").symlink_to(s.parent / "user"))),
                ("plots",)),
            Case("plot", "plot-scenario-invalid", _plot(_manifest(
                lambda m: m["scenario"].update(engine={"max_num_seqs": -1}))),
                ("max_num_seqs",))]
    return out


def _table_file(name: str):
    def edit(s: Path) -> None:
        (s / name).unlink()
        pd.DataFrame({"a": [1, 2]}).to_parquet(s / name)
    return edit


# ---- fidelity ---------------------------------------------------------------------------------
def _fidelity(*args: str, out: str = "fid") -> Build:
    return lambda d, f: ["fidelity", str(f.live), "-q", "-o", str(d / out), *args]


def fidelity_cases() -> list[Case]:
    out = []
    for name, target, needle in FOLDER_OUTS:
        out.append(Case("fidelity", f"fid-out-{name}", lambda d, f, t=target: [
            "fidelity", str(f.live), "-q", "-o", t(d)], ("--out", needle)))
    profiles = {"missing": (lambda d: str(d / "nope.yaml"), "not found"),
                "garbage-yaml": (_bytes_file("p.yaml", b"{{{{ not yaml"), "p.yaml"),
                "binary-yaml": (_bytes_file("p.yaml", bytes(range(256))), "p.yaml"),
                "list-yaml": (_bytes_file("p.yaml", b"[1, 2]\n"), "p.yaml"),
                "garbage-parquet": (_bytes_file("p.parquet", b"PAR1 nope"), "p.parquet"),
                "text-parquet": (_bytes_file("p.parquet", b"a,b\n"), "p.parquet")}
    for name, (make, needle) in profiles.items():
        out.append(Case("fidelity", f"fid-profile-{name}", lambda d, f, m=make: [
            *_fidelity()(d, f), "--profile", m(d)], (needle,)))
    out += [
        Case("fidelity", "fid-device", _fidelity("--device", "tpu"), ("--device",)),
        Case("fidelity", "fid-profile-folder", _fidelity("--profile", "/tmp"), ("/tmp",)),
        Case("fidelity", "fid-scenario-missing", lambda d, f: [
            "fidelity", str(d / "nope.yaml"), "-o", str(d / "fid")], ("nope.yaml",)),
        Case("fidelity", "fid-scenario-binary", lambda d, f: [
            "fidelity", _scenario_file(bytes(range(256)))(d), "-o", str(d / "fid")],
            ("s.yaml",)),
        Case("fidelity", "fid-trace-missing", _fidelity("--trace", "/nonexistent/t.csv"),
             ("t.csv",)),
        Case("fidelity", "fid-set-bad", _fidelity("--set", "engine.max_num_seqs=-1"),
             ("max_num_seqs",)),
    ]
    return out


# ---- check ------------------------------------------------------------------------------------
LOCKED = {"slo": {"ttft_p95_ms": 500, "tpot_p95_ms": 50}, "capacity": {"rate_mean_req_s": 2.0},
          "length_mix": {"requests": 20, "prompt_tokens": {"p50": 100, "p90": 100, "p99": 100},
                         "output_tokens": {"p50": 10, "p90": 10, "p99": 10},
                         "arrivals": {"rate_mean_req_s": 2.0, "interarrival_cv": 1.0}}}


def _chosen(d: Path, f: Fixtures, edit: Callable[[dict], None] | None = None) -> str:
    """A chosen.yaml by hand: GOOD under a locked section (``edit`` changes the locked one)."""
    import yaml

    doc = {**yaml.safe_load(f.scenario.read_text()), "locked": copy.deepcopy(LOCKED)}
    if edit is not None:
        edit(doc)
    (d / "chosen.yaml").write_text(yaml.safe_dump(doc))
    return str(d / "chosen.yaml")


def _new_trace(d: Path) -> str:
    rows = "".join(f"{i * 0.5:.1f},{100 + 10 * (i % 3)},{10 + i % 4}\n" for i in range(20))
    (d / "new.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    return str(d / "new.csv")


def _check(edit: Callable[[dict], None] | None = None, *extra: str) -> Build:
    return lambda d, f: ["check", _chosen(d, f, edit), "--trace", _new_trace(d), *extra]


def _locked(key: str, value) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        if value is _DROP:
            doc["locked"].pop(key)
        else:
            doc["locked"][key] = value
    return edit


def _slo_value(value) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        doc["locked"]["slo"]["ttft_p95_ms"] = value
    return edit


def check_cases() -> list[Case]:
    """No device inputs here: check reads its two files like every other reader, and the
    corpus's device cases are the other commands'."""
    out = []
    for name, make, needle in INPUTS:
        if name.startswith("dev-"):
            continue
        out.append(Case("check", f"check-chosen-{name}", lambda d, f, m=make: [
            "check", m(d), "--trace", _new_trace(d)], (needle,)))
        out.append(Case("check", f"check-trace-{name}", lambda d, f, m=make: [
            "check", _chosen(d, f), "--trace", m(d)], (needle,)))
    for name, value in BAD_NUMBERS.items():
        if name in ("huge", "1e300"):  # a finite, if absurd, budget: the check runs
            continue
        out.append(Case("check", f"check-slo-{name}", _check(_slo_value(value)),
                        ("locked.slo",)))
    out += [
        Case("check", "check-locked-missing", _check(lambda doc: doc.pop("locked")),
             ("no locked section",)),
        Case("check", "check-locked-list", _check(lambda doc: doc.update(locked=[1])),
             ("no locked section",)),
        Case("check", "check-mix-missing", _check(_locked("length_mix", _DROP)),
             ("no locked section",)),
        Case("check", "check-slo-empty", _check(_locked("slo", {})), ("locked.slo",)),
        Case("check", "check-slo-list", _check(_locked("slo", [500])), ("locked.slo",)),
        Case("check", "check-slo-name", _check(_locked("slo", {"foo_p95_ms": 5})),
             ("locked.slo",)),
        Case("check", "check-scenario-invalid", _check(
            lambda doc: doc.update(engine={"max_num_seqs": -1})), ("max_num_seqs",)),
        Case("check", "check-set-bad", _check(None, "--set", "workload.prompt_scale=-1"),
             ("prompt_scale",)),
        Case("check", "check-format-bad", _check(None, "--format", "bogus"),
             ("--format 'bogus': one of auto, azure",)),  # the option, not a --set
        Case("check", "check-ok-json", _check(None, "--json"), ok=True,
             writes=("chosen.yaml", "new.csv"), stdout_json=True),
        Case("check", "check-ok-capacity", _check(None, "--json", "--capacity", "-j", "1"),
             ok=True, writes=("chosen.yaml", "new.csv"), stdout_json=True),
    ]
    return out


def all_cases() -> list[Case]:
    cases = [*replay_bench_cases(), *compare_cases(), *fit_steps_cases(), *export_cases(),
             *sweep_cases(), *capacity_cases(), *plot_cases(), *fidelity_cases(),
             *check_cases()]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases
