"""The chosen config as `vllm serve` flags (vLLM 0.32 names), with what has no flag noted."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.load import load_scenario
from sim.pipeline import resolve_loaded
from sim.plan.emit import deployment, vllm_flags, vllm_serve

KV_NOTE = "the KV cache was simulated at "


def flags(*sets):
    """(flags, notes) less the KV pool's size note every unpinned line carries (its own
    test below)."""
    f, notes = vllm_flags(resolve_loaded(load_scenario(None, sets)))
    return f, [n for n in notes if not n.startswith(KV_NOTE)]


def test_what_the_line_leaves_to_vllm_is_noted():
    r = resolve_loaded(load_scenario(None))
    blocks = r.memory.num_gpu_blocks
    notes = vllm_flags(r)[1]
    assert notes == [f"{KV_NOTE}{blocks:,} blocks of 16 tokens; vLLM sizes its own from "
                     f"profiled memory: add --num-gpu-blocks-override {blocks} to pin it"]
    pinned = vllm_flags(resolve_loaded(load_scenario(None, (
        "engine.num_gpu_blocks_override=4000",))))
    assert "--num-gpu-blocks-override 4000" in pinned[0] and pinned[1] == []
    _, notes = flags("model=tiny-2l", "engine.enable_chunked_prefill=false",
                     "engine.max_model_len=2048")
    assert any("catalog name 'tiny-2l'" in n for n in notes)
    assert any("does not officially support disabling it" in n for n in notes)


FLAGS = Path(__file__).with_name("vllm_0_32_engine_flags.txt")
CHOICES = {"--dtype": {"auto", "float32"}, "--quantization": {"fp8"},
           "--kv-cache-dtype": {"auto", "fp8", "bfloat16"},
           "--scheduling-policy": {"fcfs", "priority"}}


def vllm_names() -> set[str]:
    """Every name vLLM 0.32's engine parser accepts, the --no- forms of its booleans too."""
    names = set()
    for line in FLAGS.read_text().splitlines():
        if line.startswith("--"):
            name, *kind = line.split()
            names |= {name, "--no-" + name[2:]} if kind == ["bool"] else {name}
    return names


def test_default_spells_out_every_engine_value():
    r = resolve_loaded(load_scenario(None))
    assert vllm_serve(r) == (
        "vllm serve meta-llama/Meta-Llama-3-8B --dtype auto --kv-cache-dtype auto "
        "--tensor-parallel-size 1 --max-model-len 8192 "
        "--max-num-seqs 1024 --max-num-batched-tokens 8192 --block-size 16 "
        "--gpu-memory-utilization 0.9 --enable-chunked-prefill --enable-prefix-caching "
        "--long-prefill-token-threshold 0 --no-long-prefill-token-threshold-adaptive "
        "--scheduler-reserve-full-isl --async-scheduling "
        "--scheduling-policy fcfs")


@pytest.mark.parametrize("sets, want, absent", [
    (("model.dtype_bytes=1", "model.kv_dtype_bytes=1"),
     ["--quantization fp8", "--kv-cache-dtype fp8", "--dtype auto"], ["--kv-cache-dtype auto"]),
    (("model.dtype_bytes=1",), ["--quantization fp8", "--kv-cache-dtype auto"], []),
    (("model.kv_dtype_bytes=1",), ["--kv-cache-dtype fp8"], ["--quantization fp8"]),
    (("model.dtype_bytes=4",), ["--dtype float32", "--kv-cache-dtype auto"], []),
])
def test_weight_and_kv_dtypes_are_flagged(sets, want, absent):
    f, notes = flags(*sets)
    assert set(want) <= set(f) and not set(absent) & set(f) and notes == []


def test_async_scheduling_is_flagged_both_ways():
    # vLLM 0.32's default on CUDA: on, and so is servesim's for a catalog GPU
    assert "--async-scheduling" in flags()[0]
    off = flags("engine.async_scheduling=false")[0]
    assert "--no-async-scheduling" in off and "--async-scheduling" not in off
    # vLLM keeps n-gram speculation synchronous (release notes 0.14.0)
    ngram = flags("engine.speculative_config={method: ngram, num_speculative_tokens: 3}")[0]
    assert "--no-async-scheduling" in ngram


def test_cuda_graph_choices_are_flagged():
    f = flags("engine.enforce_eager=true", "engine.max_cudagraph_capture_size=256")[0]
    assert "--enforce-eager" in f and "--max-cudagraph-capture-size 256" in f
    assert not any("eager" in x for x in flags()[0])
    assert "--max-cudagraph-capture-size 96" in flags("engine.max_cudagraph_capture_size=96")[0]


