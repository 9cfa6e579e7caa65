"""The scenario YAML's `workload:` section as pydantic models, and `build_workload`.

    workload:
      trace: data/conv.csv        # optional; relative paths resolve against the scenario folder
      format: auto                # auto | azure | vllm-bench | vllm-result | mooncake | vidur | ...
      window_s: [0, 600]          # optional: replay only [start, end) s of the trace, re-zeroed
      rate_scale: 2.0             # replay speed-up: 2 halves every gap
      prompt_scale: 4.0           # optional: every prompt 4x longer (output_scale likewise)
      arrival: {process: gamma, rate: 5.0, cv: 2.0}      # default: replay the trace's times
      lengths: {dist: azure_conv_like}                   # default: the trace's own lengths
      num_requests: 2000          # or duration_s: 600 (generated arrivals; neither: the
                                  #   default duration of traces.sizing, 5 min or more)
      warmup_s: 30                # optional: metrics leave out requests arriving before 30 s
      max_requests: 1000          # optional cap: the first N requests of the final workload
      shared_prefix: {tokens: 2000, num_prefixes: 1, hash_block_size: 16}
      lane: interactive           # optional tags for every request
      mix: [ {...}, {...} ]       # or: several sub-workloads merged by arrival time

Impossible combinations are rejected by model validators (pydantic ValidationError); problems
only visible in the data (e.g. too few trace rows) raise TraceError while building.
"""

from __future__ import annotations

from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field, ValidationError, model_validator

from traces import lengths as L
from traces.arrival_spec import ArrivalSpec, _Model
from traces.errors import TraceError
from traces.limits import MAX_REQUESTS, MAX_TIME_S, MAX_TOKENS, REQ, TIME, TOK
from traces.schema import Trace
from traces.sizing import default_duration_s

M = TypeVar("M", bound=BaseModel)


def _changed(model: BaseModel) -> set[str]:
    """The fields holding other than their default: the rules below judge values, not which
    keys were written, so a dump with every default filled in (config.json) validates again."""
    return {k for k, f in type(model).model_fields.items()
            if k in model.model_fields_set and getattr(model, k) != f.get_default(
                call_default_factory=True)}


def _tokens(description: str, **low):
    """An optional token count, >= 1 (or ``gt=0``) and <= MAX_TOKENS."""
    return Field(None, **(low or {"ge": 1}), le=MAX_TOKENS, json_schema_extra=TOK,
                 description=description)


LENGTH_FIELDS = {
    "trace": {"shuffle"},
    "resample": set(),
    "lognormal": {
        "prompt_p50",
        "prompt_p90",
        "output_p50",
        "output_p90",
        "prompt_max",
        "output_max",
    },
    "fixed": {"prompt", "output"},
    "sharegpt_like": set(),
    "azure_conv_like": set(),
}
_LENGTHREQUIRED = {
    "lognormal": {"prompt_p50", "prompt_p90", "output_p50", "output_p90"},
    "fixed": {"prompt", "output"},
}


class LengthSpec(_Model):
    """How many prompt and output tokens each request has."""

    dist: Literal["trace", "resample", "lognormal", "fixed", "sharegpt_like", "azure_conv_like"] = (
        Field(
            "trace",
            description="trace = the trace rows in order; resample = (prompt, output) "
            "pairs of the trace drawn with replacement; lognormal / fixed = parametric; "
            "sharegpt_like / azure_conv_like = embedded real distributions",
        )
    )
    shuffle: bool = Field(False, description="dist trace: use the rows in a seeded random order")
    prompt_p50: float | None = _tokens("lognormal median prompt, tokens", gt=0)
    prompt_p90: float | None = _tokens("lognormal p90 prompt, tokens", gt=0)
    output_p50: float | None = _tokens("lognormal median output, tokens", gt=0)
    output_p90: float | None = _tokens("lognormal p90 output, tokens", gt=0)
    prompt_max: int | None = _tokens("lognormal prompt cap, tokens")
    output_max: int | None = _tokens("lognormal output cap, tokens")
    prompt: int | None = _tokens("fixed prompt length, tokens")
    output: int | None = _tokens("fixed output length, tokens")

    @model_validator(mode="after")
    def _consistent(self) -> LengthSpec:
        given = _changed(self) - {"dist"}
        extra = sorted(given - LENGTH_FIELDS[self.dist])
        if extra:
            raise ValueError(f"{', '.join(extra)} does not apply to dist {self.dist!r}")
        missing = sorted(_LENGTHREQUIRED.get(self.dist, set()) - given)
        if missing:
            raise ValueError(f"dist {self.dist!r} needs {', '.join(missing)} (tokens)")
        if self.dist == "lognormal":
            for part in ("prompt", "output"):
                if getattr(self, f"{part}_p90") <= getattr(self, f"{part}_p50"):
                    raise ValueError(f"{part}_p90 must be greater than {part}_p50")
        return self

    def sample(self, n: int, rng: np.random.Generator, trace: Trace | None = None) -> L.Lengths:
        """`n` generated lengths (every dist except 'trace'; 'resample' needs `trace`)."""
        if self.dist == "resample" and trace is not None:
            return L.resample(trace, n, rng)
        if self.dist == "lognormal":
            prompt = L.lognormal(self.prompt_p50, self.prompt_p90, n, rng, 1, self.prompt_max)
            return L.Lengths(
                prompt, L.lognormal(self.output_p50, self.output_p90, n, rng, 1, self.output_max)
            )
        if self.dist == "fixed":
            return L.Lengths(L.fixed(self.prompt, n), L.fixed(self.output, n))
        if self.dist in ("sharegpt_like", "azure_conv_like"):
            return getattr(L, self.dist)(n, rng)
        raise TraceError(f"lengths dist {self.dist!r} needs a trace")


