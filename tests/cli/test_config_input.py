"""--set on catalog models and GPUs, "did you mean", vLLM's refusals and defaults, range
messages with units and reasons, bounded YAML, echo caps."""

from __future__ import annotations

import pytest

from sim.catalog import get_gpu, get_model
from sim.config.load import apply_override, load_scenario
from sim.config.resolve import ConfigError, resolve
from sim.report.outpath import OutPathError, check_out
from tests.cli.test_cli_errors import GOOD, write
from traces.errors import InputError, clip, clip_path, clip_repr


def loaded(tmp_path, *sets, text=GOOD):
    return load_scenario(write(tmp_path, text), tuple(sets))


def error_of(tmp_path, *sets, text=GOOD) -> str:
    with pytest.raises(InputError) as e:
        resolve(loaded(tmp_path, *sets, text=text).scenario)
    return str(e.value)


def test_set_reaches_catalog_model_and_gpu_fields(tmp_path):
    sc = loaded(tmp_path, "model.dtype_bytes=1", "gpu.step_overhead_s=0.01").scenario
    want = get_model("llama-3-8b").model_copy(update={"dtype_bytes": 1})
    assert sc.model_spec == want
    assert sc.gpu_spec == get_gpu("h100-sxm").model_copy(update={"step_overhead_s": 0.01})
    # the same run through resolve: fp8 linear weights leave more room for the KV cache
    fp8, bf16 = resolve(sc).memory, resolve(loaded(tmp_path).scenario).memory
    assert fp8.weight_bytes == want.weight_bytes_per_gpu(1) < bf16.weight_bytes
    assert fp8.num_gpu_blocks > bf16.num_gpu_blocks


def test_set_into_lists_and_sections(tmp_path):
    data = {"workload": {"mix": [{"lane": "a"}, {"lane": "b"}]}, "engine": {}}
    apply_override(data, "workload.mix.1.lane=c")
    apply_override(data, "engine.max_num_seqs=8")
    assert data == {"workload": {"mix": [{"lane": "a"}, {"lane": "c"}]},
                    "engine": {"max_num_seqs": 8}}
    with pytest.raises(InputError, match="use an index 0..1"):
        apply_override(data, "workload.mix.5.lane=x")


@pytest.mark.parametrize("assignment,hint", [
    ("engine.max_num_seq=1", "did you mean 'max_num_seqs'?"),
    ("model.hiden_size=1", "did you mean 'hidden_size'?"),
    ("gpu.mem_bandwith=1", "did you mean 'mem_bandwidth'?"),
    ("slo.ttft=1", "did you mean 'ttft_ms'?"),
    ("workload.arrival.rat=1", "did you mean 'rate'?"),
    ("scheduler.name=vllm-prio", "did you mean 'vllm-priority'?"),
    ("model=lama-3-8b", "unknown model"),
])
def test_unknown_keys_say_did_you_mean(tmp_path, assignment, hint):
    msg = error_of(tmp_path, assignment)
    assert msg.startswith(f"--set '{assignment}'") and hint in msg, msg


def test_the_file_is_named_when_the_file_is_wrong(tmp_path):
    msg = error_of(tmp_path, text=GOOD + "engine: {max_num_seq: 3}\n")
    assert msg.startswith("s.yaml: engine.max_num_seq: unknown key; did you mean"), msg


def test_ranges_name_unit_and_reason(tmp_path):
    msg = error_of(tmp_path, "engine.swap_space=1e300")
    assert msg == ("--set 'engine.swap_space=1e300': engine.swap_space: must be <= 4,096 GiB "
                   "(got 1e300): more host memory per GPU than any server has")
    msg = error_of(tmp_path, "gpu.hbm_bytes=4611686018427387904")
    assert "gpu.hbm_bytes: must be <= 4,398,046,511,104 bytes (got 4.61e+18)" in msg


def test_vllm_refusals(tmp_path):
    # vllm/config/scheduler.py:328
    msg = error_of(tmp_path, "engine.max_num_batched_tokens=64", "engine.max_num_seqs=128")
    assert "max_num_batched_tokens (64) must be >= max_num_seqs (128)" in msg
    # CUDA attention backends need a multiple of 16 (vllm/platforms/cuda.py:469)
    assert "multiple of 16" in error_of(tmp_path, "engine.block_size=7")
    assert "multiple of 16" in error_of(tmp_path, "engine.block_size=8")
    # vllm/model_executor/layers/attention/attention.py:329
    assert "must divide num_attention_heads (32)" in error_of(tmp_path, "model.num_kv_heads=5")
    assert "must divide" in error_of(tmp_path, "model.num_kv_heads=64")
    # vllm/config/scheduler.py:352
    assert "long_prefill_token_threshold" in error_of(
        tmp_path, "engine.long_prefill_token_threshold=9000")


