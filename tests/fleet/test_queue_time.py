"""A fleet request's queue time (arrival to first scheduled) is never negative: the engine
counts integer nanoseconds, the fleet's table keeps the trace's float arrival, and a request
scheduled at its own arrival used to read -4.3e-10 s."""

from __future__ import annotations

import warnings

import numpy as np

from sim import pipeline
from sim.config.load import load_scenario
from sim.report.tables import _queue, requests_table

SCENARIO = "scenarios/default.yaml"


def test_a_sub_nanosecond_residue_reads_zero_and_nothing_else_moves():
    q = _queue(np.array([1.0, 1.0, 1.0, 2.0, np.nan]),
               np.array([1.0 + 4.3e-10, 1.0 + 2e-9, 0.5, 1.0, 1.0]))
    assert q[0] == 0.0 and q[1] < -1e-9 and q[2] == 0.5 and q[3] == 1.0 and np.isnan(q[4])


def test_a_fleet_without_delays_queues_no_request_before_its_arrival():
    sets = ("cluster={replicas: 2, router: least_outstanding}", "workload.num_requests=2000",
            "engine.ingress_ms=0", "engine.egress_ms=0", "engine.ingress_per_token_us=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pipeline.run(load_scenario(SCENARIO, sets), None, plots=False)
    t = requests_table(out.result)
    assert len(t) == 2000 and t.queue_s.min() == 0.0
