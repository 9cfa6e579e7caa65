"""What the plots promise: budgets drawn, unstable points marked, Pareto front, preemptions
marked, integer count axes, percentile ticks and the SLO line, titles with overrides."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.plan.slo import parse_slo
from sim.report import plots, sweep_plots

from .helpers import TINY, cli


def points() -> pd.DataFrame:
    rows = []
    for cfg, scale in (("max_num_seqs=8", 1.0), ("max_num_seqs=64", 0.6)):
        for load in (4.0, 8.0, 12.0):
            for seed in (0, 1):
                rows.append({"config_id": cfg, "config": cfg, "load": load, "seed": seed,
                             "latency_ms.ttft.p95": 100 * load * scale + seed,
                             "latency_ms.tpot.p95": 5 * load * scale,
                             "engine_sustains": load < 12 or scale < 1,
                             "output_token_per_s_per_gpu": 100 * load,
                             "user_output_token_per_s": 1000 / (5 * load * scale)})
    return pd.DataFrame(rows)


def test_rate_curves(tmp_path):
    fig = sweep_plots.rate_curves(points(), parse_slo("ttft_p95=500ms,tpot_p95=50ms"),
                                  tmp_path / "r.png", x_col="load", x_label="req/s",
                                  title="t [max_num_batched_tokens=2048]", formats=("svg",))
    assert (tmp_path / "r.png").exists() and (tmp_path / "r.svg").exists()
    ttft = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ttft.get_lines()}
    assert list(lines["max_num_seqs=8"].get_ydata()) == [401, 801, 1201]  # worst seed
    assert list(lines["budget 500 ms"].get_ydata()) == [500, 500]
    marked = lines["engine cannot keep up"]
    assert list(marked.get_xdata()) == [12.0]
    assert fig._suptitle.get_text() == "t [max_num_batched_tokens=2048]"


def test_pareto_front_keeps_only_undominated_points():
    df = pd.DataFrame({"x": [1, 2, 3, 2.5], "y": [10, 8, 5, 4]})
    assert sweep_plots.pareto(df, "x", "y")[["x", "y"]].values.tolist() == [
        [1, 10], [2, 8], [3, 5]]


def steps() -> pd.DataFrame:
    n = 50
    return pd.DataFrame({"start_s": np.arange(n) * 0.1, "kv_used_fraction": np.linspace(0, 1, n),
                         "num_waiting": np.arange(n) % 3,
                         "num_preempted": np.where(np.arange(n) == 40, 2, 0)})


def test_kv_timeline_marks_preemptions_and_counts_in_integers(tmp_path):
    fig = plots.kv_vs_waiting(steps(), tmp_path / "k.png", "default: max_num_seqs=64 12 req/s")
    kv, waiting = fig.axes
    pre = [ln for ln in kv.get_lines() if ln.get_label().startswith("preemptions")]
    assert pre[0].get_label() == "preemptions (2)" and list(pre[0].get_xdata()) == [4.0]
    ticks = waiting.get_yticks()
    assert np.allclose(ticks, np.round(ticks))
    assert kv.get_title() == "default: max_num_seqs=64 12 req/s"


def test_kv_timeline_draws_only_the_requests_waiting_on_kv_memory(tmp_path):
    st = steps().assign(num_waiting=[5] * 50,
                        blocked=(["kv_memory"] * 10 + ["max_num_seqs"] * 30 + [""] * 10))
    fig = plots.kv_vs_waiting(st, tmp_path / "k.png")
    kv, waiting = fig.axes
    line, everyone = waiting.get_lines()
    assert list(line.get_ydata()) == [5] * 10 + [0] * 40  # the seat queue is not KV's
    assert line.get_label() == "waiting on KV memory (peak 5; all waiting peak 5)"
    # all waiting requests drawn apart: the seat queue reads as a queue that is not KV's
    assert list(everyone.get_ydata()) == [5] * 50 and everyone.get_linestyle() == ":"
    assert waiting.get_ylabel() == "requests waiting on KV memory"
    legend = [t.get_text() for t in kv.get_legend().get_texts()]
    assert legend == ["KV blocks used", "preemptions (2)",
                      "waiting on KV memory (peak 5; all waiting peak 5)",
                      "all waiting (peak 5: a seat or the token budget)"]
    only_kv = plots.kv_vs_waiting(st.assign(blocked="kv_memory"), None).axes[1]
    assert len(only_kv.get_lines()) == 1  # everyone waited on KV: one line
    # a recorded step log has no reason: all waiting, and the legend says so
    old = plots.kv_vs_waiting(steps(), None).axes[1].get_lines()[0]
    assert old.get_label() == "requests waiting (all: the log gives no reason)"


@pytest.mark.parametrize("sets, on_kv", [
    (("engine.max_num_seqs=8",), False),  # 8 seats: the queue waits for one, KV is roomy
    (("engine.num_gpu_blocks_override=60", "engine.max_model_len=256"), True),
])
def test_the_steps_table_counts_the_requests_waiting_on_kv_memory(tmp_path, sets, on_kv):
    """tiny.yaml at 20 req/s: both queue up to 150-200 requests; only the KV-starved run
    has them waiting on memory, and that is what the KV timeline draws."""
    out = tmp_path / "r"
    args = ["run", TINY, "--set", "workload.arrival.rate=20", "--out", out]
    for s in sets:
        args += ["--set", s]
    assert cli(*args) == 0
    st = pd.read_parquet(out / "steps.parquet")
    waiting = json.loads((out / "summary.json").read_text())["waiting"]
    assert st["num_waiting"].max() > 100
    expect = st["num_waiting"].where(st["blocked"] == "kv_memory", 0)
    assert st["num_waiting_on_kv_memory"].tolist() == expect.tolist()
    drawn = plots.kv_vs_waiting(st, None).axes[1].get_lines()[0].get_ydata()
    if on_kv:
        assert st["num_waiting_on_kv_memory"].max() == st["num_waiting"].max()
        assert waiting["mean_waiting_on_kv_memory"] > 0.99 * waiting["mean_waiting"]
        assert max(drawn) == st["num_waiting"].max()
    else:
        assert st["num_waiting_on_kv_memory"].max() == 0
        assert "mean_waiting_on_kv_memory" not in waiting and waiting["mean_waiting"] > 50
        assert max(drawn) == 0


def test_cdf_marks_percentiles_and_the_slo(tmp_path):
    req = pd.DataFrame({"lane": "default", "ttft_s": np.arange(1, 101) / 100})
    fig = plots.ttft_cdf(req, tmp_path / "c.png", slo_ms=500.0)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["p50 505", "p90 901", "p95 950", "p99 990"]
    assert "SLO 500 ms" in [ln.get_label() for ln in ax.get_lines()]


def test_cdf_axis_spans_the_data_and_the_budget(tmp_path):
    # 10..1000 ms and a 2,000 ms budget: a log axis from 10 / 1.25 to 2,000 x 1.6, so no
    # empty decades left of the fastest request and room for the p99 label on the right
    req = pd.DataFrame({"lane": "default", "ttft_s": np.linspace(0.01, 1.0, 100)})
    ax = plots.ttft_cdf(req, tmp_path / "c.png", slo_ms=2000.0).axes[0]
    assert ax.get_xscale() == "log"
    np.testing.assert_allclose(ax.get_xlim(), (8.0, 3200.0))


def test_two_lanes_label_their_percentiles_on_separate_rows(tmp_path):
    req = pd.DataFrame({"lane": ["a"] * 50 + ["b"] * 50,
                        "ttft_s": np.r_[np.linspace(0.01, 0.1, 50), np.linspace(0.011, 0.11, 50)]})
    ax = plots.ttft_cdf(req, tmp_path / "c.png").axes[0]
    offsets = {t.get_text().split()[0]: [] for t in ax.texts}
    for t in ax.texts:
        offsets[t.get_text().split()[0]].append(t.xyann[1])
    assert all(len(set(v)) == 2 for v in offsets.values())  # each percentile: two rows
    assert all(abs(v[0] - v[1]) == 9 for v in offsets.values())


def test_run_draws_the_ttft_budget_on_its_cdf(tmp_path):
    from matplotlib.image import imread

    from tests.capacity.helpers import TINY, cli

    out = tmp_path / "r"
    assert cli("run", TINY, "--out", out, "-q") == 0
    img = imread(out / "ttft_cdf.png")
    red = (img[..., 0] > 0.7) & (img[..., 1] < 0.4) & (img[..., 2] < 0.4)  # tab:red dashes
    assert red.sum() > 100


def test_a_long_frontier_title_is_wrapped_not_cut(tmp_path):
    from sim.report.plots import wrapped

    long = "capacity of llama-3-8b on h100-sxm, " + ", ".join(
        f"engine.max_num_seqs={n}" for n in (8, 16, 32, 64, 128, 256))
    lines = wrapped(long).split("\n")
    assert len(lines) == 3 and all(len(ln) <= 72 for ln in lines)
    assert " ".join(lines) == long
    assert wrapped("short") == "short"


def _drawn(fig):
    """The figure drawn on an Agg canvas: (renderer, figure box in pixels)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer(), fig.bbox