@pytest.mark.parametrize("sets, simulated", [
    ((), 512),
    (("engine.max_num_seqs=64",), 128),
    # vLLM 0.32's default: 1024 on data-center Blackwell (vllm/config/vllm.py:2357-2359)
    (("gpu=b200",), 1024),
    (("gpu=b300", "engine.max_num_seqs=384"), 768),
    # vLLM 0.32's default: 2 x max_num_seqs x (1 + K) with K drafts (vllm/config/vllm.py:
    # 2360-2364, uniform_decode_query_len): min(64 x 4 x 2, 512)
    (("model=llama-3.1-8b", "engine.max_model_len=8192", "engine.max_num_seqs=64",
      "engine.speculative_config={method: eagle3, num_speculative_tokens: 3, model: a/b, "
      "acceptance_rates: [0.8, 0.6, 0.4]}"), 512),
    # never above max_num_batched_tokens (vllm/config/vllm.py:2439-2440)
    (("engine.max_num_batched_tokens=300",), 300),
])
def test_an_unset_cuda_graph_ceiling_is_left_to_vllm(sets, simulated):
    """Steps above Resolved.cuda_graph_max_tokens are priced eager (sim/cost/fitted.py). The
    ceiling is vLLM 0.32's default, which vLLM computes itself when the flag is absent; an
    explicit --max-cudagraph-capture-size would keep it from adding its uniform-decode
    sizes (vllm/config/vllm.py:2350-2353), so it is not written."""
    r = resolve_loaded(load_scenario(None, sets))
    assert r.cuda_graph_max_tokens == simulated
    assert not any(f.startswith("--max-cudagraph-capture-size") for f in vllm_flags(r)[0])


def test_an_explicit_ceiling_vllm_truncates_or_that_drops_verify_sizes_is_noted():
    f, notes = flags("engine.max_num_seqs=37", "engine.max_cudagraph_capture_size=74")
    assert "--max-cudagraph-capture-size 74" in f
    assert any("truncates --max-cudagraph-capture-size 74 to 72" in n for n in notes)
    assert not any("truncates" in n for n in flags("engine.max_cudagraph_capture_size=96")[1])
    spec = ("model=llama-3.1-8b", "engine.max_model_len=8192",
            "engine.max_cudagraph_capture_size=256",
            "engine.speculative_config={method: eagle3, num_speculative_tokens: 2, "
            "model: a/b, acceptance_rates: [0.8, 0.6]}")
    assert any("(1 + K)-token multiples" in n for n in flags(*spec)[1])


def test_a_checkpoint_naming_fp8_kv_is_asked_for_16_bit_kv_by_name():
    """vLLM 0.32's --kv-cache-dtype auto serves nvidia/MiniMax-M2.5-NVFP4's KV in fp8 (the
    checkpoint names it): fp8 is emitted as is, and a 16-bit KV cache needs bfloat16."""
    base = ("model=minimax-m2.5-nvfp4", "gpu=b200", "tensor_parallel_size=4")
    assert "--kv-cache-dtype fp8" in flags(*base)[0]
    f = flags(*base, "model.kv_dtype_bytes=2")[0]
    assert "--kv-cache-dtype bfloat16" in f and "--kv-cache-dtype auto" not in f


def test_a_kv_dtype_vllm_cannot_store_is_noted():
    f, notes = flags("model.dtype_bytes=4", "model.kv_dtype_bytes=2")
    assert not any(x.startswith("--kv-cache-dtype") for x in f)
    assert notes == ["a 2-byte KV cache with 4-byte activations has no vLLM flag: "
                     "--kv-cache-dtype auto stores KV in the model's dtype"]


@pytest.mark.parametrize("sets", [
    (), ("model.dtype_bytes=1", "model.kv_dtype_bytes=1", "engine.enable_prefix_caching=true",
         "engine.enable_chunked_prefill=false", "engine.long_prefill_token_threshold=64",
         "engine.long_prefill_token_threshold_adaptive=true", "scheduler.name=vllm-priority",
         "engine.scheduler_reserve_full_isl=false", "engine.num_gpu_blocks_override=4000",
         "model.dtype_bytes=4", "tensor_parallel_size=2")])
def test_every_flag_is_one_vllm_0_32_accepts(sets):
    names = vllm_names()
    for flag in flags(*sets)[0]:
        name, *value = flag.split()
        assert name in names, flag
        if name in CHOICES:
            assert value[0] in CHOICES[name], flag


