"""Record `vllm bench serve` against a real CPU vLLM server: the ground truth that
`servesim replay-bench` is checked against (`make record-bench`).

    python benchmarks/vllm_bench/record.py --vllm-python .venv-vllm/bin/python \
        --out tests/data/vllm_bench

Runs with servesim's own venv (it exports the workload); vLLM runs in its own venv. Steps:
export benchmarks/vllm_bench/workload.yaml as a timed_trace dataset; write the tiny Llama
(config + word-level tokenizer, dummy weights); start vLLM's OpenAI server with the knobs of
server.yaml and per-step logging (`--enable-logging-iteration-details`); run `vllm bench
serve` twice over the dataset: Poisson arrivals at the workload's rate (vLLM draws them),
then a closed loop of 4 clients (`--max-concurrency 4`, every request released at once);
stop the server. A warm-up pass over the same requests comes first (not kept). Writes,
gzipped:

    poisson.json.gz, closed.json.gz   the --save-result --save-detailed results (without
                                      the dummy model's generated_texts)
    server_steps.log.gz               the server's Iteration(N) lines of the timed runs
                                      (fit-steps reads them), stamped with the wall clock
                                      (s, to the us)
    record.json                       versions, knobs, commands, machine load before/after

Refuses to start while another vLLM process runs (a recording needs the machine).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PORT = 8765
SERVER_KNOBS = [  # the engine of server.yaml
    "--load-format", "dummy", "--dtype", "bfloat16", "--block-size", "32", "--enforce-eager",
    "--max-model-len", "2048", "--max-num-seqs", "16", "--max-num-batched-tokens", "512",
    "--kv-cache-memory-bytes", str(1024 * 32 * 8192),  # 1024 blocks of 32 tokens x 8 KiB
    "--no-enable-prefix-caching", "--enable-logging-iteration-details", "--seed", "0",
]
RUNS = {  # result name -> the traffic options of vllm bench serve
    "poisson": ["--no-self-timed", "--request-rate", "2", "--burstiness", "1"],
    "closed": ["--no-self-timed", "--max-concurrency", "4"],
}
# Before the timed runs, the same requests once at 8 req/s, results and step log discarded:
# a fresh CPU server's first steps of each new shape run up to tens of times slower.
WARMUP = ["--no-self-timed", "--request-rate", "8", "--burstiness", "1"]
KEEP = ("Iteration(", "KV cache size")  # server log lines worth committing
# vLLM's logging with each line stamped `time.time()` to the microsecond (its default format
# stops at the second): the frontend logs a step's Iteration line when the step's outputs
# reach it, so consecutive stamps give the step-to-step period (the elapsed time in the line
# covers model execution only)
LOGGING = {
    "version": 1, "disable_existing_loggers": False,
    "formatters": {"stamped": {"format": "%(created).6f %(process)d %(levelname)s %(message)s"}},
    "handlers": {"stamped": {"class": "logging.StreamHandler", "formatter": "stamped",
                             "level": "INFO", "stream": "ext://sys.stdout"}},
    "loggers": {"vllm": {"handlers": ["stamped"], "level": "INFO", "propagate": False}},
}


def _ancestors() -> set[str]:
    """This process and its parents (make's command line names the vLLM venv too)."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(str(pid))
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def _descendants() -> set[str]:
    """Processes this one started, and theirs (the server, its engine, the benchmark)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[d.name] = (d / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
    mine, grew = {str(os.getpid())}, True
    while grew:
        new = {p for p, pp in parent.items() if pp in mine} - mine
        mine |= new
        grew = bool(new)
    return mine


def other_vllm() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "vllm"], capture_output=True, text=True).stdout
    mine = _ancestors() | _descendants()
    return [ln for ln in out.splitlines() if ln.split()[0] not in mine
            and ("vllm" in ln.split()[1] or "vllm.entrypoints" in ln)]  # a vLLM venv's python


def export(dataset: Path) -> tuple[str, int]:
    from sim.config.load import load_scenario
    from traces.loaders.vllm_bench import write_dataset
    from traces.workload import build_workload

    loaded = load_scenario(HERE / "workload.yaml")
    trace = build_workload(loaded.scenario.workload, seed=loaded.scenario.seed,
                           base_dir=loaded.base_dir)
    write_dataset(trace, dataset)
    return str(HERE.relative_to(HERE.parents[1]) / "workload.yaml"), len(trace)


def wait_ready(proc: subprocess.Popen, timeout_s: float = 600) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"the vLLM server exited with status {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v1/models", timeout=2)
            return time.monotonic() - t0
        except OSError:
            time.sleep(2)
    raise SystemExit(f"the vLLM server was not ready after {timeout_s:.0f} s")


def bench(py: str, model: Path, dataset: Path, n: int, name: str, work: Path,
          traffic: list[str]) -> list[str]:
    cmd = [py, str(HERE / "bench_serve.py"), "--backend", "vllm", "--model", str(model),
           "--port", str(PORT), "--dataset-name", "timed_trace", "--dataset-path", str(dataset),
           "--num-prompts", str(n), "--timed-trace-label-timestamp", "arrival_s",
           "--timed-trace-chunk-hash-size", "512", "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--save-result", "--save-detailed", "--result-dir", str(work),
           "--result-filename", f"{name}.json", "--seed", "0", "--disable-tqdm", *traffic]
    with open(work / f"{name}.bench.log", "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    return cmd


def gzip_to(src: Path, dst: Path, keep=None, skip: int = 0) -> None:
    """Gzip `src` to `dst`; with `keep`, only lines holding one of its strings, and of the
    first `skip` bytes only the KV cache size line."""
    data = src.read_bytes()
    lines = data[skip:].splitlines(keepends=True)
    if keep is not None:
        head = [ln for ln in data[:skip].splitlines(keepends=True) if b"KV cache size" in ln]
        lines = head + [ln for ln in lines if any(k.encode() in ln for k in keep)]
    with gzip.GzipFile(dst, "wb", mtime=0) as g:  # mtime 0: the same bytes, the same file
        g.write(b"".join(lines))


def versions(py: str) -> dict:
    code = "import vllm, torch; print(vllm.__version__, torch.__version__)"
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd="/").stdout
    v, t = (out.split() + ["?", "?"])[:2]
    return {"vllm": v, "torch": t, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", required=True, help="python of vLLM's venv")
    ap.add_argument("--out", type=Path, required=True, help="folder for the recorded files")
    args = ap.parse_args()
    if busy := other_vllm():
        raise SystemExit("another vLLM process is running; a recording needs the machine:\n"
                         + "\n".join(busy))
    work = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    dataset, model = work / "workload.jsonl", work / "tiny-llama"
    spec, n = export(dataset)
    subprocess.run([args.vllm_python, str(HERE / "tiny_model.py"), str(model)], check=True,
                   cwd=work, stdout=subprocess.DEVNULL)
    record = {"workload": spec, "requests": n, "versions": versions(args.vllm_python),
              "load_before": os.getloadavg(), "server": SERVER_KNOBS, "runs": {}}
    (work / "logging.json").write_text(json.dumps(LOGGING))
    env = {**os.environ, "VLLM_LOGGING_CONFIG_PATH": str(work / "logging.json"),
           "PYTHONUNBUFFERED": "1"}
    server_log = open(work / "server.log", "w")
    server = subprocess.Popen([args.vllm_python, "-m", "vllm.entrypoints.openai.api_server",
                               "--model", str(model), "--port", str(PORT), *SERVER_KNOBS],
                              stdout=server_log, stderr=subprocess.STDOUT, cwd=work, env=env)
    try:
        record["server_start_s"] = round(wait_ready(server), 1)
        bench(args.vllm_python, model, dataset, n, "warmup", work, WARMUP)
        time.sleep(2)  # the last warm-up lines reach the (unbuffered) log
        record["load_after_warmup"] = os.getloadavg()
        timed_from = (work / "server.log").stat().st_size
        for name, traffic in RUNS.items():
            t0 = time.monotonic()
            cmd = bench(args.vllm_python, model, dataset, n, name, work, traffic)
            record["runs"][name] = {"command": " ".join(cmd[1:]).replace(str(work), "WORK"),
                                    "wall_s": round(time.monotonic() - t0, 1),
                                    "load_after": os.getloadavg(),
                                    "other_vllm_after": other_vllm()}
    finally:
        server.terminate()
        server.wait(timeout=60)
        server_log.close()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in RUNS:  # as vLLM wrote them, less the dummy model's generated texts
        result = json.loads((work / f"{name}.json").read_text())
        result.pop("generated_texts", None)
        (work / f"{name}.json").write_text(json.dumps(result))
        gzip_to(work / f"{name}.json", args.out / f"{name}.json.gz")
    gzip_to(work / "server.log", args.out / "server_steps.log.gz", keep=KEEP, skip=timed_from)
    (args.out / "record.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    sys.exit(main())
