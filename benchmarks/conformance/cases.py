"""Conformance cases: servesim scenarios that vLLM's real scheduler replays too.

A case is a scenario YAML in ``cases/`` (with its trace file next to it, when it
has one). It must use the ``vllm`` or ``vllm-priority`` scheduler, the ``paged``
KV policy, a ``linear`` step-time model whose coefficients are whole nanoseconds,
and ``engine.num_gpu_blocks_override`` for the KV pool; everything else is an
ordinary scenario. :func:`vllm_input` turns a case into the JSON that
``record.py`` (vLLM's venv) replays: vLLM's knob names, integer nanoseconds, and
the requests as the trace gives them (the recorder applies vLLM's server length
rules itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.config.load import LoadedScenario, load_scenario
from sim.config.resolve import Resolved
from sim.engine.clock import to_ns
from sim.engine.requests import RequestSpecs
from sim.pipeline import prepare

HERE = Path(__file__).parent
CASES_DIR = HERE / "cases"
REFS_DIR = HERE / "refs"
POLICY = {"vllm": "fcfs", "vllm-priority": "priority"}  # servesim scheduler -> vLLM policy
COST_TERMS = {"base": "base_ms", "prefill_token": "prefill_token_ms",
              "decode_seq": "decode_seq_ms", "context_token": "context_token_ms"}


class CaseError(ValueError):
    """A case scenario that the recorder cannot replay as written."""


@dataclass(frozen=True)
class Case:
    name: str
    loaded: LoadedScenario
    resolved: Resolved
    specs: RequestSpecs  # as the trace gives them (before the length rules)


def case_names() -> list[str]:
    return sorted(p.stem for p in CASES_DIR.glob("*.yaml"))


def load_case(name: str) -> Case:
    loaded = load_scenario(CASES_DIR / f"{name}.yaml")
    resolved, specs, _ = prepare(loaded)
    case = Case(name, loaded, resolved, specs)
    _check(case)
    return case


def _check(case: Case) -> None:
    sc = case.resolved.scenario
    if sc.scheduler.name not in POLICY:
        raise CaseError(f"{case.name}: scheduler {sc.scheduler.name!r}: vLLM has "
                        f"{' and '.join(POLICY)} only")
    if sc.kv.name != "paged" or sc.engine.preemption_mode != "recompute":
        raise CaseError(f"{case.name}: vLLM v1 pages KV and recomputes preempted requests")
    if sc.engine.num_gpu_blocks_override is None:
        raise CaseError(f"{case.name}: set engine.num_gpu_blocks_override (the KV pool)")
    if sc.engine.strict_max_model_len:
        raise CaseError(f"{case.name}: vLLM's server has no strict max_model_len rule")
    if sc.cost is None or sc.cost.name != "linear":
        raise CaseError(f"{case.name}: the step-time function must be the linear cost model")
    step_time_ns(case)


def step_time_ns(case: Case) -> dict[str, int]:
    """The linear model's coefficients in whole nanoseconds (the recorder's step time)."""
    params = case.resolved.scenario.cost.params
    out = {}
    for term, field in COST_TERMS.items():
        ms = getattr(params, field)
        out[term] = round(ms * 1e6)
        if abs(out[term] - ms * 1e6) > 1e-6:
            raise CaseError(f"{case.name}: cost.{field} = {ms} ms is not a whole number of ns")
    return out


def _chains(specs: RequestSpecs) -> list | None:
    if all(h is None for h in specs.prefix_hashes):
        return None
    return [None if h is None else [int(x) for x in h] for h in specs.prefix_hashes]


def vllm_input(case: Case) -> dict:
    """The case as ``record.py`` reads it (JSON-ready)."""
    r, specs = case.resolved, case.specs
    lim = r.limits
    spec = r.scenario.engine.speculative_config
    return {
        "name": case.name,
        "engine": {
            "block_size": r.block_size, "num_gpu_blocks": r.memory.num_gpu_blocks,
            "max_num_seqs": lim.max_num_seqs,
            "max_num_batched_tokens": lim.max_num_batched_tokens,
            "max_model_len": lim.max_model_len,
            "enable_chunked_prefill": lim.enable_chunked_prefill,
            "long_prefill_token_threshold": lim.long_prefill_token_threshold,
            "long_prefill_token_threshold_adaptive": lim.long_prefill_token_threshold_adaptive,
            "scheduler_reserve_full_isl": lim.scheduler_reserve_full_isl,
            "enable_prefix_caching": r.scenario.prefix_caching,
            "policy": POLICY[r.scenario.scheduler.name],
            # only when on: the cases recorded before it keep their inputs
            **({"async_scheduling": True} if r.scenario.engine.async_scheduling else {}),
            **({"speculative_config": spec.vllm_json()} if spec is not None else {}),
        },
        **({"acceptance": {"seed": spec.acceptance_seed if spec.acceptance_seed is not None
                           else r.scenario.seed, "rates": list(spec.conditional_rates())}}
           if spec is not None else {}),
        "step_time_ns": step_time_ns(case),
        "requests": {
            "arrival_ns": to_ns(specs.arrival_s).tolist(),
            "prompt_tokens": specs.prompt_tokens.tolist(),
            "max_tokens": specs.output_tokens.tolist(),
            "priority": np.asarray(specs.priority).tolist(),
            "hash_block_size": specs.hash_block_size,
            "prefix_hashes": _chains(specs),
        },
    }