def test_vllm_defaults_follow_an_explicit_budget(tmp_path):
    # vllm/engine/arg_utils.py:3180: an unset max_num_seqs is capped at the budget
    r = resolve(loaded(tmp_path, "engine.max_num_batched_tokens=512").scenario)
    assert (r.limits.max_num_seqs, r.limits.max_num_batched_tokens) == (512, 512)
    # arg_utils.py:3163: an unset budget is capped at max_num_seqs x max_model_len
    r = resolve(loaded(tmp_path, "engine.max_num_seqs=1", "engine.max_model_len=1024").scenario)
    assert r.limits.max_num_batched_tokens == 1024
    r = resolve(loaded(tmp_path).scenario)
    assert (r.limits.max_num_seqs, r.limits.max_num_batched_tokens) == (1024, 8192)


def test_kv_pool_over_the_cap_is_refused_with_the_figure(tmp_path):
    tiny = ("{name: m, num_layers: 1, hidden_size: 8, num_attention_heads: 1, num_kv_heads: 1,"
            " head_dim: 1, intermediate_size: 8, vocab_size: 8, max_position_embeddings: 4096}")
    with pytest.raises(ConfigError) as e:
        resolve(loaded(tmp_path, text=GOOD.replace("llama-3-8b", tiny)).scenario)
    # (85,027,979,264 B x 0.9 - 752 B weights - 851,968 B activations - 0.5 GiB) / 64 B
    assert "the KV cache would have 1,187,304,026 blocks of 16 tokens" in str(e.value)


