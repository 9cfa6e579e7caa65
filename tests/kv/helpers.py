"""Build a small simulator with any KV policy, prefix caching, swap and admission rule.

Like ``tests.sim.helpers.build`` (same ``Sim`` record, same golden cost model), plus:
``kv`` (a registered KV policy name), ``prefix_caching`` (the caching paged pool),
``prefix_hashes`` / ``hash_block_size`` (per-request hash chains), ``swap_blocks``
(host swap space in blocks; None = recompute only) with ``block_bytes`` and
``host_bandwidth`` (bytes/s), and
``admission`` / ``admission_params``.
"""

from __future__ import annotations

from types import SimpleNamespace

from sim.cost.linear import LinearCost
from sim.engine.engine import Engine
from sim.engine.requests import RequestSpecs
from sim.kv.base import KV_POLICIES
from sim.kv.prefix_cache import PrefixCachingKV
from sim.kv.swap import HostPool
from sim.metrics.recorder import Recorder
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS, SchedulerLimits
from tests.sim.helpers import GOLDEN_COST, Sim

BLOCK_BYTES = 1 << 20  # bytes per KV block in these tests (1 MiB)
HOST_BANDWIDTH = 1e9  # GPU <-> host link (bytes/s): a block moves in ~1.05 ms


def build(arrival, prompt, output, *, usable_blocks=1000, block_size=16, max_num_seqs=256,
          max_num_batched_tokens=2048, max_model_len=4096, chunked=True, threshold=0,
          cost=GOLDEN_COST, scheduler="vllm", params=None, kv="paged", kv_params=None,
          prefix_caching=False, prefix_hashes=None, hash_block_size=None, swap_blocks=None,
          block_bytes=BLOCK_BYTES, host_bandwidth=HOST_BANDWIDTH, admission="optimistic",
          admission_params=None, priority=None, lane=None, stop_s=1e9):
    specs = RequestSpecs.from_arrays(arrival, prompt, output, priority=priority, lane=lane,
                                     prefix_hashes=prefix_hashes,
                                     hash_block_size=hash_block_size)
    limits = SchedulerLimits(max_num_seqs, max_num_batched_tokens, max_model_len, chunked,
                             threshold)
    cls = PrefixCachingKV if prefix_caching else KV_POLICIES.get(kv)
    kvm = cls(num_blocks=usable_blocks, block_size=block_size, num_requests=len(specs),
              max_model_len=max_model_len, prompt_tokens=specs.prompt_tokens,
              output_tokens=specs.output_tokens,
              params=kv_params or KV_POLICIES.get(kv).Params(), specs=specs)
    if swap_blocks is not None:
        kvm.host = HostPool(swap_blocks, block_bytes)
    rule_cls = ADMISSION_RULES.get(admission)
    rule = rule_cls(specs, limits, kvm, admission_params or rule_cls.Params())
    sched = SCHEDULERS.get(scheduler)(specs, limits, kvm, params, admission=rule)
    sim = Sim(specs, sched, kvm, Recorder(len(specs)))
    sim.plans = []
    coster = LinearCost(None, SimpleNamespace(host_bandwidth=host_bandwidth), 1, cost)

    def price(plan):
        return coster.step_times(plan)

    def on_plan(plan, starts, durations, outcome):
        sim.plans.append(plan)
        for j in range(plan.num_steps):
            sim.steps.append((float(starts[j]), dict(zip(plan.req_ids.tolist(),
                                                         plan.num_tokens.tolist())),
                              plan.preempted.tolist() if j == 0 else [],
                              outcome.finished.tolist() if j == plan.num_steps - 1 else []))

    sim.engine = Engine(specs, sched, price, sim.recorder, stop_s=stop_s,
                        num_arrivals=len(specs), on_plan=on_plan)
    return sim


def run(*args, **kw) -> Sim:
    sim = build(*args, **kw)
    sim.status = sim.engine.run()
    sim.kv.check_integrity()
    return sim
