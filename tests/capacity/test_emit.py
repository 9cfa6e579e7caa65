"""The chosen config as `vllm serve` flags (vLLM 0.32 names), with what has no flag noted."""

from __future__ import annotations

from sim.config.load import load_scenario
from sim.pipeline import resolve_loaded
from sim.plan.emit import vllm_flags, vllm_serve


def flags(*sets):
    return vllm_flags(resolve_loaded(load_scenario(None, sets)))


def test_default_spells_out_every_engine_value():
    r = resolve_loaded(load_scenario(None))
    assert vllm_serve(r) == (
        "vllm serve meta-llama/Meta-Llama-3-8B --tensor-parallel-size 1 --max-model-len 8192 "
        "--max-num-seqs 1024 --max-num-batched-tokens 8192 --block-size 16 "
        "--gpu-memory-utilization 0.9 --enable-chunked-prefill --no-enable-prefix-caching")


def test_knobs_map_to_their_flags():
    f, notes = flags("engine.long_prefill_token_threshold=256",
                     "engine.enable_chunked_prefill=false", "engine.enable_prefix_caching=true",
                     "scheduler.name=vllm-priority",
                     "model=llama-3-70b", "tensor_parallel_size=2", "gpu=h200-sxm",
                     "engine.max_num_seqs=64")
    assert "--tensor-parallel-size 2" in f and "--max-num-seqs 64" in f
    assert "--no-enable-chunked-prefill" in f and "--enable-prefix-caching" in f
    assert "--long-prefill-token-threshold 256" in f and "--scheduling-policy priority" in f
    assert notes == []


def test_what_vllm_cannot_express_is_noted():
    _, notes = flags("scheduler.name=sarathi", "engine.preemption_mode=swap",
                     "admission.name=reserve")
    assert len(notes) == 3 and notes[0].startswith("scheduler 'sarathi' has no vLLM flag")


def test_admission_and_length_knobs_map_to_flags_or_notes():
    f, notes = flags("engine.long_prefill_token_threshold=64",
                     "engine.long_prefill_token_threshold_adaptive=true",
                     "engine.scheduler_reserve_full_isl=false", "engine.strict_max_model_len=true")
    assert "--long-prefill-token-threshold-adaptive" in f
    assert "--no-scheduler-reserve-full-isl" in f
    assert notes == ["strict_max_model_len has no vLLM flag: its server shortens max_tokens"]
