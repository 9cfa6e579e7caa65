"""servesim's vllm and vllm-priority schedulers against recorded vLLM 0.32.0 runs, step by step.

The references (benchmarks/conformance/refs/*.jsonl.gz) come from driving vLLM's real v1
``Scheduler`` over each case (``make conformance``); comparing needs no vLLM. A step is
identical when the start time (ns), the tokens per request, the preemptions, the finishes and
the KV blocks in use all agree. Every case replays through both simulation cores: the general
engine and the fast core (sim/fast), which runs every case (the ``vllm`` and ``vllm-priority``
schedulers, with or without prefix caching); ``core: auto`` picks the fast core.
"""

from __future__ import annotations

import gzip
import json

import pytest

from benchmarks.conformance.cases import REFS_DIR, case_names, load_case
from benchmarks.conformance.compare import compare_case, read_ref
from traces.errors import InputError

VLLM_VERSION = "0.32.0"


def _fast_runs(name: str) -> bool:
    """The fast core runs the case: the vllm or vllm-priority scheduler (prefix caching or
    not), synchronous or async, without speculative decoding (the general engine's)."""
    sc = load_case(name).resolved.scenario
    return sc.scheduler.name in ("vllm", "vllm-priority") and \
        sc.engine.speculative_config is None


FAST = [n for n in case_names() if _fast_runs(n)]
ASYNC = [n for n in case_names() if n.startswith("async_")]
SPEC = [n for n in case_names() if n.startswith("spec_")]
ASYNC_SPEC = [n for n in case_names() if n.startswith("async_spec_")]


def test_the_fast_core_runs_most_cases():
    assert len(FAST) == 30 and len(ASYNC) == 17 and len(SPEC) == 10 and len(ASYNC_SPEC) == 8
    assert sorted(FAST + SPEC + ASYNC_SPEC) == case_names()
    assert {"priority_poisson", "priority_ties"} <= set(FAST)
    assert {"prefix_shared", "prefix_mooncake", "prefix_recompute_tight"} <= set(FAST)


@pytest.mark.parametrize("core", ["auto", "general", "fast"])
@pytest.mark.parametrize("name", case_names())
def test_every_step_identical_to_vllm(name, core):
    if core == "fast" and name not in FAST:
        with pytest.raises(InputError, match="core: fast does not run this scenario: "):
            compare_case(load_case(name), core=core)
        return
    r = compare_case(load_case(name), core=core)
    expected = core if core != "auto" else ("fast" if name in FAST else "general")
    assert r.core == expected
    assert not r.problems
    assert r.identical == r.ref_steps == r.our_steps, r.divergence


def test_every_case_recorded_with_the_conformed_version():
    recorded = sorted(p.name.removesuffix(".jsonl.gz") for p in REFS_DIR.glob("*.jsonl.gz"))
    assert recorded == case_names()
    for name in recorded:
        header, run = read_ref(REFS_DIR / f"{name}.jsonl.gz")
        assert header["vllm_version"] == VLLM_VERSION
        assert header["num_steps"] == len(run.steps) > 0