def _inside(box, outer) -> bool:
    return (box.x0 >= outer.x0 and box.x1 <= outer.x1 and box.y0 >= outer.y0
            and box.y1 <= outer.y1)


def test_two_close_lanes_labels_lie_inside_the_axes_and_apart(tmp_path):
    """Two lanes a few percent apart: eight percentile labels, none over another, none
    past the axes (the p99 label was clipped at the right edge)."""
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(np.log(0.03), 0.8, 1000), rng.lognormal(np.log(0.032), 0.8, 1000)
    fig = plots.ttft_cdf(pd.DataFrame({"lane": ["a"] * 1000 + ["b"] * 1000,
                                       "ttft_s": np.r_[a, b]}), tmp_path / "c.png",
                         slo_ms=500.0)
    renderer, _ = _drawn(fig)
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == 8
    assert all(_inside(b, ax.get_window_extent(renderer)) for b in boxes)
    assert not [(i, j) for i in range(8) for j in range(i + 1, 8) if boxes[i].overlaps(boxes[j])]


def test_a_long_frontier_title_lies_inside_the_figure(tmp_path):
    long = "capacity of llama-3-8b on h100-sxm [" + ", ".join(
        f"engine.max_num_seqs={n}" for n in (8, 16, 32, 64, 128, 256)) + "]"
    fig = sweep_plots.frontier_plot(points(), tmp_path / "f.png", title=long)
    renderer, figure = _drawn(fig)
    title = fig.axes[0].title
    assert title.get_text().replace("\n", " ") == long
    assert _inside(title.get_window_extent(renderer), figure)


def test_plot_refuses_a_broken_chosen_table_before_drawing_anything(tmp_path, capsys):
    # the chosen point's tables are read before any plot: a corrupt one is one line, exit 2,
    # and no plots folder half written
    out = tmp_path / "cap"
    assert cli("capacity", TINY, "--seeds", "1", "--tol", "20%", "-j", "1", "-q",
               "--no-plots", "--out", out) == 0
    capsys.readouterr()
    (out / "chosen" / "steps.parquet").write_text("garbage")
    assert cli("plot", out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "chosen/steps.parquet: not a readable parquet table" in err
    assert not (out / "plots").exists()
    points = pd.read_parquet(out / "points.parquet")
    points.iloc[0:0].to_parquet(out / "points.parquet")  # no rows: nothing to draw
    assert cli("plot", out) == 2
    assert "its points table has no rows" in capsys.readouterr().err
    assert not (out / "plots").exists()