@pytest.mark.parametrize("text,needle", [
    ("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)), "expands to"),
    ("a: " + "[" * 70 + "]" * 70 + "\n", "nested more than 64"),
    (GOOD + "seed: 1\nseed: 2\n", "duplicate key 'seed'"),
])
def test_yaml_limits(tmp_path, text, needle):
    with pytest.raises(InputError, match=needle):
        loaded(tmp_path, text=text)


def test_scenario_file_limits(tmp_path):
    big = write(tmp_path, "# " + "x" * (1 << 20) + "\n" + GOOD, "big.yaml")
    with pytest.raises(InputError, match="larger than 1,024 KiB"):
        load_scenario(big)
    u16 = tmp_path / "u16.yaml"
    u16.write_bytes(GOOD.encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16 text; save it as UTF-8"):
        load_scenario(u16)
    with pytest.raises(InputError, match="regular file, not a folder"):
        load_scenario(tmp_path)


def test_echo_caps():
    assert clip("x" * 1000) == "x" * 77 + "..."
    assert clip("a\nb") == "a b"
    assert len(clip_repr(list(range(10**6)))) <= 80
    assert clip_path("/" + "d" * 200 + "/s.yaml").endswith("/s.yaml")
    with pytest.raises(OutPathError, match="NUL"):
        check_out("a\0b")


def test_switching_the_arrival_process_or_length_dist_by_set(tmp_path):
    """--set workload.arrival.process=closed drops the scenario's rate (a closed loop takes
    none); a dist switch drops the old dist's fields; fields given by --set stay."""
    text = ("name: s\nmodel: llama-3-8b\ngpu: h100-sxm\nworkload:\n"
            "  arrival: {process: gamma, rate: 8, cv: 2}\n"
            "  lengths: {dist: lognormal, prompt_p50: 100, prompt_p90: 400, output_p50: 50,"
            " output_p90: 200}\n  num_requests: 100\n")
    w = loaded(tmp_path, "workload.arrival.process=closed", "workload.arrival.concurrency=8",
               text=text).scenario.workload
    assert (w.arrival.process, w.arrival.rate, w.arrival.cv, w.arrival.concurrency) == (
        "closed", None, None, 8)
    w = loaded(tmp_path, "workload.arrival.process=poisson", text=text).scenario.workload
    assert (w.arrival.rate, w.arrival.cv) == (8, None)
    w = loaded(tmp_path, "workload.lengths.dist=fixed", "workload.lengths.prompt=64",
               "workload.lengths.output=8", text=text).scenario.workload
    assert (w.lengths.dist, w.lengths.prompt, w.lengths.prompt_p50) == ("fixed", 64, None)
    with pytest.raises(InputError, match="process 'closed' takes no rate"):  # given: kept
        loaded(tmp_path, "workload.arrival.process=closed", "workload.arrival.concurrency=8",
               "workload.arrival.rate=3", text=text)


def test_a_bad_set_is_blamed_for_what_resolve_refuses(tmp_path):
    from sim.pipeline import resolve_loaded

    def message(*sets):
        with pytest.raises(ConfigError) as e:
            resolve_loaded(loaded(tmp_path, *sets))
        return str(e.value)

    assert message("engine.max_model_len=100000").startswith(  # was: "s.yaml: ..."
        "--set 'engine.max_model_len=100000': engine.max_model_len 100000 exceeds")
    assert message("engine.max_num_seqs=4096", "engine.max_num_batched_tokens=2048"
                   ).startswith("--set 'engine.max_num_batched_tokens=2048': ")


def test_a_section_check_blames_the_set_whose_field_it_names(tmp_path):
    """A check of the whole workload fails at ``workload``, below which both --set lie: the
    one whose field the message names is blamed, not the last (it was)."""
    text = ("name: s\nmodel: llama-3-8b\ngpu: h100-sxm\nworkload:\n  mix:\n"
            + "".join("    - {arrival: {process: poisson, rate: 2}, lengths: {dist: fixed, "
                      "prompt: 64, output: 8}, num_requests: 10}\n" for _ in range(2)))
    for bad in ("workload.mix.0.warmup_s=5", "workload.mix.0.arrival.concurrency=4"):
        with pytest.raises(InputError) as e:
            loaded(tmp_path, bad, "workload.mix.1.num_requests=20", text=text)
        assert str(e.value).startswith(f"--set {bad!r}: workload: "), str(e.value)
    with pytest.raises(InputError) as e:  # nothing named: the last under the section
        loaded(tmp_path, "workload.mix.0.num_requests=1", "workload.mix.0.duration_s=2",
               text=text)
    assert str(e.value).startswith("--set 'workload.mix.0.duration_s=2': "), str(e.value)


def test_a_check_of_the_whole_scenario_names_the_file_not_an_unrelated_set(tmp_path):
    """Prefix caching with a reservation KV policy fails at the scenario's root, below which
    every --set lies; none of them is named, so the file is (it was the last --set, here
    the unrelated request count)."""
    text = GOOD + "engine: {enable_prefix_caching: true}\n"
    with pytest.raises(InputError) as e:
        loaded(tmp_path, "kv.name=contiguous-max", "workload.num_requests=50", text=text)
    assert str(e.value).startswith("s.yaml: engine.enable_prefix_caching needs kv policy "
                                   "paged"), str(e.value)
    with pytest.raises(InputError) as e:  # a --set the message names is still blamed
        loaded(tmp_path, "engine.enable_prefix_caching=true", "kv.name=contiguous-max",
               "workload.num_requests=50")
    assert str(e.value).startswith("--set 'engine.enable_prefix_caching=true': ")


def test_a_leading_zero_is_decimal_as_yaml_1_2_reads_it(tmp_path):
    """PyYAML (YAML 1.1) read 064 as octal: max_num_seqs=064 ran 52, block_size=032 was
    refused as 26. The --set, the scenario file and a grid value read it as 64."""
    from sim.plan.grid import parse_value

    sc = loaded(tmp_path, "engine.max_num_seqs=064", "engine.block_size=032").scenario
    assert (sc.engine.max_num_seqs, sc.engine.block_size) == (64, 32)
    assert [parse_value(v) for v in ("064", "-07", "0x40", "0b11", "0")] == [64, -7, 64, 3, 0]


def test_a_policy_by_its_bare_name(tmp_path):
    sc = loaded(tmp_path, "cluster.router=least_outstanding", "cluster.replicas=2",
                "scheduler=sarathi").scenario
    assert sc.cluster.router.name == "least_outstanding" and sc.scheduler.name == "sarathi"


def test_a_bare_policy_name_then_its_parameters(tmp_path):
    # the bare name is {name: sarathi}, so a later --set reaches its parameters (it was
    # "scheduler is not a section (it is 'sarathi')")
    sc = loaded(tmp_path, "scheduler=sarathi", "scheduler.chunk_size=256", "kv=paged",
                "kv.watermark=0.01", "cost=roofline", "cost.step_overhead_ms=1").scenario
    assert (sc.scheduler.name, sc.scheduler.params.chunk_size) == ("sarathi", 256)
    assert (sc.kv.name, sc.kv.params.watermark) == ("paged", 0.01)
    assert (sc.cost.name, sc.cost.params.step_overhead_ms) == ("roofline", 1)


def test_a_kv_override_below_one_request_names_the_override(tmp_path, capsys):
    # the advice was "give the KV cache more memory", which an override ignores, and the
    # message blamed the scenario file rather than the --set that fixed the pool
    from sim.cli import main

    out = tmp_path / "r"
    assert main(["run", str(write(tmp_path, GOOD)), "--set", "engine.num_gpu_blocks_override=5",
                 "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("servesim: error: --set 'engine.num_gpu_blocks_override=5': ")
    assert err.endswith("raise engine.num_gpu_blocks_override (5 blocks, one of them vLLM's "
                        "null block)") and len(err.splitlines()) == 1 and not out.exists()


def test_a_lanes_kv_share_refusal_names_its_set(tmp_path, capsys):
    # raised when the scheduler was built, the refusal carried no file or --set; it is now
    # made where the scenario is resolved, before anything runs or is written
    from sim.cli import main

    out = tmp_path / "r"
    assert main(["run", str(write(tmp_path, GOOD)), "--set", "scheduler=lanes",
                 "--set", "scheduler.interactive_kv_share=0.999", "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("servesim: error: --set 'scheduler.interactive_kv_share=0.999': "
                          "scheduler.interactive_kv_share 0.999 leaves the batch lane ")
    assert len(err.splitlines()) == 1 and not out.exists()
