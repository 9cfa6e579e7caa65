"""The comparison PNG: per-request TTFT and per-step duration, one run against the other.

Three panels: TTFT of each matched request (B against A, the diagonal is agreement);
step-duration quantiles of B against A's (a Q-Q plot: agreement whatever the step counts);
step duration over time for both. Uses matplotlib's Figure (no pyplot).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.report.compare import Comparison


def _diagonal(ax, x: np.ndarray, y: np.ndarray) -> None:
    both = np.concatenate([x, y])
    both = both[np.isfinite(both) & (both > 0)]
    if len(both):
        lo, hi = both.min(), both.max()
        ax.plot([lo, hi], [lo, hi], color="0.6", lw=1, ls="--", label="B = A")


def plot_comparison(c: Comparison, path: str | Path) -> Path:
    """Save ``comparison_figure(c)`` as a PNG at ``path``."""
    from sim.report.outfile import write_file

    fig = comparison_figure(c)
    with write_file(path, "--plot") as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return Path(path)


def comparison_figure(c: Comparison):
    """The three panels (module docstring) as a matplotlib Figure."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig = Figure(figsize=(15, 4.6), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    a, b = c.a.name, c.b.name
    if c.pairs is not None and "ttft_s_a" in c.pairs:
        x, y = c.pairs["ttft_s_a"].to_numpy() * 1e3, c.pairs["ttft_s_b"].to_numpy() * 1e3
        ax1.scatter(x, y, s=8, alpha=0.6)
        _diagonal(ax1, x, y)
        for axis in (ax1.xaxis, ax1.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax1.set_xscale("log")
        ax1.set_yscale("log")
        ax1.legend(loc="upper left")
    else:
        ax1.text(0.5, 0.5, "request ids or lengths differ:\nno per-request matching",
                 ha="center",
                 va="center", transform=ax1.transAxes)
    how = ", the same rows scaled" if c.rows_scaled else ""
    ax1.set(title=f"TTFT per request ({c.matched} matched{how})", xlabel=f"A: {a} (ms)",
            ylabel=f"B: {b} (ms)")
    da = np.sort(c.a.steps["duration_s"].to_numpy(np.float64) * 1e3)
    db = np.sort(c.b.steps["duration_s"].to_numpy(np.float64) * 1e3)
    if len(da) and len(db):
        q = np.linspace(0, 100, 201)
        qa, qb = np.percentile(da, q), np.percentile(db, q)
        ax2.plot(qa, qb, marker=".", ms=3, lw=1)
        _diagonal(ax2, qa, qb)
        ax2.legend(loc="upper left")
    ax2.set(title=f"step duration quantiles ({len(da)} vs {len(db)} steps)",
            xlabel=f"A: {a} (ms)", ylabel=f"B: {b} (ms)")
    for v, label in ((c.a, f"A: {a}"), (c.b, f"B: {b}")):
        s = v.steps
        ax3.plot(s["start_s"], s["duration_s"] * 1e3, lw=0.6, alpha=0.8, label=label)
    ax3.set(title="step duration over time", xlabel="step start (s)", ylabel="duration (ms)")
    ax3.legend(loc="upper right")
    return fig

