"""Zero-load feasibility (issue 23 item 5): a capacity search that finds no load says whether
the budget is out of reach one request at a time or the traffic arrives bunched, and a
budget close to its zero-load value is announced. TINY's linear cost: a lone request's
prefill step is 10 + 0.05 x 200 = 20 ms (its TTFT), each decode step 10 + 1 = 11 ms."""

from __future__ import annotations

from sim.config.load import load_scenario
from sim.plan.feasibility import unloaded, verdict
from sim.plan.point import Base
from sim.plan.slo import parse_slo

from .helpers import TINY, cli


def test_zero_load_values_by_hand():
    budgets = parse_slo("ttft_p95=15ms,tpot_p95=40ms")
    values = unloaded(Base.of(load_scenario(TINY)), (), budgets)
    assert round(values["ttft_p95"], 6) == 20.0 and round(values["tpot_p95"], 6) == 11.0
    over, close = verdict(values, budgets)
    assert over == ["TTFT p95 20.0 ms > budget 15 ms"] and close == []


def test_a_budget_no_load_can_meet_is_named(tmp_path, capsys):
    assert cli("capacity", TINY, "--slo", "ttft_p95=15ms", "--seeds", "1", "--tol", "20%",
               "--out", tmp_path / "c", "--no-plots", "-q") == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("no configuration sustains any load") for ln in lines)
    assert ("zero load (the first 200 requests, one at a time): TTFT p95 20.0 ms > budget "
            "15 ms: no load can meet it (a faster configuration or a looser budget)") in lines
    # a workload of fewer requests says how many it sent (it said 200 of 100)
    assert cli("capacity", TINY, "--slo", "ttft_p95=15ms", "--seeds", "1", "--tol", "20%",
               "--set", "workload.num_requests=100", "--out", tmp_path / "d", "--no-plots",
               "-q") == 0
    assert "zero load (the first 100 requests, one at a time): TTFT p95 20.0 ms > budget " \
        "15 ms: no load can meet it (a faster configuration or a looser budget)" in \
        capsys.readouterr().out.splitlines()


def test_a_budget_close_to_zero_load_is_announced(tmp_path, capsys):
    assert cli("capacity", TINY, "--slo", "ttft_p95=21.5ms", "--seeds", "1", "--tol", "20%",
               "--out", tmp_path / "c", "--no-plots", "-q") == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("note: TTFT p95 budget 21.5 ms is within 10% of its zero-load value 20.0 ms: "
            "capacity hinges on a few ms of it") in lines


def test_bunched_arrivals_are_named_when_every_budget_holds_alone(tmp_path, capsys):
    # groups of 10 requests share each timestamp: together their prefill step is
    # 10 + 0.05 x 2000 = 110 ms, so TTFT p95 > 50 ms at any replay speed; alone 20 ms
    rows = "".join(f"{g * 2.0:.1f},200,40\n" for g in range(30) for _ in range(10))
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    sc = tmp_path / "s.yaml"
    sc.write_text(TINY.read_text().replace(
        "  arrival: {process: poisson, rate: 10.0}\n  lengths: {dist: fixed, prompt: 200, "
        "output: 40}\n  num_requests: 300\n", f"  trace: {tmp_path / 't.csv'}\n"))
    assert cli("capacity", sc, "--slo", "ttft_p95=50ms", "--seeds", "1", "--tol", "20%",
               "--out", tmp_path / "c", "--no-plots", "-q") == 0
    out = capsys.readouterr().out
    assert "zero load (the first 200 requests, one at a time): every budget holds" in out
    assert "90% of the requests arrive at the same instant as the one before" in out


def test_a_fleet_of_replicas_is_measured_on_one_and_pools_are_not(tmp_path, capsys):
    fleet = "cluster={replicas: 2, router: {name: least_outstanding}}"
    budgets = parse_slo("ttft_p95=21.5ms,tpot_p95=40ms")
    values = unloaded(Base.of(load_scenario(TINY, (fleet,))), (), budgets)
    # one replica alone, as without the cluster (a fleet runs no closed loop)
    assert round(values["ttft_p95"], 6) == 20.0 and round(values["tpot_p95"], 6) == 11.0
    pools = "cluster={pools: [{name: a, lanes: [x]}, {name: b}]}"
    assert unloaded(Base.of(load_scenario(TINY, (pools,))), (), budgets) is None
    # capacity of a fleet ends with its note and exit 0 (was: exit 2 after chosen.yaml)
    assert cli("capacity", TINY, "--set", fleet, "--slo", "ttft_p95=21.5ms", "--seeds", "1",
               "--tol", "20%", "--out", tmp_path / "c", "--no-plots", "-q") == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("note: TTFT p95 budget 21.5 ms is within 10% of its zero-load value 20.0 ms: "
            "capacity hinges on a few ms of it") in lines
