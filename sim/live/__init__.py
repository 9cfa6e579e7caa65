"""Live mode: execute every simulated step with real kernels over a real paged KV cache.

The scheduler and the engine are the simulator's own; only the step executor changes.
Where a cost model prices a ``StepPlan``, the live executor runs it: one forward step of a
random-weight transformer with the scenario model's shapes, its KV written into a paged
cache laid out exactly as the KV manager's block tables say, one token sampled per request
that emits one, and the step's measured time advances the simulated clock. The difference
between a fitted run and a live run of the same scenario is then the simulator's own error.

    scheduler --StepPlan--> LiveExecutor --> StepInputs (tokens, positions, slots, tables)
                                 |              |
                                 |              v
                                 |         RandomTransformer.forward (layers: norm, QKV,
                                 |           RoPE, kv_write, paged_prefill / paged_decode,
                                 |           O, gated MLP; final norm, LM head, sampling)
                                 |              |
                                 +<-- measured step time (CUDA events / CPU clock)

Modules: ``params`` (the ``cost: {name: live}`` knobs), ``cost`` (registry glue),
``executor`` (the step loop, decode runs, the commit hook), ``inputs`` (a plan to tensors),
``tokens`` (token ids), ``cache`` (the paged cache and its memory check), ``model``
(weights and forward), ``attention`` (torch paths on CPU, Triton kernels on CUDA),
``timer`` (step clocks), ``records`` (per-step measurements), ``fidelity`` and ``report``
(sim vs live). Only ``params`` and ``cost`` import without torch.
"""
