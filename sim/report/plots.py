"""The plots of one run.

* ``ttft_cdf`` / ``latency_cdf``: a latency distribution (per lane when there are lanes)
  with its p50/p90/p95/p99 marked and the SLO budget drawn.
* ``kv_vs_waiting``: KV blocks used / total next to requests waiting on KV memory (and, apart,
  all waiting requests when others waited), over time, with preemptions marked: the seed
  article's practical check. Low occupancy with a growing
  queue points at fragmentation or over-conservative reservations; pegged occupancy with
  a growing queue (and preemptions) means the KV cache is the bottleneck.

Titles carry what defines the run (callers pass the overrides); count axes are integers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: no global backend state to disturb
from matplotlib.ticker import FuncFormatter, MaxNLocator

MAX_POINTS = 2000  # time bins for long runs: the plot stays readable and small
PERCENTILES = (50, 90, 95, 99)
LABEL_AT = {50: (5, -10), 90: (5, -10), 95: (-8, 4), 99: (5, 4)}  # text offsets (points)
PLAIN = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")  # 500, not 5x10^2


def wrapped(title: str, width: int = 72) -> str:
    """A title broken into lines of at most ``width`` characters, so a long one (a sweep's
    --set list) is not cut at the figure's edge."""
    import textwrap

    return "\n".join(textwrap.wrap(title, width)) or title


def plain_log_axis(axis) -> None:
    """Numbers as people write them on a log axis (10, 100, 1,000)."""
    axis.set_major_formatter(PLAIN)


def save(fig: Figure, path: Path | None, formats: tuple[str, ...] = ()) -> list[Path]:
    """Save ``fig`` at ``path`` and beside it in each of ``formats`` (e.g. ``("svg",)``);
    ``path`` None only lays it out (a notebook displays the returned figure)."""
    fig.tight_layout()
    if path is None:
        return []
    from sim.report.outfile import write_file

    path = Path(path)
    out = [path, *(path.with_suffix(f".{f}") for f in formats)]
    for p in out:
        with write_file(p, "plot", own_folder=True) as tmp:  # atomic; never a user's file
            fig.savefig(tmp, dpi=110, format=p.suffix.lstrip(".") or "png")
    return out


def _mark_percentiles(ax, v: np.ndarray, color: str, row: int = 0) -> None:
    """Percentile dots and labels; ``row`` (the lane's index) shifts the labels down a line
    each, so two lanes' labels do not print over each other."""
    for p in PERCENTILES:
        x = float(np.percentile(v, p))
        ax.plot([x], [p / 100], marker="o", ms=3, color=color)
        dx, dy = LABEL_AT[p]
        ax.annotate(f"p{p} {x:,.0f}", (x, p / 100), xytext=(dx, dy - 9 * row),
                    textcoords="offset points", fontsize=7, color=color,
                    ha="right" if dx < 0 else "left")


def _latency_xlim(values: list[np.ndarray], slo_ms: float | None) -> tuple[float, float]:
    """Log-axis limits around the data (and the budget): no decades of empty axis left of
    the fastest request, room right of the slowest for its p99 label (ms)."""
    lo = min(float(v[0]) for v in values)
    hi = max(max(float(v[-1]) for v in values), slo_ms or 0.0)
    return lo / 1.25, max(hi, lo * 1.01) * 1.6


CDF_POINTS = 100_000  # a CDF of more requests is drawn through this many of them


def _drawn_points(n: int) -> slice | np.ndarray:
    """The points of an n-request CDF that are drawn: all of them up to CDF_POINTS, else
    CDF_POINTS evenly spaced ranks, the first and the last included."""
    if n <= CDF_POINTS:
        return slice(None)
    return np.unique(np.linspace(0, n - 1, CDF_POINTS).round().astype(np.int64))


