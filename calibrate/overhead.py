"""The per-step host cost of the shipped GPU profiles, fitted to published measurements.

aiconfigurator's tables time kernels alone. A served step also spends time the kernels do
not: the scheduler and input preparation, launch gaps between kernels (vLLM's piecewise
CUDA graphs run attention outside the graph, once per block), and, with tensor
parallelism, broadcasting the step to the worker ranks and waiting for the slowest. No step
logs of a GPU engine exist to fit it from, so it is fitted to published end-to-end figures
(calibrate/published.py): for each, the time servesim's kernels leave unexplained, per
step,

    residual = (measured - servesim with host cost 0) / steps

is fitted by non-negative least squares to

    host_ms = base + per_layer * layers + per_tp * (tp - 1)

Only points measured with synchronous scheduling are fitted: a server that schedules the
next step while the GPU runs this one (vLLM's ``--async-scheduling``) hides the host cost
under the kernels, so its points say nothing of it (they are listed and checked as
max(kernels, host) per step). The latency benchmark alone cannot separate the per-layer
from the per-tp term (its two models differ in both); NVIDIA's synchronous tp sweep of one
model (Qwen3-32B bf16 on H100, tp 2 / 4 / 8, same layers) can. Points of the GPU under
test can be held out (``holdout``) to check the fit out of sample.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from calibrate.published import (
    LATENCY_BENCH,
    Published,
    silicon_points,
    simulate,
    synchronous_points,
)
from sim.cost.profile.model_file import HostOverhead, OverheadPoint

SOURCE = ("non-negative least squares on (measured - servesim kernels) / steps of {n} "
          "published vLLM measurements made with synchronous scheduling: the vLLM CI latency "
          "benchmark (buildkite.com/vllm/performance-benchmark builds 9555, 9513, 9523: "
          "Llama-3-8B tp1 and Llama-3-70B tp4 on H100, H200, A100) and NVIDIA's tp sweep of "
          "Qwen3-32B bf16 on H100 (aiconfigurator-core 0.12.0 silicon_sample.csv, "
          "aic-auto-gap-analysis, vLLM 0.12.0, 1024 in / 1024 out, concurrency 8, tp 2/4/8); "
          "the InferenceMAX Llama-3.1-70B fp8 rows (H100, H200, B200, --async-scheduling: "
          "the host hides under the kernels) are checked, not fitted")


@dataclass(frozen=True)
class Residual:
    point: Published
    kernels_ms: float  # servesim with host cost 0 (ms of the point's metric)

    @property
    def per_step_ms(self) -> float:
        """Unexplained time per engine step (ms)."""
        return (self.point.measured_ms - self.kernels_ms) / self.point.steps


def all_points() -> list[Published]:
    """Every published point: the latency benchmark and the silicon rows."""
    return [*LATENCY_BENCH, *synchronous_points(), *silicon_points()]


def is_fit_point(p: Published) -> bool:
    """The fit set: the points measured with synchronous scheduling, whose steps show the
    host cost."""
    return not p.async_scheduling


def residuals(points: list[Published], profiles: dict[str, str]) -> list[Residual]:
    """servesim's kernel-only figure for every point whose GPU has a profile that prices
    it (``profiles``: GPU -> profile name or model YAML; a profile without the point's
    dtype tables skips it)."""
    from traces.errors import InputError

    out = []
    for p in points:
        if p.gpu not in profiles:
            continue
        cost = {"name": "fitted", "profile": str(profiles[p.gpu]), "step_overhead_ms": 0.0}
        try:
            out.append(Residual(p, simulate(p, cost)))
        except InputError:  # e.g. fp8 weights on a profile whose fp8 table missed the bar
            continue
    return out


def fit_overhead(profiles: dict[str, str]) -> HostOverhead:
    """The host model fitted to the fit set, every published point listed."""
    res = residuals(all_points(), profiles)
    return fit(res, {r.point.name for r in res if is_fit_point(r.point)})


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a few columns: the best of the unconstrained fits over
    every subset of columns whose coefficients are all >= 0 (exact for few columns)."""
    best, best_err = np.zeros(a.shape[1]), float(b @ b)
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            c, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if (c >= 0).all():
                err = float(((a[:, cols] @ c - b) ** 2).sum())
                if err < best_err:
                    best, best_err = np.zeros(a.shape[1]), err
                    best[list(cols)] = c
    return best


def fit(res: list[Residual], used: set[str] | None = None) -> HostOverhead:
    """base + per-layer + per-tp (ms, each >= 0) fitted to the residuals named in ``used``
    (default: all); every residual is listed in the result, marked used or not."""
    from sim.catalog import get_model

    names = used if used is not None else {r.point.name for r in res}
    fit_rows = [r for r in res if r.point.name in names]
    a = np.array([[1.0, get_model(r.point.model).num_layers, r.point.tp - 1]
                  for r in fit_rows]).reshape(-1, 3)
    b = np.array([r.per_step_ms for r in fit_rows])
    coef = nnls(a, b) if len(b) else np.zeros(3)
    points = [OverheadPoint(name=r.point.name, layers=get_model(r.point.model).num_layers,
                            tp=r.point.tp, steps=r.point.steps,
                            measured_ms=r.point.measured_ms,
                            kernels_ms=round(r.kernels_ms, 3), used=r.point.name in names,
                            async_scheduling=r.point.async_scheduling)
              for r in res]
    return HostOverhead(base_ms=round(float(coef[0]), 4), per_layer_ms=round(float(coef[1]), 5),
                        per_tp_ms=round(float(coef[2]), 4),
                        source=SOURCE.format(n=len(fit_rows)),
                        points=points)


def predicted_ms(h: HostOverhead, pt: OverheadPoint) -> float:
    """servesim's figure for a point with host cost ``h`` (ms): kernels + steps x host, or
    under async scheduling the longer of kernels and host in each step."""
    host = pt.steps * h.ms(pt.layers, pt.tp)
    return max(pt.kernels_ms, host) if pt.async_scheduling else pt.kernels_ms + host