def test_the_cases_cover_what_they_claim():
    refs = {n: read_ref(REFS_DIR / f"{n}.jsonl.gz") for n in case_names()}
    preempted = {n: sum(len(s.preempted) for s in run.steps) for n, (_, run) in refs.items()}
    engine = {n: h["input"]["engine"] for n, (h, _) in refs.items()}
    assert preempted["long_prefill_adaptive"] >= 100 and preempted["burst_tight_b32"] > 0
    assert {e["block_size"] for e in engine.values()} == {16, 32}
    assert not engine["chunked_prefill_off"]["enable_chunked_prefill"]
    assert engine["priority_ties"]["policy"] == "priority"
    assert sum(e["enable_prefix_caching"] for e in engine.values()) >= 4
    # async scheduling (vLLM's AsyncScheduler, two batches in flight) over Poisson and burst
    # arrivals, tight KV (preemptions), prefix caching and priorities
    assert all(engine[n].get("async_scheduling") for n in ASYNC)
    assert not any(e.get("async_scheduling") for n, e in engine.items() if n not in ASYNC)
    slots = ("async_finish_holds_seq", "async_priority_finish_cap")  # max_num_seqs 2 binds
    assert all(preempted[n] > 0 for n in ASYNC if n not in ("async_poisson_roomy", *slots))
    assert all(engine[n]["max_num_seqs"] == 2 for n in slots)
    assert engine["async_priority_finish_cap"]["long_prefill_token_threshold"] == 8
    # async + prefix caching: preempted requests find only what vLLM hashed before the two
    # steps it plans behind
    for n in ("async_prefix_recompute_lag", "async_priority_prefix_lag",
              "async_spec_priority_prefix_lag"):
        assert engine[n]["enable_prefix_caching"] and preempted[n] > 0
    # async scheduling with speculative decoding: eagle K = 1 and 3, GPU n-gram K = 5 (vLLM
    # refuses async with host n-gram), a draft model K = 3, tight KV, prefix caching,
    # priorities
    for n in ASYNC_SPEC:
        assert engine[n]["async_scheduling"] and "speculative_config" in engine[n]
    assert {engine[n]["speculative_config"]["method"] for n in ASYNC_SPEC} == {
        "eagle", "eagle3", "ngram_gpu", "draft_model"}
    assert engine["async_spec_eagle3_prefix"]["enable_prefix_caching"]
    assert engine["async_spec_priority_eagle3"]["policy"] == "priority"
    assert engine["async_prefix_shared"]["enable_prefix_caching"]
    assert engine["async_priority_poisson"]["policy"] == "priority"
    # speculative decoding: K = 1, 3, 5 with EAGLE-family lookahead and n-gram (none), high
    # and low acceptance, preemptions (all but the budget-bound K = 5 case), two with prefix
    # caching, one priority
    spec = {n: engine[n]["speculative_config"] for n in SPEC}
    assert not any("speculative_config" in e for n, e in engine.items()
                   if n not in SPEC + ASYNC_SPEC)
    assert {c["num_speculative_tokens"] for c in spec.values()} == {1, 3, 5}
    for k in (1, 3, 5):
        assert {c["method"] for c in spec.values() if c["num_speculative_tokens"] == k} \
            >= {"ngram"} and any(c["method"] != "ngram" and c["num_speculative_tokens"] == k
                                 for c in spec.values())
    rates = {n: refs[n][0]["input"]["acceptance"]["rates"] for n in SPEC}
    assert min(r[0] for r in rates.values()) <= 0.5 and max(r[0] for r in rates.values()) >= 0.9
    assert all(preempted[n] > 0 for n in SPEC if n != "spec_eagle3_k5_high")
    assert engine["spec_eagle3_prefix"]["enable_prefix_caching"]
    assert engine["spec_ngram_prefix"]["enable_prefix_caching"]
    assert engine["spec_priority_eagle3"]["policy"] == "priority"
    # drafts verified: the recorder logs each step's scheduled drafts; budget trimming shows
    # as fewer than K in the budget-64 K = 5 case
    drafts = [d for s in _raw_steps("spec_eagle3_k5_high") for d in s["drafts"].values()]
    assert max(drafts) == 5 and min(drafts) < 5
    # max_model_len 512: prompts of 512, 513 and 600 tokens rejected, 6 requests shortened
    header, _ = refs["max_model_len"]
    asked = header["input"]["requests"]["max_tokens"]
    assert header["rejected"] == [3, 4, 5]
    assert sum(0 <= s < a for s, a in zip(header["max_tokens_served"], asked)) == 6
    # a lone request's prompt is not capped (threshold 256): the first step takes all of it
    header, run = refs["long_prefill_tight"]
    assert run.steps[0].tokens == {0: header["input"]["requests"]["prompt_tokens"][0]} != {0: 256}


def _raw_steps(name: str) -> list[dict]:
    with gzip.open(REFS_DIR / f"{name}.jsonl.gz", "rt") as f:
        return [json.loads(x) for x in f][1:]


def test_a_divergence_is_found_and_described(tmp_path):
    # the comparer itself: one request's tokens changed at step 5 of a reference
    name = "block_boundaries_b16"
    with gzip.open(REFS_DIR / f"{name}.jsonl.gz", "rt") as f:
        lines = [json.loads(x) for x in f]
    step = lines[1 + 5]
    rid = next(iter(step["tokens"]))
    step["tokens"][rid] += 1
    path = tmp_path / f"{name}.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    r = compare_case(load_case(name), path)
    assert (r.prefix, r.identical, r.ok) == (5, r.ref_steps - 1, False)
    assert "first divergence at step 5" in r.divergence
    assert f"r{rid}: vLLM {step['tokens'][rid]} servesim {step['tokens'][rid] - 1}" in r.divergence


def test_readme_lists_every_case_with_its_steps():
    # refresh with: python -m benchmarks.conformance compare --markdown
    readme = (REFS_DIR.parents[2] / "README.md").read_text()
    table = readme.split("<!-- conformance-table:start -->")[1].split("<!-- conformance-")[0]
    rows = {r.split("|")[1].strip(" `"): r.split("|")[3:6] for r in table.strip().splitlines()[2:]}
    assert sorted(rows) == case_names()
    for name in case_names():
        _, run = read_ref(REFS_DIR / f"{name}.jsonl.gz")
        pre = sum(len(s.preempted) for s in run.steps)
        assert [int(x) for x in rows[name]] == [len(run.steps), len(run.steps), pre], name
