"""--slo budgets: parsing, units, checks, and the scenario's own slo."""

from __future__ import annotations

import math

import pytest

from sim.config.load import load_scenario
from sim.plan.slo import Budget, as_overrides, parse_slo, scenario_slo
from traces.errors import InputError

from .helpers import TINY


def test_parse_units_and_stats():
    b = parse_slo("ttft_p95=500ms, tpot_p50=0.05s,e2el_max=20,itl_p99=1e2ms")
    assert b == (Budget("ttft", "p95", 500.0), Budget("tpot", "median", 50.0),
                 Budget("e2el", "max", 20.0), Budget("itl", "p99", 100.0))
    assert [x.column for x in b[:2]] == ["latency_ms.ttft.p95", "latency_ms.tpot.median"]
    assert b[1].name == "tpot_p50"


@pytest.mark.parametrize("bad", ["ttft=500", "ttft_p97=5", "foo_p95=5", "ttft_p95=-5ms",
                                 "ttft_p95=5min", "ttft_p95=", "", "ttft_p95=1,ttft_p95=2",
                                 "tpot_mean=20ms,,ttft_p50=1s", "ttft_p95=5ms,"])
def test_bad_slo_is_one_input_error(bad):
    with pytest.raises(InputError, match="--slo"):
        parse_slo(bad)


def test_a_metric_without_samples_holds():
    b = Budget("tpot", "p95", 50)
    assert b.holds({"latency_ms.tpot.p95": math.nan}) and b.holds({"latency_ms.tpot.p95": 50})
    assert not b.holds({"latency_ms.tpot.p95": 50.01})


def test_the_scenario_slo_is_the_default():
    assert scenario_slo(load_scenario(TINY).scenario) == (Budget("ttft", "p95", 300.0),
                                                         Budget("tpot", "p95", 40.0))


def test_budgets_become_the_scenario_slo_when_one_percentile_fits():
    assert as_overrides(parse_slo("ttft_p99=1s,tpot_p99=60ms")) == (
        "slo.percentile=99", "slo.ttft_ms=1000.0", "slo.tpot_ms=60.0", "slo.e2el_ms=null")
    assert as_overrides(parse_slo("ttft_p99=1s,tpot_p95=60ms")) == ()
    assert as_overrides(parse_slo("itl_p99=100ms")) == ()


@pytest.mark.parametrize("bad", ["ttft_p95=0ms", "ttft_p95=-5ms", "tpot_p50=0", "e2el_max=-0.1s",
                                 "ttft_p95=1e999ms"])
def test_a_limit_that_is_not_positive_says_so(bad):
    with pytest.raises(InputError, match="must be > 0"):
        parse_slo(bad)


def test_capacity_line_when_every_load_holds():
    from sim.cli.capacity import _limit

    assert "every load tried held (up to 640" in _limit({"next_load_failed": None,
                                                         "max_load": 640.0, "binding": "-"})
    assert _limit({"next_load_failed": 3.5, "max_load": 3.0, "binding": "ttft p95"}) == (
        "limited by ttft p95 at 3.5")
