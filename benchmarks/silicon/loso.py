"""The leave-one-system-out figures of the values chosen on the silicon rows.

The values of the cost model chosen on these rows (KNOBS), each the candidate with the least
median abs error of one metric over the rows that read it:

- ``frontend_us``: the API server's time per prompt token (the shipped profiles'
  ``frontend_us_per_token``, calibrate/aiconfigurator.py FRONTEND_US_PER_TOKEN), on TTFT,
  over the rows measured through vllm serve's Python frontend (the rows of another
  frontend, ``Protocol.ingress_per_token_us`` set: NVIDIA Dynamo's Rust one, do not read
  it);
- ``moe_reach``: the fraction of the experts independent routing reaches beyond
  aiconfigurator's power-law draw that a step's MoE layers are priced for
  (sim/cost/moe_routing.py MOE_REACH), on TPOT, over the mixture-of-experts rows;
- ``eager_ms``: the host's launch time per dense block of a step run without a CUDA graph
  on Blackwell (the B200 and B300 profiles' ``host_overhead.eager_per_layer_ms``, 0.8,
  aiconfigurator-core 0.12.0's own figure), on TTFT over the dense models' Blackwell rows
  (B200's only: held out, no other system's rows read it and it keeps the shipped value);
- ``eager_ms_hopper``: the same on Hopper (the H100 and H200 profiles', 0.4), over the
  dense models' Hopper rows. The same InferenceMAX Llama-3.1-70B sweep measured a 1k prompt's
  TTFT flat in TP on B200 (91-125 ms at C 4, TP 2-8: launch-bound) and falling with TP on
  Hopper (H100 121 / 81 / 70 ms at TP 2 / 4 / 8): Hopper's vLLM launches a block faster;
- ``eager_moe_ms``: the same for a block with a fused-MoE layer
  (``host_overhead.eager_moe_per_layer_ms``, 1.2), on TTFT over the mixture-of-experts rows.
  One figure for both blocks picked the grid's top (1.0 of 0.4-1.0) because the MoE rows'
  prefill wanted more than the dense rows'; apart, each has its minimum inside its grid
  (NOTES.md, 2026-12-06 fifth session).

Here each system is held out in turn: the value is chosen again on the other systems' rows
alone (same rule), and the held-out system's rows are judged at that value, beside their
figures at the shipped one (in-sample). Every other parameter of the cost model comes from
NVIDIA's kernel tables or named sources, not from these rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from benchmarks.silicon.rows import MODELS, Protocol, Row, protocol

METRICS = ("ttft", "tpot")


@dataclasses.dataclass(frozen=True)
class Knob:
    """One value chosen on the rows: its candidates, the metric it is chosen on, which
    rows read it and how a row is replayed at a candidate."""

    name: str
    what: str
    candidates: tuple[float, ...]
    metric: str
    depends: Callable[[Row], bool]
    at: Callable[[Row, float], tuple[Protocol, tuple[str, ...]]]
    shipped: Callable[[], float]


def _frontend_at(row: Row, us: float):
    return dataclasses.replace(protocol(row), ingress_per_token_us=us), ()


def _cost_at(param: str) -> Callable[[Row, float], tuple[Protocol, tuple[str, ...]]]:
    """A row replayed with the fitted cost model's PARAM at a candidate."""
    return lambda row, v: (protocol(row), ("cost.name=fitted", f"cost.{param}={v:g}"))


def _hopper(row: Row) -> bool:
    return row.system in ("h100_sxm", "h200_sxm")


def _has_experts(row: Row) -> bool:
    from sim.catalog import get_model

    return bool(get_model(MODELS[row.model_path][row.precision][0]).num_experts)


def _shipped_frontend() -> float:
    from calibrate.aiconfigurator import FRONTEND_US_PER_TOKEN

    return FRONTEND_US_PER_TOKEN


def _shipped_host(gpu: str, field: str) -> Callable[[], float]:
    """FIELD of a shipped GPU profile's host figures (host_overhead), read when called."""
    def read() -> float:
        from sim.cost.profile.model_file import load_model_file, shipped_profiles

        return getattr(load_model_file(shipped_profiles()[f"{gpu}/vllm"]).host_overhead, field)
    return read


def _shipped_reach() -> float:
    from sim.cost.moe_routing import MOE_REACH

    return MOE_REACH