class PrefixSpec(_Model):
    """Shared system prompts (see traces.prefix.shared_prefix)."""

    tokens: int = Field(
        ge=0,
        le=MAX_TOKENS,
        json_schema_extra=TOK,
        description="length of each shared prefix, tokens (part of the "
        "prompt; shorter prompts are raised to tokens + 1)",
    )
    num_prefixes: int = Field(
        1, ge=1, le=1_000_000, json_schema_extra={"why": "more distinct system prompts than "
                                                  "any deployment serves"},
        description="distinct prefixes; each request picks one uniformly at random"
    )
    hash_block_size: int = Field(
        16, ge=1, le=4096, json_schema_extra={"why": "larger than any KV block", "unit": "tokens"},
        description="tokens per prefix hash id (the KV block)")


# bounds of a length multiplier (prompt_scale, output_scale)
_LENGTH_FACTOR = dict(ge=1e-6, le=1e6, json_schema_extra={
    "why": "a million times shorter or longer than the workload's", "unit": "times"})


class WorkloadSpec(_Model):
    """One workload: a replayed or generated request stream, or a mix of sub-workloads."""

    trace: str | None = Field(
        None,
        description="trace file path; relative paths resolve against the scenario file's folder",
    )
    format: Literal[
        "auto", "azure", "vllm-bench", "vllm-result", "jsonl", "mooncake", "vidur", "lengths",
        "native",
    ] = Field(
        "auto", description="trace file format; auto detects it from extension and first line"
    )
    spread_s: float = Field(
        0.0,
        ge=0,
        le=MAX_TIME_S,
        json_schema_extra=TIME,
        description="mooncake only: spread requests sharing a "
        "quantized timestamp t over [t, t + spread_s) seconds",
    )
    window_s: tuple[float, float] | None = Field(
        None,
        description="replay only the trace's arrivals in [start, end) seconds, re-zeroed to start",
    )
    rate_scale: float = Field(
        1.0,
        ge=1e-6,
        le=1e6,
        json_schema_extra={"why": "a million times slower or faster than the trace"},
        description="replay speed-up factor, dimensionless: 2 halves every inter-arrival gap",
    )
    prompt_scale: float = Field(
        1.0, **_LENGTH_FACTOR,
        description="prompt length multiplier (a factor, dimensionless): every request's "
        "prompt tokens times this, rounded half up, at least 1; 4 = prompts 4x longer (a "
        "trace's prefix chains are dropped, shared_prefix still applies)",
    )
    output_scale: float = Field(
        1.0, **_LENGTH_FACTOR,
        description="output length multiplier (a factor, dimensionless): every request's "
        "output tokens times this, rounded half up, at least 1; 0.5 = half as many generated",
    )
    arrival: ArrivalSpec = Field(default_factory=ArrivalSpec, description="arrival process")
    lengths: LengthSpec = Field(default_factory=LengthSpec, description="length distribution")
    num_requests: int | None = Field(
        None, ge=1, le=MAX_REQUESTS, json_schema_extra=REQ,
        description="generated arrivals: how many requests"
    )
    duration_s: float | None = Field(
        None, gt=0, le=MAX_TIME_S, json_schema_extra=TIME,
        description="generated arrivals: all arrivals in [0, duration_s) seconds; with "
        "neither this nor num_requests, max(300 s, 1,000 requests / arrival.rate)"
    )
    max_requests: int | None = Field(
        None, ge=1, le=MAX_REQUESTS, json_schema_extra=REQ,
        description="keep only the first N requests (by arrival) of the final workload"
    )
    warmup_s: float = Field(
        0.0, ge=0, le=MAX_TIME_S, json_schema_extra=TIME,
        description="warm-up, seconds: requests arriving before this are served (they load "
        "the engine) but left out of the latency, throughput, goodput and SLO figures, which "
        "the summary says (requests.warmup_left_out); queue, KV and stability figures cover "
        "the whole run"
    )
    shared_prefix: PrefixSpec | None = Field(
        None, description="attach shared-prefix hash chains (replaces the trace's own)"
    )
    lane: str | None = Field(None, min_length=1, description="lane tag for every request")
    priority: int | None = Field(
        None, ge=-(1 << 31), le=(1 << 31) - 1,
        json_schema_extra={"why": "a 32-bit priority, as vLLM's"},
        description="priority for every request (lower = more urgent)"
    )
    tenant: str | None = Field(None, description="tenant tag for every request")
    mix: list[WorkloadSpec] | None = Field(
        None,
        min_length=1,
        description="sub-workloads merged by arrival time (each with its own tags)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        given = _changed(self)
        if self.mix is not None:
            extra = sorted(given - {"mix", "max_requests", "prompt_scale", "output_scale",
                                    "warmup_s"})
            if extra:
                raise ValueError(
                    f"a workload with mix may only also set max_requests, prompt_scale, "
                    f"output_scale and warmup_s; move "
                    f"{', '.join(extra)} into the sub-workloads"
                )
            if any(m.warmup_s for m in self.mix):
                raise ValueError("warmup_s applies to the whole workload: set it beside mix, "
                                 "not in a sub-workload")
            if any(m.arrival.concurrency is not None for m in self.mix):
                raise ValueError("arrival.concurrency (and closed loops) apply to a whole "
                                 "workload; a mix's sub-workloads cannot set it")
            return self
        replay, dist = self.arrival.process == "replay", self.lengths.dist
        if self.num_requests is not None and self.duration_s is not None:
            raise ValueError("give num_requests or duration_s, not both")
        counted = self.num_requests is not None or self.duration_s is not None
        if self.trace is None:
            needs = [k for k in ("window_s", "spread_s", "rate_scale") if k in given]
            needs += ["format"] if self.format != "auto" else []
            if needs:
                raise ValueError(f"{', '.join(needs)} needs a trace file")
            if replay:
                raise ValueError(
                    "without a trace, set arrival.process to poisson, gamma or "
                    "constant (replay needs a trace file)"
                )
            if dist in ("trace", "resample"):
                raise ValueError(
                    f"lengths dist {dist!r} needs a trace file; use lognormal, "
                    "fixed, sharegpt_like or azure_conv_like"
                )
        if replay and counted:
            raise ValueError(
                "num_requests / duration_s apply to generated arrivals; a replay "
                "takes its count from the trace (use window_s or max_requests)"
            )
        if not replay and self.rate_scale != 1.0:
            raise ValueError(
                "rate_scale speeds up a replay; for generated arrivals set arrival.rate"
            )
        if self.arrival.process == "closed" and not counted and dist != "trace":
            raise ValueError("a closed loop needs num_requests (requests to send)")
        if self.arrival.process == "closed" and self.duration_s is not None:
            raise ValueError("a closed loop takes num_requests (or one per trace row), not "
                             "duration_s")
        if self.spread_s and self.format not in ("auto", "mooncake"):
            raise ValueError("spread_s applies only to the mooncake format")
        if self.window_s is not None and not 0 <= self.window_s[0] < self.window_s[1]:
            raise ValueError("window_s must be [start, end) seconds with 0 <= start < end")
        if self.window_s is not None and self.window_s[1] > MAX_TIME_S:
            raise ValueError(f"window_s ends after {MAX_TIME_S:g} s ({TIME['why']})")
        expected = (self.arrival.rate or 0) * (self.duration_s or 0)
        if expected > MAX_REQUESTS:
            raise ValueError(
                f"arrival.rate x duration_s = {expected:,.0f} requests, more than "
                f"{MAX_REQUESTS:,} ({REQ['why']}); shorten duration_s or lower the rate")
        return self


    @property
    def generated_duration_s(self) -> float | None:
        """Seconds of generated arrivals: duration_s, or the default (traces.sizing) when
        the workload gives no count; None when a count or the trace's rows size it."""
        if self.duration_s is not None or self.num_requests is not None \
                or self.arrival.rate is None:
            return self.duration_s
        if self.lengths.dist == "trace" or self.arrival.process == "replay":
            return None  # one request per trace row
        return default_duration_s(self.arrival.rate)


def validated(model: type[M], value: object, where: str) -> M:
    """`value` as a `model` instance; a ValidationError becomes a one-line TraceError."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(part) for part in err["loc"])
        raise TraceError(f"{where}: {loc + ': ' if loc else ''}{err['msg']}") from None
