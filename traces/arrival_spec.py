"""The workload's `arrival:` section: when requests arrive (see traces.spec for the rest).

    arrival: {process: poisson, rate: 5.0}
    arrival: {process: gamma, rate: 5.0, cv: 2.0}
    arrival: {process: closed, concurrency: 4, think_s: 0.5}
    arrival: {process: replay, concurrency: 8}      # a trace's times under a client-side cap
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from traces import arrivals
from traces.errors import TraceError
from traces.limits import MAX_REQUESTS, MAX_TIME_S, REQ, TIME
from traces.validated import Validated

#: the fields each process takes besides ``process`` (the validator below enforces them)
PROCESS_FIELDS = {
    "replay": {"concurrency", "think_s"}, "closed": {"concurrency", "think_s"},
    "poisson": {"rate", "concurrency", "think_s"}, "constant": {"rate", "concurrency", "think_s"},
    "gamma": {"rate", "cv", "concurrency", "think_s"},
}


class _Model(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_RATE = 1e6  # requests/s: the largest arrival rate (a million per second)
MIN_RATE = 1e-6  # requests/s: the smallest (one request per 11.6 days)


class ArrivalSpec(_Model):
    """When requests arrive."""

    process: Literal["replay", "poisson", "gamma", "constant", "closed"] = Field(
        "replay",
        description="replay = the trace's own timestamps; poisson, gamma (renewal process with "
        "inter-arrival CV `cv`) or constant (evenly spaced) generate times at `rate`; closed = "
        "`concurrency` clients, each sending its next request when its previous one finishes "
        "(plus `think_s`)",
    )
    rate: float | None = Field(
        None, ge=MIN_RATE, le=MAX_RATE, json_schema_extra={
            "why": "one request per 11.6 days to a million per second", "unit": "requests/s"},
        description="mean arrival rate in requests per second (generated only)"
    )
    cv: float | None = Field(
        None,
        ge=1e-3,
        le=1e3,
        json_schema_extra={"why": "the gamma shape 1/cv^2 must stay a usable number"},
        description="std/mean of the inter-arrival gaps, dimensionless (gamma only; "
        "1 = Poisson, > 1 bursty)",
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        le=MAX_REQUESTS,
        json_schema_extra=REQ,
        description="requests in the system at most (requests): the others wait client-side "
        "and are sent, in order, as earlier ones finish (`vllm bench serve --max-concurrency`); "
        "required by closed, optional for every other process",
    )
    think_s: float = Field(
        0.0,
        ge=0,
        le=MAX_TIME_S,
        json_schema_extra=TIME,
        description="with concurrency: seconds between a request's finish (or rejection) and "
        "the next request sent in its place",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ArrivalSpec:
        if self.process in ("replay", "closed") and (self.rate is not None or self.cv is not None):
            raise ValueError(
                f"process {self.process!r} takes no rate or cv"
                + (" (speed a replay up with the workload's rate_scale)"
                   if self.process == "replay" else " (its pace is set by the finishes)")
            )
        if self.process not in ("replay", "closed") and self.rate is None:
            raise ValueError(f"process {self.process!r} needs rate (requests per second)")
        if self.process == "gamma" and self.cv is None:
            raise ValueError("process 'gamma' needs cv (std/mean of the inter-arrival gaps)")
        if self.process != "gamma" and self.cv is not None:
            raise ValueError("cv applies only to process 'gamma'")
        if self.process == "closed" and self.concurrency is None:
            raise ValueError("process 'closed' needs concurrency (clients, each with one "
                             "request in flight)")
        if self.think_s and self.concurrency is None:
            raise ValueError("think_s applies only with concurrency (a closed loop or a "
                             "concurrency cap)")
        return self

    def sample(
        self, *, rng: np.random.Generator, n: int | None = None, duration_s: float | None = None
    ) -> np.ndarray:
        """Arrival times in seconds from t = 0 (exactly one of n / duration_s).

        closed: every request is ready at 0; the concurrency limit paces them (sim.engine).
        """
        if self.process == "poisson":
            return arrivals.poisson(self.rate, n, duration_s, rng=rng)
        if self.process == "gamma":
            return arrivals.gamma(self.rate, self.cv, n, duration_s, rng=rng)
        if self.process == "constant":
            return arrivals.constant(self.rate, n, duration_s, rng=rng)
        if self.process == "closed" and n is not None:
            return np.zeros(n)
        what = "for a duration" if self.process == "closed" else "(it replays a trace)"
        raise TraceError(f"arrival process {self.process!r} cannot generate times {what}")
