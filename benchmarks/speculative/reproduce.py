"""`python -m benchmarks.speculative`: a published vLLM speculative-decoding measurement
reproduced, and async scheduling's modelled effect on TPOT.

1. SpecDecode-Bench (published.json names the paper, page and data): Llama-3.1-8B on one H100,
   vLLM 0.10.1, EAGLE with K = 3, token throughput with and without speculation at batch
   sizes 1-128. servesim replays each batch size as that many clients in a closed loop
   (GSM8K-like lengths: prompts ~120 tokens, outputs ~200, as the study's GSM8K requests),
   the acceptance process taken from the study's own measured acceptance lengths, the
   shipped h100-sxm fitted profile, async scheduling off (vLLM 0.10.1's default).
2. Async scheduling: the same model at 1, 8 and 32 clients, TPOT with vLLM's synchronous
   scheduler and with --async-scheduling (servesim: the host's schedule time overlaps the
   previous step's kernels, sim/cost/fitted.py ``_overlap``). No published single-GPU CUDA
   A/B of vLLM's async scheduling on the same model and GPU was found; the figure printed
   is the model's, under that assumption.
"""

from __future__ import annotations

import json
from pathlib import Path

from sim.config.load import load_scenario
from sim.pipeline import prepare
from sim.runner import simulate

HERE = Path(__file__).parent
PUBLISHED = json.loads((HERE / "published.json").read_text())
LENGTHS = ("{dist: lognormal, prompt_p50: 120, prompt_p90: 160, output_p50: 200, "
           "output_p90: 330, prompt_max: 400, output_max: 512}")


def run(batch: int, spec: bool, method: str = "eagle", async_scheduling: bool = False,
        requests: int | None = None):
    """One closed-loop run: (generated tokens / s, the result)."""
    n = requests or max(4 * batch, 64)
    ov = ["model=llama-3.1-8b", "gpu=h100-sxm",
          f"engine.async_scheduling={str(async_scheduling).lower()}",
          f"workload={{arrival: {{process: closed, concurrency: {batch}}}, lengths: {LENGTHS}, "
          f"num_requests: {n}}}"]
    if spec:
        hist = PUBLISHED["acceptance"]["histogram"]
        ov.append(f"engine.speculative_config={{method: {method}, num_speculative_tokens: 3, "
                  f"acceptance_histogram: {hist}}}")
    r, specs, _ = prepare(load_scenario(None, tuple(ov)))
    res = simulate(r, specs)
    span = float(res.recorder.finish_s.max() - specs.arrival_s.min())
    return float(res.generated.sum()) / span, res


def speedup(batch: int) -> tuple[float, dict]:
    base, _ = run(batch, False)
    sd, res = run(batch, True)
    return sd / base, res.speculative


def tpot_ms(res) -> float:
    done = res.recorder.finish_s - res.recorder.first_token_s
    out = res.generated - 1
    ok = out > 0
    return float((done[ok] / out[ok]).mean() * 1e3)


def main() -> int:
    print("1. SpecDecode-Bench, Llama-3.1-8B, 1x H100, EAGLE K = 3 (published.json)")
    print(f"{'batch':>6} {'speedup':>8} {'mean acc. len':>14} {'draft % of step':>16}")
    got = {}
    for b in (1, 8, 32, 64, 128):
        s, sp = speedup(b)
        got[b] = s
        print(f"{b:>6} {s:>8.3f} {sp['mean_acceptance_length']:>14.3f} "
              f"{100 * sp['draft_share']:>15.1f}%")
    for p in PUBLISHED["points"]:
        if "speedup" in p:
            ours = got[p["batch_size"]]
            print(f"  {p['name']}: published {p['speedup']:.2f}x, servesim {ours:.3f}x "
                  f"({100 * (ours / p['speedup'] - 1):+.1f} %)")
        else:
            ours = got[p["to_batch"]] / got[p["from_batch"]] - 1
            print(f"  {p['name']}: published {100 * p['relative_change']:+.1f} %, servesim "
                  f"{100 * ours:+.1f} % (GSM8K acceptance; the quote is ShareGPT's)")
    print("\n2. async scheduling, Llama-3.1-8B, 1x H100, no speculation: TPOT mean (ms)")
    for b in (1, 8, 32):
        sync = tpot_ms(run(b, False)[1])
        asy = tpot_ms(run(b, False, async_scheduling=True)[1])
        print(f"  {b:>3} clients: sync {sync:.2f}, async {asy:.2f} "
              f"({100 * (asy / sync - 1):+.1f} %)")
    return 0