def test_knobs_map_to_their_flags():
    f, notes = flags("engine.long_prefill_token_threshold=256",
                     "engine.enable_chunked_prefill=false", "engine.enable_prefix_caching=true",
                     "scheduler.name=vllm-priority",
                     "model=llama-3-70b", "tensor_parallel_size=2", "gpu=h200-sxm",
                     "engine.max_num_seqs=64")
    assert "--tensor-parallel-size 2" in f and "--max-num-seqs 64" in f
    assert "--no-enable-chunked-prefill" in f and "--enable-prefix-caching" in f
    assert "--long-prefill-token-threshold 256" in f and "--scheduling-policy priority" in f
    assert [n[:20] for n in notes] == ["chunked prefill off:"]  # vLLM warns


def test_what_vllm_cannot_express_is_noted():
    _, notes = flags("scheduler.name=sarathi", "engine.preemption_mode=swap",
                     "admission.name=reserve")
    assert len(notes) == 4 and notes[0].startswith("scheduler 'sarathi' has no vLLM flag")
    assert notes[1].startswith("kv.watermark 0.01 is vLLM v0's")  # sarathi: v0 defaults


@pytest.mark.parametrize("chunk,budget", [(512, 512), (20000, 8192)])
def test_sarathis_step_budget_is_deployed(chunk, budget):
    # its budget is min(chunk_size, max_num_batched_tokens), no long-prefill cap: vLLM's v1
    # scheduler runs it under these flags (the line said 8192 while 512 was simulated)
    f, _ = flags(f"scheduler={{name: sarathi, chunk_size: {chunk}}}",
                 "engine.enable_prefix_caching=false")
    assert f"--max-num-batched-tokens {budget}" in f
    assert "--long-prefill-token-threshold 0" in f and "--enable-chunked-prefill" in f


def test_admission_and_length_knobs_map_to_flags_or_notes():
    f, notes = flags("engine.long_prefill_token_threshold=64",
                     "engine.long_prefill_token_threshold_adaptive=true",
                     "engine.scheduler_reserve_full_isl=false", "engine.strict_max_model_len=true")
    assert "--long-prefill-token-threshold-adaptive" in f
    assert "--no-scheduler-reserve-full-isl" in f
    assert notes == ["strict_max_model_len has no vLLM flag: its server shortens max_tokens"]


def test_a_fleet_gets_one_command_per_pool():
    r = resolve_loaded(load_scenario("scenarios/fleet-pools.yaml", (
        "cluster.pools.1.engine={max_num_seqs: 64}", "cluster.pools.1.replicas=3")))
    pools, notes = deployment(r)
    assert [(p["pool"], p["replicas"], p["gpus"]) for p in pools] == [
        ("interactive", 1, 1), ("batch", 3, 3)]
    assert "--max-num-seqs 1024" in pools[0]["vllm_serve"]
    assert "--max-num-seqs 64" in pools[1]["vllm_serve"]
    assert notes[1].startswith("pool 'batch': 3 replica(s) behind router 'least_outstanding'")


def test_expert_and_data_parallel_and_quantization_methods_are_flagged():
    f, notes = flags("model=deepseek-v3", "gpu=h200-sxm", "tensor_parallel_size=8",
                     "data_parallel_size=2", "enable_expert_parallel=true",
                     "engine.max_model_len=8192")
    assert {"--data-parallel-size 2", "--enable-expert-parallel", "--quantization fp8",
            "--tensor-parallel-size 8"} <= set(f) and notes == []
    assert {flag.split()[0] for flag in f} <= vllm_names()
    oss = flags("model=gpt-oss-120b", "gpu=h200-sxm", "engine.max_model_len=8192")[0]
    assert "--quantization mxfp4" in oss and "--enable-expert-parallel" not in oss
    dense = flags()[0]
    assert not any(x.startswith(("--data-parallel", "--enable-expert")) for x in dense)


@pytest.mark.parametrize("sets,bits", [
    (("model.quantization=awq",), "16-bit weights"),
    (("model=gpt-oss-20b", "model.moe_dtype_bits=16"), "16-bit weights, 16-bit experts"),
    (("model=gpt-oss-20b", "model.dtype_bytes=1"), "8-bit weights, 4-bit experts"),
])
def test_a_quantization_method_of_other_precisions_is_not_written(sets, bits):
    """--quantization names a checkpoint's precisions: with others simulated it would deploy
    another memory plan and speed (awq's 4-bit weights for 16-bit ones simulated)."""
    f, notes = flags(*sets, "cost=roofline", "engine.max_model_len=8192")
    assert not any(x.startswith("--quantization") for x in f)
    assert any(n.startswith("model.quantization ") and f"the {bits} simulated: no "
               "--quantization written" in n for n in notes), notes