KNOBS = {k.name: k for k in (
    Knob("frontend_us", "API server us per prompt token", (0.0, 8.0, 10.0, 12.0, 14.0, 16.0),
         "ttft", lambda r: protocol(r).ingress_per_token_us is None, _frontend_at,
         _shipped_frontend),
    Knob("moe_reach", "MoE reach (fraction of the reach gap priced)",
         (0.0, 0.25, 0.5, 0.75, 1.0), "tpot", _has_experts, _cost_at("moe_reach"),
         _shipped_reach),
    Knob("eager_ms", "host launch time per dense block run eager, Blackwell (ms)",
         (0.4, 0.6, 0.8, 1.0), "ttft", lambda r: not _has_experts(r) and not _hopper(r),
         _cost_at("eager_per_layer_ms"), _shipped_host("b200", "eager_per_layer_ms")),
    Knob("eager_ms_hopper", "host launch time per dense block run eager, Hopper (ms)",
         (0.4, 0.6, 0.8, 1.0), "ttft", lambda r: not _has_experts(r) and _hopper(r),
         _cost_at("eager_per_layer_ms"), _shipped_host("h100-sxm", "eager_per_layer_ms")),
    Knob("eager_moe_ms", "host launch time per MoE block of a step run eager (ms)",
         (0.8, 1.0, 1.2, 1.4, 1.6), "ttft", _has_experts, _cost_at("eager_moe_per_layer_ms"),
         _shipped_host("h100-sxm", "eager_moe_per_layer_ms")),
)}


def _median_abs(e: pd.Series) -> float:
    return float(np.median(np.abs(e))) if len(e) else float("nan")


def choose(by_value: dict[float, pd.DataFrame], keep, metric: str = "ttft",
           default: float | None = None) -> float:
    """The candidate with the least METRIC median abs error over the rows ``keep`` selects
    (ties: the smaller value); ``default`` where no row is selected."""
    scores = {v: _median_abs(df.loc[keep(df), f"{metric}_err_pct"])
              for v, df in by_value.items()}
    if default is not None and all(np.isnan(x) for x in scores.values()):
        return default
    return min(sorted(scores), key=lambda v: scores[v])


def table(by_value: dict[float, pd.DataFrame], shipped: float,
          metric: str = "ttft") -> pd.DataFrame:
    """Per held-out system (all its rows, and its MoE rows): the value chosen on the other
    systems' rows that read it (METRIC), and the held-out rows' TTFT / TPOT median and p90
    abs error at that value and at the shipped one. ``by_value``: the error frame
    (report.errors) of every row at each candidate, with boolean ``moe`` (the row's model
    has experts) and ``depends`` (the row reads the value) columns."""
    out = []
    first = next(iter(by_value.values()))
    for system in sorted(first["system"].unique()):
        pick = choose(by_value, lambda df, s=system: (df["system"] != s) & df["depends"],
                      metric, default=shipped)
        for group, keep in (("system", lambda df, s=system: df["system"] == s),
                            ("moe", lambda df, s=system: (df["system"] == s) & df["moe"])):
            held, ins = by_value[pick], by_value[shipped]
            row = {"group": f"{group} {system}", "rows": int(keep(held).sum()),
                   "chosen": pick, "shipped": shipped}
            if not row["rows"]:
                continue
            for m in METRICS:
                for tag, df in (("loso", held), ("in_sample", ins)):
                    e = np.abs(df.loc[keep(df), f"{m}_err_pct"].to_numpy())
                    row[f"{m}_median_{tag}"] = float(np.median(e))
                    row[f"{m}_p90_{tag}"] = float(np.percentile(e, 90))
            out.append(row)
    return pd.DataFrame(out)


def scores(by_value: dict[float, pd.DataFrame]) -> pd.DataFrame:
    """Per candidate: TTFT / TPOT median abs error over every row and over the rows that
    read the value (``depends`` column), the in-sample choice's own evidence."""
    out = []
    for v, df in sorted(by_value.items()):
        mine = df[df["depends"]]
        out.append({"value": v, "rows": len(df),
                    **{f"{m}_median": _median_abs(df[f"{m}_err_pct"]) for m in METRICS},
                    "depends_rows": len(mine),
                    **{f"depends_{m}_median": _median_abs(mine[f"{m}_err_pct"])
                       for m in METRICS}})
    return pd.DataFrame(out)


def format_table(t: pd.DataFrame) -> str:
    head = (f"{'held out':<22}{'n':>6}{'value':>6}  {'TTFT med':>9}{'p90':>7}  {'TPOT med':>9}"
            f"{'p90':>7}   (leave-one-system-out; in-sample at the shipped value in [])")
    lines = [head]
    for r in t.itertuples(index=False):
        lines.append(
            f"{r.group:<22}{r.rows:>6}{r.chosen:>6g}  "
            f"{r.ttft_median_loso:>5.1f} [{r.ttft_median_in_sample:4.1f}]"
            f"{r.ttft_p90_loso:>6.1f} [{r.ttft_p90_in_sample:5.1f}]  "
            f"{r.tpot_median_loso:>5.1f} [{r.tpot_median_in_sample:4.1f}]"
            f"{r.tpot_p90_loso:>6.1f} [{r.tpot_p90_in_sample:5.1f}]")
    return "\n".join(lines)
