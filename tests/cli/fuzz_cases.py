"""The fuzz corpus: malformed scenarios, traces, paths and --set values, generated here.

Each Case builds its inputs in an empty folder and returns the command line. Every
failing case must exit 2 with one line naming ``needles`` (file, field, row); ``ok``
cases must succeed with strict JSON. ``proc`` cases run as a real subprocess (FIFOs,
/dev/zero, slow runs) under a timeout.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.cli.test_cli_errors import GOOD

OUT = "out"  # every case's --out, relative to its folder


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], list[str]]  # folder -> argv (paths inside the folder)
    needles: tuple[str, ...] = ()
    ok: bool = False  # expected to succeed
    proc: bool = False  # run as a subprocess


def _scenario(text: str | bytes, *extra: str, name: str = "s.yaml"):
    def build(d: Path) -> list[str]:
        data = text.encode() if isinstance(text, str) else text
        (d / name).write_bytes(data)
        return ["run", str(d / name), "--out", str(d / OUT), "-q", "--no-plots", *extra]
    return build


def _trace(data: bytes, name: str = "trace.csv", command: str = "run"):
    def build(d: Path) -> list[str]:
        (d / name).write_bytes(data)
        if command == "stats":
            return ["trace", "stats", str(d / name)]
        return ["run", "--trace", str(d / name), "--out", str(d / OUT), "-q", "--no-plots"]
    return build


def _sets(*assignments: str):
    return _scenario(GOOD, *[x for a in assignments for x in ("--set", a)])


def _bomb(levels: int, fanout: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * fanout)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines)


def scenario_cases() -> list[Case]:
    bad_bytes = {
        "binary": (bytes(range(256)) * 4, ("s.yaml", "NUL")),
        "utf16-le-bom": (GOOD.encode("utf-16"), ("s.yaml", "UTF-16")),
        "utf16-be-bom": (codecs.BOM_UTF16_BE + GOOD.encode("utf-16-be"), ("s.yaml", "UTF-16")),
        "utf32": (GOOD.encode("utf-32"), ("s.yaml", "UTF-32")),
        "utf16-no-bom": (GOOD.encode("utf-16-le"), ("s.yaml", "NUL")),
        "latin1": ((GOOD + "description: caf\xe9\n").encode("latin-1"), ("s.yaml", "UTF-8")),
        "too-big": (b"# " + b"x" * (1 << 20) + b"\n" + GOOD.encode(), ("s.yaml", "larger")),
        "empty": (b"", ("s.yaml", "mapping")),
        "comments-only": (b"# nothing here\n", ("s.yaml", "mapping")),
        "scalar": (b"42\n", ("s.yaml", "mapping")),
        "list": (b"- a\n- b\n", ("s.yaml", "mapping")),
        "tab-indent": (b"name: t\n\tmodel: x\n", ("s.yaml", "line")),
        "unclosed": (b"model: [unclosed\n", ("s.yaml", "line")),
        "bad-escape": (b'name: "\\q"\n', ("s.yaml", "line")),
        "dup-key": ((GOOD + "seed: 1\nseed: 2\n").encode(), ("s.yaml", "duplicate key")),
        "python-tag": ((GOOD + "seed: !!python/object/apply:os.system ['true']\n").encode(),
                       ("s.yaml", "line")),
        "deep-list": (("a: " + "[" * 1200 + "]" * 1200 + "\n").encode(), ("s.yaml", "nested")),
        "deep-map": (("a: " + "{a: " * 300 + "1" + "}" * 300 + "\n").encode(),
                     ("s.yaml", "nested")),
        "recursive-alias": (b"a: &a [*a]\n", ("s.yaml",)),
        "long-key": ((GOOD + "k" * 1000 + ": 1\n").encode(), ("s.yaml", "unknown key")),
        "very-long-key": ((GOOD + "k" * 100_000 + ": 1\n").encode(), ("s.yaml", "line")),
        "unknown-top-key": ((GOOD + "engin: {}\n").encode(), ("s.yaml", "did you mean")),
        "name-list": ((GOOD + "name: [1, 2]\n").replace("name: t\n", "").encode(),
                      ("s.yaml", "name")),
        "model-none": (GOOD.replace("llama-3-8b", "null").encode(), ("s.yaml", "model")),
        "workload-missing": (GOOD.split("workload:")[0].encode(), ("s.yaml", "workload")),
    }
    cases = [Case(f"scenario-{k}", _scenario(v[0]), v[1]) for k, v in bad_bytes.items()]
    for levels in range(2, 10):  # billion laughs: refused from the node graph when too big
        needle = "expands" if 9 ** levels > 100_000 else "unknown key"
        cases.append(Case(f"scenario-alias-bomb-{levels}", _scenario(GOOD + _bomb(levels)),
                          ("s.yaml", needle)))
    return cases + issue_cases()


_EXPLICIT_MODEL = ("{name: m, num_layers: 32, hidden_size: 4096, num_attention_heads: 32, "
                   "num_kv_heads: 8, head_dim: 128, intermediate_size: 14336, vocab_size: "
                   "128256, max_position_embeddings: 8192}")
_EXPLICIT_GPU = ("{name: g, hbm_bytes: 85899345920, mem_bandwidth: 3.35e12, bf16_flops: 9.89e14,"
                 " interconnect_bandwidth: 4.5e11, host_bandwidth: 6.4e10}")


def _with(model: dict | None = None, gpu: dict | None = None) -> str:
    m = dict(x.split(": ") for x in _EXPLICIT_MODEL.strip("{}").split(", "))
    g = dict(x.split(": ") for x in _EXPLICIT_GPU.strip("{}").split(", "))
    m.update({k: str(v) for k, v in (model or {}).items()})
    g.update({k: str(v) for k, v in (gpu or {}).items()})
    text = GOOD.replace("model: llama-3-8b", "model: {" + ", ".join(f"{k}: {v}" for k, v in
                                                                    m.items()) + "}")
    return text.replace("gpu: h100-sxm", "gpu: {" + ", ".join(f"{k}: {v}" for k, v in
                                                             g.items()) + "}")


def issue_cases() -> list[Case]:
    """The numeric edges, impossible configurations and vague messages of the report."""
    rows = {
        "hash-block-30-digits": (GOOD + "  shared_prefix: {tokens: 100, hash_block_size: "
                                 "123456789012345678901234567890}\n", "hash_block_size"),
        "gamma-cv-tiny": (GOOD.replace("{process: poisson, rate: 2.0}",
                                       "{process: gamma, rate: 2.0, cv: 1e-200}"), "cv"),
        "swap-space-1e300": (GOOD + "engine: {swap_space: 1.0e+300}\n", "swap_space"),
        "num-requests-1e12": (GOOD.replace("num_requests: 20", "num_requests: 1000000000000"),
                              "num_requests"),
        "rate-times-duration": (GOOD.replace("num_requests: 20", "duration_s: 100000000"),
                                "duration_s"),
        "hbm-2-62": (_with(gpu={"hbm_bytes": 2 ** 62}), "gpu.hbm_bytes"),
        "hidden-size-1": (_with(model={"hidden_size": 1, "num_attention_heads": 1,
                                       "num_kv_heads": 1, "head_dim": 1,
                                       "intermediate_size": 1}), "KV cache would have"),
        "block-size-7": (GOOD + "engine: {block_size: 7}\n", "multiple of 16"),
        "block-size-8": (GOOD + "engine: {block_size: 8}\n", "multiple of 16"),
        "block-size-2048": (GOOD + "engine: {block_size: 2048}\n", "block_size"),
        "tokens-below-seqs": (GOOD + "engine: {max_num_batched_tokens: 100, max_num_seqs: 200}"
                              "\n", "max_num_seqs"),
        "kv-heads-not-dividing": (_with(model={"num_kv_heads": 3}), "must divide"),
        "kv-heads-above-heads": (_with(model={"num_kv_heads": 64}), "must divide"),
        "explicit-model-zero-layers": (_with(model={"num_layers": 0}), "model.num_layers"),
        "explicit-gpu-zero-bandwidth": (_with(gpu={"mem_bandwidth": 0}), "gpu.mem_bandwidth"),
        "explicit-model-missing-field": (_with().replace("vocab_size: 128256, ", ""),
                                         "model.vocab_size"),
        "threshold-over-max-len": (GOOD + "engine: {long_prefill_token_threshold: 9000}\n",
                                   "long_prefill_token_threshold"),
        "max-model-len-over-context": (GOOD + "engine: {max_model_len: 100000}\n",
                                       "max_model_len"),
        "chunked-off-small-budget": (GOOD + "engine: {enable_chunked_prefill: false, "
                                     "max_num_batched_tokens: 1024, max_num_seqs: 16}\n",
                                     "max_num_batched_tokens"),
        "linear-base-1e300": (GOOD + "cost: {name: linear, base_ms: 1.0e+300}\n", "base_ms"),
        "window-1e300": (GOOD + "  window_s: [0, 1.0e+300]\n", "window_s"),
        "horizon-nan": (GOOD + "horizon_s: .nan\n", "horizon_s"),
        "horizon-inf": (GOOD + "horizon_s: .inf\n", "horizon_s"),
        "rate-1e-300": (GOOD.replace("rate: 2.0", "rate: 1.0e-300"), "rate"),
        "seed-huge": (GOOD + "seed: 123456789012345678901234567890\n", "seed"),
        "tp-not-dividing": (GOOD + "tensor_parallel_size: 3\n", "tensor_parallel_size"),
        "prefix-hash-ids": (GOOD + "  shared_prefix: {tokens: 16000000}\n",
                            ("shared_prefix", "hash ids")),
        "kv-pool-override-huge": (GOOD + "engine: {num_gpu_blocks_override: 1000000000000}\n",
                                  "num_gpu_blocks_override"),
    }
    return [Case(f"issue-{k}", _scenario(text),
                 needle if isinstance(needle, tuple) else ("s.yaml", needle))
            for k, (text, needle) in rows.items()]


# numeric fields reachable with --set, and values none of them may accept
NUMERIC_FIELDS = (
    "seed", "horizon_s", "tensor_parallel_size",
    *(f"engine.{k}" for k in ("block_size", "gpu_memory_utilization", "max_num_seqs",
                              "max_num_batched_tokens", "long_prefill_token_threshold",
                              "max_model_len", "num_gpu_blocks_override", "swap_space")),
    *(f"slo.{k}" for k in ("ttft_ms", "tpot_ms", "e2el_ms", "percentile")),
    *(f"model.{k}" for k in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                             "head_dim", "intermediate_size", "vocab_size",
                             "max_position_embeddings", "dtype_bytes", "kv_dtype_bytes")),
    *(f"gpu.{k}" for k in ("hbm_bytes", "mem_bandwidth", "bf16_flops", "fp8_flops",
                           "interconnect_bandwidth", "host_bandwidth", "gemm_efficiency",
                           "attention_efficiency", "mem_efficiency", "allreduce_efficiency",
                           "allreduce_latency_s", "step_overhead_s")),
    "workload.arrival.rate", "workload.num_requests", "workload.max_requests",
    "workload.priority", "workload.lengths.prompt", "workload.lengths.output",
)
BAD_NUMBERS = {"text": "abc", "list": "[1, 2]", "map": "{a: 1}", "nan": ".nan", "ninf": "-.inf",
               "huge": "1" + "0" * 30, "nhuge": "-1" + "0" * 30, "e400": "1e400"}


def set_value_cases() -> list[Case]:
    cases = [Case(f"set-{field}-{label}", _sets(f"{field}={value}"), ("--set", field))
             for field in NUMERIC_FIELDS for label, value in BAD_NUMBERS.items()]
    syntax = {
        "no-equals": ("engine", "KEY=VALUE"), "no-key": ("=3", "KEY=VALUE"),
        "leading-dot": (".x=1", "dotted key"), "double-dot": ("engine..x=1", "dotted key"),
        "space-in-key": ("a b=1", "dotted key"), "into-int": ("engine.block_size.x=1",
                                                             "engine.block_size"),
        "into-set-int": ("workload.num_requests.x=1", "not a section"),
        "into-str": ("name.x=1", "not a section"), "index-on-map": ("engine.0=1", "engine.0"),
        "index-into-map": ("engine.0.x=1", "not a list"),
        "unknown-engine-key": ("engine.max_num_seq=1", "did you mean 'max_num_seqs'"),
        "unknown-model-key": ("model.num_layer=1", "did you mean 'num_layers'"),
        "unknown-gpu-key": ("gpu.hbm=1", "gpu.hbm"),
        "unknown-section": ("engin.max_num_seqs=1", "did you mean 'engine'"),
        "unknown-scheduler": ("scheduler.name=vlm", "did you mean 'vllm'"),
        "unknown-kv": ("kv.name=pagd", "did you mean 'paged'"),
        "unknown-cost": ("cost.name=linar", "did you mean 'linear'"),
        "unknown-process": ("workload.arrival.process=poison", "process"),
        "unknown-model": ("model=llama-3-8c", "unknown model"),
        "unknown-catalog-model-field": ("model=nope-9b", "unknown model"),
        "model-list": ("model=[1, 2]", "model"), "engine-scalar": ("engine=5", "engine"),
        "bomb-description": ("description=" + _flow_bomb(8), "expands"),
        "flow-bomb": ("description=" + _flow_bomb(9), "expands"),
        "long-value": ("seed=" + "9" * 70_000, "longer than"),
        "horizon-zero": ("horizon_s=0", "horizon_s"),
        "tp-2048": ("tensor_parallel_size=2048", "tensor_parallel_size"),
        "tp-3": ("tensor_parallel_size=3", "tensor_parallel_size"),
        "block-size-7": ("engine.block_size=7", "multiple of 16"),
        "dtype-3": ("model.dtype_bytes=3", "model.dtype_bytes"),
        "mix-index": ("workload.mix.0.lane=x", "not a list"),
        "catalog-fields-then-bad": ("model.num_kv_heads=5", "must divide"),
    }
    cases += [Case(f"set-syntax-{k}", _sets(a), (n,)) for k, (a, n) in syntax.items()]
    return cases


def _flow_bomb(levels: int) -> str:
    text = "&a0 [x, x, x, x, x, x, x, x, x]"
    return "{" + ", ".join([f"k0: {text}"] + [
        f"k{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]) + "}"


CSV_HEAD = b"arrival_s,prompt_tokens,output_tokens\n"


def trace_cases() -> list[Case]:
    rows = {
        "missing-column": (b"arrival_s,prompt_tokens\n0,5\n", "output_tokens"),
        "dup-column": (b"arrival_s,prompt_tokens,prompt_tokens,output_tokens\n0,5,6,3\n",
                       "twice"),
        "negative-prompt": (CSV_HEAD + b"0,5,3\n1,-4,3\n", "row 2"),
        "zero-output": (CSV_HEAD + b"0,5,0\n", "output_tokens"),
        "text-cell": (CSV_HEAD + b"0,five,3\n", "prompt_tokens"),
        "nan-text": (CSV_HEAD + b"0,nan,3\n", "prompt_tokens"),
        "inf-arrival": (CSV_HEAD + b"inf,5,3\n", "arrival_s"),
        "negative-arrival": (CSV_HEAD + b"-1,5,3\n", "arrival_s"),
        "blank-arrival": (CSV_HEAD + b",5,3\n", "arrival_s"),
        "arrival-1e308": (CSV_HEAD + b"0,5,3\n1e308,5,3\n", "arrivals reach"),
        "tokens-1e30": (CSV_HEAD + b"0,1000000000000000000000000000000,3\n", "prompt_tokens"),
        "fractional-tokens": (CSV_HEAD + b"0,1.5,3\n", "prompt_tokens"),
        "empty": (b"", "empty"),
        "ragged": (CSV_HEAD + b"0,5,3,9\n", "more fields"),
        "unbalanced-quote": (CSV_HEAD + b'0,"5,3\n', "trace.csv"),
        "binary": (bytes(range(256)) * 8, "UTF-8"),
        "utf16-no-bom": (("arrival_s,prompt_tokens,output_tokens\n0,5,3\n").encode("utf-16-le"),
                         "UTF-16"),
        "utf16": (("arrival_s,prompt_tokens,output_tokens\n0,5,3\n").encode("utf-16"), "UTF-16"),
        "utf32": (("arrival_s,prompt_tokens,output_tokens\n0,5,3\n").encode("utf-32"), "UTF-32"),
        "latin1": (CSV_HEAD + b"0,5,3\n1,\xe9,3\n", "UTF-8"),
        "unknown-format": (b"a,b,c\n1,2,3\n", "cannot detect"),
        "native-dup-id": (b"request_id,arrival_s,prompt_tokens,output_tokens\nx,0,5,3\nx,1,5,3\n",
                          "unique"),
        "native-bad-block": (b"# hash_block_size=abc\n" + CSV_HEAD + b"0,5,3\n",
                             "hash_block_size"),
        "native-bad-chain": (b"# hash_block_size=16\narrival_s,prompt_tokens,output_tokens,"
                             b"prefix_hashes\n0,40,3,1 x\n", "prefix_hashes"),
    }
    cases = [Case(f"trace-{k}", _trace(v), ("trace.csv", n)) for k, (v, n) in rows.items()]
    cases += [Case(f"trace-stats-{k}", _trace(rows[k][0], command="stats"), ("trace.csv",))
              for k in ("missing-column", "dup-column", "utf16", "binary", "latin1", "ragged")]
    jsonl = {
        "malformed": (b'{"timestamp": 0, "input_length": 5\n', "line 1"),
        "array": (b'{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": [1]}\n'
                  b"[1, 2]\n", "line 2"),
        "missing": (b'{"timestamp": 0, "input_length": 5, "hash_ids": [1]}\n', "output_length"),
        "nan": (b'{"timestamp": 0, "input_length": NaN, "output_length": 3, "hash_ids": [1]}\n',
                "NaN"),
        "deep": (b'{"timestamp": 0, "input_length": ' + b"[" * 100_000 + b"]" * 100_000 +
                 b', "hash_ids": [1]}\n', "line 1"),
        "string-time": (b'{"timestamp": "x", "input_length": 5, "output_length": 3, '
                        b'"hash_ids": [1]}\n', "timestamp"),
    }
    cases += [Case(f"jsonl-{k}", _trace(v, "trace.jsonl"), ("trace.jsonl", n))
              for k, (v, n) in jsonl.items()]
    cases.append(Case("parquet-garbage", _trace(b"PAR1 not really", "trace.parquet"),
                      ("trace.parquet", "Parquet")))
    cases.append(Case("azure-bad-time", _trace(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                               b"yesterday,5,3\n"), ("trace.csv", "TIMESTAMP")))
    return cases


def _out_case(name: str, out: str | Callable[[Path], str], needles: tuple[str, ...],
              setup: Callable[[Path], None] | None = None) -> Case:
    def build(d: Path) -> list[str]:
        (d / "s.yaml").write_text(GOOD)
        if setup:
            setup(d)
        target = out(d) if callable(out) else out
        return ["run", str(d / "s.yaml"), "--out", target, "-q", "--no-plots"]
    return Case(f"out-{name}", build, ("--out", *needles))


def _fake_result(d: Path) -> None:
    (d / "res").mkdir()
    (d / "res" / ".servesim-result").write_text("{}")


def path_cases() -> list[Case]:
    cases = [
        _out_case("dot", ".", ("current folder",)), _out_case("empty", "", ("current folder",)),
        _out_case("root", "/", ("root",)), _out_case("dotdot", "..", ("current folder",)),
        _out_case("user-folder", lambda d: str(d / "user"), ("did not write",)),
        _out_case("user-deep", lambda d: str(d / "user" / "deep"), ("did not write",)),
        _out_case("file", lambda d: str(d / "sentinel.txt"), ("is a file",)),
        _out_case("under-file", lambda d: str(d / "sentinel.txt" / "x" / "y"), ("a file",)),
        _out_case("fifo", lambda d: str(d / "fifo"), ("FIFO",),
                  lambda d: os.mkfifo(d / "fifo")),
        _out_case("link", lambda d: str(d / "link"), ("symbolic link",),
                  lambda d: (d / "link").symlink_to(d / "user")),
        _out_case("dev-null", "/dev/null", ("device",)),
        _out_case("proc", "/proc/servesim-fuzz", ("cannot",)),
        _out_case("sys", "/sys/servesim-fuzz", ("/sys",)),
        _out_case("inside-result", lambda d: str(d / "res" / "sub"), ("inside",), _fake_result),
        _out_case("long-name", lambda d: str(d / ("n" * 240)), ("longer than",)),
        _out_case("internal-name", lambda d: str(d / ".r.servesim-staging-0123abcd"),
                  ("staging",)),
        _out_case("lock-link", lambda d: str(d / "r"), ("cannot write",),
                  lambda d: (d / ".r.servesim-lock").symlink_to(d / "sentinel.txt")),
    ]
    scen = {
        "folder": (lambda d: str(d / "user"), "folder"),
        "missing": (lambda d: str(d / "nope.yaml"), "cannot read"),
        "long-missing": (lambda d: str(d / ("x" * 300 + ".yaml")), "cannot read"),
        "loop": (lambda d: _loop(d), "cannot read"),
        "dev-null": (lambda d: "/dev/null", "device"),
    }
    cases += [Case(f"scenario-path-{k}", _argv_scenario(f), (n,)) for k, (f, n) in scen.items()]
    cases += [Case(f"trace-path-{k}", _argv_trace(f), (n,)) for k, (f, n) in {
        "folder": (lambda d: str(d / "user"), "not a regular file"),
        "missing": (lambda d: str(d / "nope.csv"), "no such file"),
        "dev-null": (lambda d: "/dev/null", "not a regular file"),
    }.items()]
    return cases


def _loop(d: Path) -> str:
    (d / "loop.yaml").symlink_to(d / "loop.yaml")
    return str(d / "loop.yaml")


def _argv_scenario(path: Callable[[Path], str]):
    def build(d: Path) -> list[str]:
        return ["run", path(d), "--out", str(d / OUT), "-q", "--no-plots"]
    return build


def _argv_trace(path: Callable[[Path], str]):
    def build(d: Path) -> list[str]:
        return ["run", "--trace", path(d), "--out", str(d / OUT), "-q", "--no-plots"]
    return build


def ok_cases() -> list[Case]:
    """Edges that must succeed (their summary.json is checked as strict JSON)."""
    rows = {
        "nothing-finishes": ("horizon_s=0.001",),
        "all-rejected": ("engine.max_model_len=64",),
        "one-seq": ("engine.max_num_seqs=1",),
        "budget-16": ("engine.max_num_batched_tokens=16", "engine.max_num_seqs=16"),
        "block-1024": ("engine.block_size=1024",),
        "fp8-catalog-model": ("model.dtype_bytes=1",),
        "gpu-field-on-catalog": ("gpu.step_overhead_s=0.01",),
        "one-request": ("workload.num_requests=1",),
        "name-traversal": ("name=../../x",),
    }
    cases = [Case(f"ok-{k}", _sets(*v), ok=True) for k, v in rows.items()]
    cases.append(Case("ok-trace-same-time", _trace(CSV_HEAD + b"0,5,3\n0,5,3\n0,7,2\n"), ok=True))
    cases.append(Case("ok-trace-one-row", _trace(CSV_HEAD + b"3.5,100,10\n"), ok=True))
    return cases


def process_cases() -> list[Case]:
    """Inputs that would block or never end in-process: run as real subprocesses."""
    def fifo_scenario(d: Path) -> list[str]:
        os.mkfifo(d / "s.yaml")
        return ["run", str(d / "s.yaml"), "--out", str(d / OUT), "-q"]

    def fifo_trace(d: Path) -> list[str]:
        os.mkfifo(d / "t.csv")
        return ["run", "--trace", str(d / "t.csv"), "--out", str(d / OUT), "-q"]

    return [
        Case("proc-fifo-scenario", fifo_scenario, ("s.yaml", "FIFO"), proc=True),
        Case("proc-fifo-trace", fifo_trace, ("t.csv", "not a regular file"), proc=True),
        Case("proc-dev-zero-scenario", _argv_scenario(lambda d: "/dev/zero"), ("device",),
             proc=True),
        Case("proc-dev-zero-trace", _argv_trace(lambda d: "/dev/zero"), ("not a regular",),
             proc=True),
        Case("proc-one-token-budget", _sets("engine.max_num_batched_tokens=1",
                                            "workload.num_requests=40"), ok=True, proc=True),
    ]


def all_cases() -> list[Case]:
    return (scenario_cases() + set_value_cases() + trace_cases() + path_cases() + ok_cases()
            + process_cases())