def test_the_serve_line_is_shell_quoted():
    """A model named with a space (an inline spec's name) stays one argument when the line is
    pasted into a shell."""
    import shlex

    sets = ("model={name: my model, num_layers: 2, hidden_size: 64, num_attention_heads: 4, "
            "num_kv_heads: 4, head_dim: 16, intermediate_size: 128, vocab_size: 1000, "
            "max_position_embeddings: 4096}", "engine.num_gpu_blocks_override=1024")
    argv = shlex.split(vllm_serve(resolve_loaded(load_scenario(None, sets))))
    assert argv[:4] == ["vllm", "serve", "my model", "--dtype"]


@pytest.mark.parametrize("sets, block", [
    ((), 16),
    # MLA on data-center Blackwell: vLLM 0.32 picks FlashInfer MLA first, which takes 32 or
    # 64 (vllm/platforms/cuda.py _get_backend_priorities; interface.py
    # _preferred_block_size_for_backends): a --block-size 16 would push it to Triton MLA
    (("model=deepseek-v3", "gpu=b200", "tensor_parallel_size=8"), 32),
    (("model=deepseek-v3", "gpu=h200-sxm", "tensor_parallel_size=8"), 16),  # FlashAttention MLA
    # an fp8 KV cache: FlashAttention MLA stores none, FlashMLA (next) takes 64 only
    (("model=deepseek-v3", "gpu=h200-sxm", "tensor_parallel_size=8",
      "engine.max_model_len=16384", "model.kv_dtype_bytes=1"), 64),
    (("gpu=b200",), 16),  # a dense model: FlashInfer takes 16
    (("model=deepseek-v3", "gpu=b200", "tensor_parallel_size=8", "engine.block_size=64"), 64),
])
def test_an_unset_block_size_is_vllms_choice_for_the_backend(sets, block):
    r = resolve_loaded(load_scenario(None, sets))
    assert r.block_size == block and r.derived()["block_size"] == block
    assert f"--block-size {block}" in vllm_flags(r)[0]


def test_a_block_size_that_rules_out_flashinfer_mla_is_noted():
    mla = ("model=deepseek-v3", "gpu=b200", "tensor_parallel_size=8")
    notes = vllm_flags(resolve_loaded(load_scenario(None, (*mla, "engine.block_size=16"))))[1]
    assert any("Triton MLA" in n for n in notes)
    assert not any("Triton MLA" in n for n in vllm_flags(resolve_loaded(load_scenario(
        None, mla)))[1])  # unset: 32, FlashInfer MLA


def test_a_block_size_that_rules_out_flashmla_on_hopper_is_noted():
    fp8 = ("model=deepseek-v3", "gpu=h200-sxm", "tensor_parallel_size=8",
           "engine.max_model_len=16384", "model.kv_dtype_bytes=1")
    assert any("Triton MLA on Hopper" in n for n in flags(*fp8, "engine.block_size=16")[1])
    assert not any("Triton MLA" in n for n in flags(*fp8)[1])


def test_a_capture_size_of_0_turns_cuda_graphs_off_by_mode():
    """engine.max_cudagraph_capture_size=0 simulates every step without a graph. vLLM 0.32's
    --max-cudagraph-capture-size 0 does not deploy that: with CUDA graphs on it fails its
    start-up assert 'Maximum cudagraph size should be greater than or equal to 1'
    (vllm/config/vllm.py:2448, _set_cudagraph_sizes); cudagraph_mode NONE skips the sizes
    (vllm/config/vllm.py:2341-2345; -cc/--compilation-config, vllm/engine/arg_utils.py:1853)."""
    f = flags("engine.max_cudagraph_capture_size=0")[0]
    assert "--max-cudagraph-capture-size 0" not in f
    assert "--compilation-config '{\"cudagraph_mode\":\"NONE\"}'" in f
    assert "--enforce-eager" not in f
    # under --enforce-eager vLLM sets the size to 0 itself (vllm/config/vllm.py:1928-1933)
    eager = flags("engine.max_cudagraph_capture_size=0", "engine.enforce_eager=true")[0]
    assert "--enforce-eager" in eager and not any("cudagraph_mode" in x for x in eager)


def test_parallel_tokenization_is_noted():
    """engine.ingress_serial false simulates prompts tokenized side by side; vLLM 0.32's API
    server tokenizes on --renderer-num-workers threads, 1 by default (vllm/config/model.py:408,
    the flag vllm/engine/arg_utils.py:1047): no flag value says 'unbounded', so it is noted."""
    f, notes = flags("engine.ingress_serial=false")
    assert f == flags()[0]
    assert [n for n in notes if "--renderer-num-workers" in n] == [
        "engine.ingress_serial false tokenizes every prompt beside the others; vLLM's API "
        "server tokenizes one at a time (--renderer-num-workers 1): raise "
        "--renderer-num-workers or --api-server-count to deploy it"]
    assert flags("engine.ingress_serial=false", "engine.ingress_per_token_us=0")[1] == []
    assert flags()[1] == []
