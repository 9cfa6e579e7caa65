"""`servesim compare A B`: a recorded engine run against its replay (requests matched by id),
two simulated configurations, and bad folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main
from sim.report.compare import compare
from sim.report.result_view import load_result

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "engine" / "runs" / "light-long-r1"
LINEAR = "{name: linear, base_ms: 10, prefill_token_ms: 0.5, decode_seq_ms: 1}"

pytestmark = pytest.mark.xdist_group("engine-runs")


def sim_run(tmp_path: Path, name: str, trace_rows, *sets: str) -> Path:
    trace = tmp_path / f"{name}.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": a, "prompt_len": p, "max_tokens": m})
                             + "\n" for a, p, m in trace_rows))
    out = tmp_path / name
    args = ["run", "--trace", str(trace), "--set", f"cost={LINEAR}", "-o", str(out), "-q",
            "--no-plots", *[x for s in sets for x in ("--set", s)]]
    assert main(args) == 0
    return out


def test_engine_run_against_its_replay(tmp_path, capsys):
    replay = tmp_path / "replay"
    assert main(["run", str(RUN / "scenario.yaml"), "-o", str(replay), "-q", "--no-plots"]) == 0
    capsys.readouterr()
    png, js = tmp_path / "c.png", tmp_path / "c.json"
    assert main(["compare", str(RUN), str(replay), "--plot", str(png), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    n = len(load_result(RUN).requests)
    assert f"{n} requests matched" in out and "TTFT mean ms" in out and "ITL p50" in out
    doc = json.loads(js.read_text())
    assert doc["matched"] == n and {r["metric"] for r in doc["per_request"]} >= {
        "TTFT", "TPOT", "E2EL", "ITL p50 (per request)"}
    steps = next(r for r in doc["summary"] if r["metric"] == "steps")
    assert steps["a"] == len(load_result(RUN).steps) and steps["b"] > 0
    assert png.stat().st_size > 10_000


def test_two_configurations_of_one_trace_match_by_id(tmp_path):
    rows = [(0.1 * i, 50 + 10 * i, 20) for i in range(20)]
    a = sim_run(tmp_path, "a", rows, "engine.max_num_seqs=4")
    b = sim_run(tmp_path, "b", rows, "engine.max_num_seqs=16")
    c = compare(load_result(a), load_result(b))
    assert c.matched == 20 and c.per_request is not None
    ttft = c.summary.set_index("metric").loc["TTFT mean ms"]
    assert ttft["b"] < ttft["a"] and ttft["error_pct"] < 0  # more seqs: less queueing


def test_different_traces_compare_by_summary_only(tmp_path, capsys):
    a = sim_run(tmp_path, "a", [(0.1 * i, 50, 20) for i in range(10)])
    b = sim_run(tmp_path, "b", [(0.1 * i, 80, 20) for i in range(4)])
    c = compare(load_result(a), load_result(b))
    assert c.per_request is None and c.pairs is None  # ids 0-3 shared, not the requests
    assert main(["compare", str(a), str(b), "--no-plot"]) == 0
    assert "request ids or lengths differ: not matched" in capsys.readouterr().out


def test_the_same_trace_rows_with_longer_prompts_match_by_id(tmp_path, capsys):
    """The planner's drift check: the same rows with prompts 2x longer are the same
    requests; they used to compare by summary only, the plot's left panel empty ("request
    ids differ")."""
    from sim.report.compare_plot import comparison_figure

    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": 0.1 * i, "prompt_len": 50 + 10 * i,
                                         "max_tokens": 20}) + "\n" for i in range(20)))
    outs = []
    for name, scale in (("a", 1), ("b", 2)):
        outs.append(tmp_path / name)
        assert main(["run", "--trace", str(trace), "--set", f"cost={LINEAR}", "-o",
                     str(outs[-1]), "-q", "--no-plots", "--set",
                     f"workload.prompt_scale={scale}"]) == 0
    c = compare(load_result(outs[0]), load_result(outs[1]))
    assert c.matched == 20 and c.rows_scaled and c.per_request is not None
    assert c.pairs["prompt_tokens_b"].tolist() == [2 * p for p in c.pairs["prompt_tokens_a"]]
    left = comparison_figure(c).axes[0]
    assert len(left.collections[0].get_offsets()) == 20  # one dot per request
    assert left.get_title() == "TTFT per request (20 matched, the same rows scaled)"
    assert not left.texts  # no "request ids differ" in the panel
    capsys.readouterr()
    assert main(["compare", str(outs[0]), str(outs[1]), "--no-plot"]) == 0
    assert "20 requests matched by id (the same workload rows, scaled)" in " ".join(
        capsys.readouterr().out.split())
    # another trace file numbering its rows the same way is not the same rows
    other = tmp_path / "u.jsonl"
    other.write_text(trace.read_text())
    assert main(["run", "--trace", str(other), "--set", f"cost={LINEAR}", "-o",
                 str(tmp_path / "u"), "-q", "--no-plots", "--set",
                 "workload.prompt_scale=2"]) == 0
    assert compare(load_result(outs[0]), load_result(tmp_path / "u")).pairs is None


def test_a_folder_that_is_no_result_is_one_line(tmp_path, capsys):
    assert main(["compare", str(tmp_path), str(tmp_path), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a result folder" in err and "\n" not in err


def test_the_summary_shows_rejections_kv_use_and_the_slo_verdict(tmp_path):
    # b rejects the 2 requests whose prompt reaches its max_model_len (>= 256 tokens) and
    # its 1 ms TTFT budget fails; a serves all 10 within the default budgets
    rows = [(0.1 * i, 300 if i in (3, 7) else 50, 20) for i in range(10)]
    a = sim_run(tmp_path, "a", rows)
    b = sim_run(tmp_path, "b", rows, "engine.max_model_len=256", "slo.ttft_ms=1")
    t = compare(load_result(a), load_result(b)).summary.set_index("metric")
    assert (t.loc["requests rejected", "a"], t.loc["requests rejected", "b"]) == (0, 2)
    assert (t.loc["SLO met (1 = yes)", "a"], t.loc["SLO met (1 = yes)", "b"]) == (1, 0)
    assert 0 < t.loc["KV used mean %", "a"] <= t.loc["KV used peak %", "a"] < 100


def test_an_edited_summary_without_a_verdict_compares(tmp_path):
    """``"slo": "met"`` or ``"latency_ms": []`` in a hand-edited summary.json: no verdict
    and no ITL figures (an AttributeError traceback before)."""
    rows = [(0.1 * i, 50, 20) for i in range(5)]
    a, b = sim_run(tmp_path, "a", rows), sim_run(tmp_path, "b", rows)
    path = b / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "slo": "met", "latency_ms": []}))
    t = compare(load_result(a), load_result(b)).summary.set_index("metric")
    assert t.loc["SLO met (1 = yes)", "a"] == 1 and t.loc["SLO met (1 = yes)", "b"] != 1
