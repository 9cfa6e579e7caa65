"""Generated workloads are sized by duration: without num_requests or duration_s they run
max(300 s, 1,000 requests / rate), so a faster rate sends more requests, not shorter
traffic (it used to be an error, and the shipped scenarios' 2,000 requests were 33 s at
60 req/s). The warm-up is a validated, documented workload field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from traces import TraceError, WorkloadSpec, build_workload
from traces.sizing import DEFAULT_MIN_REQUESTS, DEFAULT_SPAN_S, default_duration_s

FIXED = {"dist": "fixed", "prompt": 100, "output": 10}


def generated(rate: float, **extra):
    spec = {"arrival": {"process": "poisson", "rate": rate}, "lengths": FIXED, **extra}
    return build_workload(spec, seed=0, base_dir=".")


@pytest.mark.parametrize("rate", [5.0, 60.0])
def test_without_a_count_arrivals_span_the_default_duration(rate):
    t = generated(rate)
    assert DEFAULT_SPAN_S == 300.0 and default_duration_s(rate) == 300.0
    assert 299.0 < t.arrival_s[-1] < 300.0
    n = rate * 300.0  # Poisson: the count within 4 standard deviations of rate x 300 s
    assert abs(len(t) - n) < 4 * n ** 0.5


def test_the_source_says_the_duration_used():
    assert generated(5.0).source == ("synthetic: arrival poisson rate=5.0 for 300 s (the "
                                     "default duration), lengths fixed")
    assert generated(5.0, duration_s=60.0).source.endswith("rate=5.0 for 60 s, lengths fixed")
    assert "for" not in generated(5.0, num_requests=10).source


def test_a_slow_rate_still_gets_the_benchmark_sample():
    # 0.5 req/s: 1,000 requests (vllm bench serve --num-prompts' default) take 2,000 s
    assert DEFAULT_MIN_REQUESTS == 1000 and default_duration_s(0.5) == 2000.0
    t = generated(0.5)
    assert 1900.0 < t.arrival_s[-1] < 2000.0 and abs(len(t) - 1000) < 130


def test_a_fast_rate_is_capped_at_a_million_requests():
    assert default_duration_s(1e4) == 100.0 and default_duration_s(1e6) == 1.0


def test_a_count_or_a_duration_given_is_kept():
    assert len(generated(60.0, num_requests=2000)) == 2000
    assert generated(60.0, duration_s=10.0).arrival_s[-1] < 10.0


def test_a_closed_loop_still_needs_a_count():
    with pytest.raises(ValidationError, match="a closed loop needs num_requests"):
        WorkloadSpec.model_validate({"arrival": {"process": "closed", "concurrency": 4},
                                     "lengths": FIXED})


@pytest.mark.parametrize("spec, match", [
    ({"warmup_s": -1.0}, "greater than or equal to 0"),
    ({"warmup_s": 2e9}, "less than or equal to 1000000000"),
    ({"mix": [{"arrival": {"process": "poisson", "rate": 1.0}, "lengths": FIXED,
               "warmup_s": 5.0}]}, "warmup_s applies to the whole workload"),
])
def test_bad_warmups_are_refused(spec, match):
    base = {"arrival": {"process": "poisson", "rate": 1.0}, "lengths": FIXED}
    with pytest.raises(ValidationError, match=match):
        WorkloadSpec.model_validate(spec if "mix" in spec else {**base, **spec})


def test_a_warmup_longer_than_the_arrivals_is_refused():
    with pytest.raises(TraceError, match="workload.warmup_s: 400 s leaves out every request"):
        generated(5.0, warmup_s=400.0)
    field = WorkloadSpec.model_fields["warmup_s"]
    assert field.json_schema_extra["unit"] == "s" and "left out" in field.description
