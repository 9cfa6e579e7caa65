"""Bad cluster sections: one line naming the field, exit code 2, nothing written."""

from __future__ import annotations

import pytest

from sim.cli import main


@pytest.mark.parametrize("setting,message", [
    ("cluster={replicas: 0}", "cluster.replicas"),
    ("cluster={router: {name: fastest}}", "unknown router 'fastest'"),
    ("cluster={pools: [{name: a}, {name: a}]}", "names must differ"),
    ("cluster={replicas: 3, pools: [{name: a}]}", "replicas and router apply when no pools"),
    ("cluster={pools: [{name: a}, {name: b}]}", "at most one pool may take"),
    ("cluster={pools: [{name: a, engine: {max_num_seqs: 0}}]}",
     "cluster.pools.0 (a): engine.max_num_seqs"),
    ("cluster={pools: [{name: p}, {name: d}], disaggregation: {prefill_pool: p, "
     "decode_pool: x}}", "disaggregation.decode_pool: 'x' is not one of the pools"),
    ("cluster={pools: [{name: p}, {name: d}], disaggregation: {prefill_pool: p, "
     "decode_pool: d, kv_transfer_bandwidth: 1e-300}}", "kv_transfer_bandwidth"),
])
def test_bad_cluster_is_one_line_exit_2(setting, message, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--set", setting, "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_prefix_affinity_without_a_prefix_cache_warns(tmp_path, capsys):
    assert main(["run", "--set", "cluster={replicas: 2, router: {name: prefix_affinity}}",
                 "--set", "engine.enable_prefix_caching=false", "--set",
                 "workload.num_requests=50", "-o", str(tmp_path / "r"), "-q"]) == 0
    err = capsys.readouterr().err
    assert err.count("routes by prefix_affinity but its replicas cache no prefix") == 1


@pytest.mark.parametrize("settings,warned", [
    ((), False),  # unset: vLLM v1's default, on for paged KV with the vllm scheduler
    (("engine.enable_prefix_caching=true",), False),
    (("scheduler=sarathi",), True),  # unset: off for the v0-era schedulers
])
def test_prefix_affinity_warns_only_where_no_prefix_is_cached(settings, warned, tmp_path,
                                                              capsys):
    sets = [x for s in settings for x in ("--set", s)]
    assert main(["run", "--set", "cluster={replicas: 2, router: {name: prefix_affinity}}",
                 *sets, "--set", "workload.num_requests=20", "-o", str(tmp_path / "r"), "-q",
                 "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert ("routes by prefix_affinity but its replicas cache no prefix" in err) is warned
