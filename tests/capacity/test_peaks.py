"""Mean vs busiest-minute rate, and the warning when Poisson stands in for an uneven trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.config.load import load_scenario
from sim.plan.peaks import busiest_window, offered_rates, stand_in_warning

CHAT = "scenarios/chat-trace.yaml"


def test_the_busiest_minute_slides_over_the_arrivals():
    # fixed minutes from 0 hold 0, 30, 59 (3) and a partial 61, 89; the window [30, 90)
    # holds 30, 59, 61, 89
    t = np.array([0.0, 30.0, 59.0, 61.0, 89.0])
    assert busiest_window(t) == 4
    assert offered_rates(t) == (pytest.approx(4 / 89), pytest.approx(4 / 60))
    assert busiest_window(np.array([0.0, 60.0, 120.0])) == 1  # [t, t + 60): 60 s apart
    assert busiest_window(np.array([5.0, 0.0, 59.9])) == 3  # unsorted input


def test_the_busiest_minute_never_drops_as_the_load_grows():
    """Fixed whole minutes split bursts differently at each scale (the issue saw 15.55 ->
    21.42 against 15.38 -> 22.03); compressing time can only fill a sliding window more."""
    import pandas as pd

    t = pd.read_csv("scenarios/traces/chat-15min.csv")["arrival_s"].to_numpy()
    peaks = [offered_rates(t / s)[1] for s in np.arange(1.0, 1.5, 0.01)]
    assert all(b >= a for a, b in zip(peaks, peaks[1:]))
    assert peaks[0] == pytest.approx(544 / 60)


def test_offered_rates_of_short_or_empty_runs():
    assert offered_rates(np.array([0.0, 10.0, 20.0])) == (0.1, 0.1)  # no whole minute
    assert all(math.isnan(x) for x in offered_rates(np.array([3.0])))


def test_the_shipped_trace_has_uneven_minutes():
    import pandas as pd

    t = pd.read_csv("scenarios/traces/chat-15min.csv")["arrival_s"].to_numpy()
    mean, peak = offered_rates(t)
    assert len(t) == 5251 and peak == 544 / 60 and peak / mean == pytest.approx(1.5540, abs=1e-4)


def test_poisson_standing_in_for_the_azure_mix_warns():
    msg = stand_in_warning(load_scenario(None))
    assert msg.startswith("default.yaml: poisson arrivals stand in for the Azure 2023 "
                          "conversation trace") and "1.57x" in msg


def test_poisson_over_a_trace_file_warns_with_the_trace_own_peaks():
    loaded = load_scenario(CHAT, ("workload.arrival.process=poisson",
                                  "workload.arrival.rate=5.83"))
    assert "whose busiest minute runs at 1.55x its mean rate" in stand_in_warning(loaded)


@pytest.mark.parametrize("sets", [(), ("workload.lengths.dist=sharegpt_like",)])
def test_no_warning_for_a_replay_or_a_mix_without_timestamps(sets):
    path = CHAT if not sets else None
    assert stand_in_warning(load_scenario(path, sets)) is None


def test_a_good_sweep_still_says_the_stand_in_warning_once(tmp_path, capsys):
    """Said with the results now (tests/cli/test_cli_errors.py: not before a bad input's
    one line), and still said."""
    from sim.cli import main

    sc = tmp_path / "s.yaml"
    sc.write_text("name: s\nmodel: llama-3-8b\ngpu: h100-sxm\nworkload:\n"
                  "  arrival: {process: poisson, rate: 2.0}\n"
                  "  lengths: {dist: azure_conv_like}\n  num_requests: 30\n")
    assert main(["sweep", str(sc), "--rate", "1,2", "-j", "1", "-q", "--no-plots",
                 "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("stand in for the Azure 2023") == 1