def latency_cdf(requests: pd.DataFrame, column: str, path: Path | None, *, title: str = "",
                what: str = "latency", slo_ms: float | None = None,
                formats: tuple[str, ...] = ()) -> Figure:
    """CDF of ``requests[column]`` (seconds) in ms, per lane, percentiles and budget marked."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    colors = iter(("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"))
    lanes = requests["lane"].nunique() > 1
    drawn = []
    for lane, grp in requests.groupby("lane") if lanes else [(None, requests)]:
        v = grp[column].to_numpy(dtype=np.float64)
        v = v[~np.isnan(v)]  # a copy, scaled and sorted in place (ten million requests)
        v *= 1e3
        v.sort()
        if len(v):
            c = next(colors, "tab:gray")
            at = _drawn_points(len(v))
            y = (np.arange(len(v))[at] + 1) / len(v)
            ax.plot(v[at], y, color=c,
                    label=f"lane {lane}" if lanes else f"{what} ({len(v):,} requests)")
            _mark_percentiles(ax, v, c, row=len(drawn))
            drawn.append(v)
    if slo_ms:
        ax.axvline(slo_ms, color="tab:red", ls="--", lw=1, label=f"SLO {slo_ms:g} ms")
    ax.set_xlabel(f"{what} (ms)")
    ax.set_ylabel("fraction of requests")
    if drawn and min(float(v[0]) for v in drawn) > 0:
        ax.set_xscale("log")
        ax.set_xlim(*_latency_xlim(drawn, slo_ms))
    else:  # zero latencies (or none): a log axis cannot hold them
        ax.set_xscale("symlog", linthresh=10)
    plain_log_axis(ax.xaxis)
    ax.set_ylim(0, 1.06)  # room above the p99 dot for its label
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(wrapped(title or what), fontsize=10)
    save(fig, path, formats)
    return fig


def ttft_cdf(requests: pd.DataFrame, path: Path | None, title: str = "",
             slo_ms: float | None = None, formats: tuple[str, ...] = ()) -> Figure:
    return latency_cdf(requests, "ttft_s", path, title=title or "Time to first token",
                       what="TTFT", slo_ms=slo_ms, formats=formats)


KV_WAIT = "kv_memory"  # steps' ``blocked`` value: admission stopped for lack of KV blocks


def waiting_on_kv(steps: pd.DataFrame) -> pd.Series | None:
    """Requests waiting at each step while admission was stopped by KV memory (the
    summary's ``waiting.mean_waiting_on_kv_memory`` per step), or None when the table says
    nothing of why (a recorded vLLM step log)."""
    if "num_waiting_on_kv_memory" in steps:
        return steps["num_waiting_on_kv_memory"]
    if "blocked" in steps:
        return steps["num_waiting"].where(steps["blocked"] == KV_WAIT, 0)
    return None


def _binned(steps: pd.DataFrame) -> pd.DataFrame:
    on_kv = waiting_on_kv(steps)
    steps = steps.assign(waiting=steps["num_waiting"] if on_kv is None else on_kv,
                         all_waiting=steps["num_waiting"])
    if len(steps) <= MAX_POINTS:
        return steps
    return _per_bin(steps.groupby(pd.cut(steps["start_s"], MAX_POINTS, labels=False)))


def _per_bin(g) -> pd.DataFrame:
    """One row per bin of grouped steps (or of grouped bin rows): the first start, the
    peak KV use and queues, the preemptions."""
    return pd.DataFrame({"start_s": g["start_s"].first(),
                         "kv_used_fraction": g["kv_used_fraction"].max(),
                         "waiting": g["waiting"].max(),
                         "all_waiting": g["all_waiting"].max(),
                         "num_preempted": g["num_preempted"].sum()})


class KvSeries:
    """What ``kv_vs_waiting`` draws: the (binned) series and the peaks, from a steps table
    (``of_frame``) or from a streamed run's row groups (``of_chunks``)."""

    def __init__(self, binned: pd.DataFrame | None, has_reason: bool, peak_all: int,
                 peak_kv: int, others: bool, preempted: int):
        self.binned, self.has_reason, self.peak_all = binned, has_reason, peak_all
        self.peak_kv, self.others, self.preempted = peak_kv, others, preempted

    @classmethod
    def of_frame(cls, steps: pd.DataFrame) -> KvSeries:
        on_kv = waiting_on_kv(steps)
        if not len(steps):
            return cls(None, on_kv is not None, 0, 0, False, 0)
        return cls(_binned(steps), on_kv is not None, int(steps["num_waiting"].max()),
                   int(on_kv.max()) if on_kv is not None else 0,
                   on_kv is not None and bool((steps["num_waiting"] > on_kv).any()),
                   int(steps["num_preempted"].sum()))

    @classmethod
    def of_chunks(cls, chunks, first_s: float, last_s: float) -> KvSeries:
        """A streamed steps.parquet's rows (``chunks()``: dicts of its columns), binned as
        ``_binned`` bins (pd.cut's equal bins from the first to the last start)."""
        if last_s > first_s:
            edges = np.linspace(first_s, last_s, MAX_POINTS + 1, endpoint=True)
            edges[0] -= (last_s - first_s) * 0.001
        else:
            edges = np.array([first_s - 0.001, first_s + 0.001])
        parts, peak_all, peak_kv, others, pre = [], 0, 0, False, 0
        for c in chunks():
            d = pd.DataFrame(c)
            on_kv = d["num_waiting_on_kv_memory"]
            peak_all = max(peak_all, int(d["num_waiting"].max()))
            peak_kv = max(peak_kv, int(on_kv.max()))
            others = others or bool((d["num_waiting"] > on_kv).any())
            pre += int(d["num_preempted"].sum())
            d = d.assign(waiting=on_kv, all_waiting=d["num_waiting"])
            parts.append(_per_bin(d.groupby(pd.cut(d["start_s"], edges, labels=False))))
        if not parts:
            return cls(None, True, 0, 0, False, 0)
        binned = _per_bin(pd.concat(parts).groupby(level=0))
        return cls(binned, True, peak_all, peak_kv, others, pre)


STREAM_COLUMNS = ["start_s", "kv_used_fraction", "num_waiting", "num_waiting_on_kv_memory",
                  "num_preempted"]  # what KvSeries.of_chunks reads of steps.parquet


def kv_vs_waiting(steps: pd.DataFrame | KvSeries, path: Path | None, title: str = "",
                  formats: tuple[str, ...] = ()) -> Figure:
    """KV blocks used next to the requests waiting on KV memory (admission stopped for lack
    of blocks), the secondary signal of a memory-bound engine; when others waited too (for
    a seat, max_num_seqs, or the token budget), all waiting requests are drawn apart, dotted
    grey, so a queue that is not the KV cache's reads as such. ``steps``: a steps table, or
    a streamed run's ``KvSeries``."""
    k = steps if isinstance(steps, KvSeries) else KvSeries.of_frame(steps)
    fig = Figure(figsize=(9, 4.2))
    ax = fig.subplots()
    ax2 = ax.twinx()
    if k.binned is not None:
        b = k.binned
        ax.plot(b["start_s"], 100 * b["kv_used_fraction"], color="tab:blue", lw=1,
                label="KV blocks used")
        peak_all = k.peak_all
        label = ("requests waiting (all: the log gives no reason)" if not k.has_reason else
                 f"waiting on KV memory (peak {k.peak_kv:,}; all waiting peak "
                 f"{peak_all:,})")
        ax2.plot(b["start_s"], b["waiting"], color="tab:red", lw=1, label=label)
        top = b["waiting"]
        if k.others:  # others waited too
            ax2.plot(b["start_s"], b["all_waiting"], color="0.55", lw=0.8, ls=":",
                     label=f"all waiting (peak {peak_all:,}: a seat or the token budget)")
            top = b["all_waiting"]
        ax2.set_ylim(0, max(1.0, 1.05 * float(top.max())))
        pre = b[b["num_preempted"] > 0]
        if len(pre):
            ax.plot(pre["start_s"], np.full(len(pre), 102.0), "|", color="black", ms=8,
                    label=f"preemptions ({k.preempted:,})")
        handles = ax.get_lines() + ax2.get_lines()
        ax.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    ax2.set_ylabel("requests waiting" if not k.has_reason else "requests waiting on KV memory",
                   color="tab:red")
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 105)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("KV blocks used (%)", color="tab:blue")
    ax.set_title(wrapped(title or "KV occupancy vs requests waiting on KV memory"),
                 fontsize=10)
    save(fig, path, formats)
    return fig
