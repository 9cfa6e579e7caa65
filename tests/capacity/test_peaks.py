"""Mean vs busiest-minute rate, and the warning when Poisson stands in for an uneven trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.config.load import load_scenario
from sim.plan.peaks import offered_rates, stand_in_warning

CHAT = "scenarios/chat-trace.yaml"


def test_offered_rates_count_whole_minutes_from_the_first_arrival():
    # minute 0: 60 arrivals, minute 1: 120, then a partial minute of 30 that does not count
    t = np.concatenate([np.linspace(10, 69.5, 60), np.linspace(70, 129.9, 120),
                        np.linspace(130, 140, 30)])
    mean, peak = offered_rates(t)
    assert mean == pytest.approx((len(t) - 1) / (140 - 10))
    assert peak == 2.0  # 120 in the busiest whole minute


def test_offered_rates_of_short_or_empty_runs():
    assert offered_rates(np.array([0.0, 10.0, 20.0])) == (0.1, 0.1)  # no whole minute
    assert all(math.isnan(x) for x in offered_rates(np.array([3.0])))


def test_the_shipped_trace_has_uneven_minutes():
    import pandas as pd

    t = pd.read_csv("scenarios/traces/chat-15min.csv")["arrival_s"].to_numpy()
    mean, peak = offered_rates(t)
    assert len(t) == 5251 and peak == 9.0 and peak / mean == pytest.approx(1.5426, abs=1e-4)


def test_poisson_standing_in_for_the_azure_mix_warns():
    msg = stand_in_warning(load_scenario(None))
    assert msg.startswith("default.yaml: poisson arrivals stand in for the Azure 2023 "
                          "conversation trace") and "1.53x" in msg


def test_poisson_over_a_trace_file_warns_with_the_trace_own_peaks():
    loaded = load_scenario(CHAT, ("workload.arrival.process=poisson",
                                  "workload.arrival.rate=5.83"))
    assert "whose busiest minute runs at 1.54x its mean rate" in stand_in_warning(loaded)


@pytest.mark.parametrize("sets", [(), ("workload.lengths.dist=sharegpt_like",)])
def test_no_warning_for_a_replay_or_a_mix_without_timestamps(sets):
    path = CHAT if not sets else None
    assert stand_in_warning(load_scenario(path, sets)) is None
