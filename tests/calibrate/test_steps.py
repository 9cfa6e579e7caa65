"""fit-steps: known terms are recovered (knee, pairs, context, host); every log format is read;
the fitted model prices plans as fitted and warns once outside its ranges; bad logs fail."""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from calibrate import steps
from calibrate.fit_steps import fit_logs
from calibrate.nnls import nnls
from calibrate.steplog import StepsError, read_log
from sim.catalog import get_gpu, get_model
from sim.cli import main
from sim.cost.fitted import FittedCost, FittedParams
from sim.cost.profile.model_file import load_model_file, save_model_file
from sim.engine.plan import StepPlan

EXEC = dict(base_ms=6.0, request_ms=0.05, prefill_token_ms=0.3, prefill_pair_ms=2e-4,
            decode_seq_ms=0.9, decode_knee=5, context_token_ms=1e-3)
HOST = dict(base_ms=1.0, request_ms=0.03)


def exec_ms(r, p, a, d, c):
    e = EXEC
    return (e["base_ms"] + e["request_ms"] * r + e["prefill_token_ms"] * p
            + e["prefill_pair_ms"] * a + e["decode_seq_ms"] * np.maximum(d - e["decode_knee"], 0)
            + e["context_token_ms"] * c)


def records(n=1500, seed=0, noise=0.0, new_shape=(0.0, 0.0)):
    """vLLM step-log JSONL records with per-request tokens and contexts, and their times;
    ``new_shape`` (ms, ms per prefill token) is added to a step of a token count not seen
    before in the log."""
    rng = np.random.default_rng(seed)
    out, t, seen = [], 0.0, set()
    for _ in range(n):
        d = int(rng.integers(0, 33))
        prefill = [] if rng.random() < 0.6 else [int(rng.integers(2, 512))]
        tokens = {f"d{k}": 1 for k in range(d)} | {f"p{k}": q for k, q in enumerate(prefill)}
        ctx = {f"d{k}": int(rng.integers(10, 3000)) for k in range(d)}
        ctx |= {f"p{k}": int(rng.integers(0, 2000)) for k in range(len(prefill))}
        if not tokens:
            tokens, ctx = {"d0": 1}, {"d0": 5}
        q = np.array([tokens[r] for r in tokens])
        p = np.array([ctx[r] for r in tokens])
        pre = q > 1
        x = exec_ms(len(q), q[pre].sum(), (q[pre] * (p[pre] + q[pre] / 2)).sum(),
                    (~pre).sum(), p[~pre].sum()) * (1 + noise * rng.standard_normal())
        if int(q.sum()) not in seen:
            seen.add(int(q.sum()))
            x += new_shape[0] + new_shape[1] * q[pre].sum()
        host = HOST["base_ms"] + HOST["request_ms"] * len(q)
        out.append({"num_ctx_requests": int(pre.sum()), "num_ctx_tokens": int(q[pre].sum()),
                    "num_generation_requests": int((~pre).sum()),
                    "num_generation_tokens": int((~pre).sum()), "start_s": t,
                    "scheduled_s": t + 1e-4, "exec_end_s": t + 1e-4 + x / 1e3,
                    "end_s": t + (x + 0.2) / 1e3, "tokens": tokens, "context": ctx,
                    "idle_after": False})
        t += (x + host) / 1e3
    return out


def write_jsonl(path, recs, gz=False):
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_recovers_execution_knee_pairs_context_and_host(tmp_path, capsys):
    log = write_jsonl(tmp_path / "steps.jsonl.gz", records(), gz=True)
    out = tmp_path / "m.yaml"
    assert main(["calibrate", "fit-steps", str(log), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "time-weighted bias" in text and "median APE" in text
    f = load_model_file(out).steps
    assert f.target == "interval" and f.execution.decode_knee == EXEC["decode_knee"]
    for k, v in EXEC.items():
        assert getattr(f.execution, k) == pytest.approx(v, rel=1e-4, abs=1e-9), k
    assert f.host.base_ms == pytest.approx(HOST["base_ms"], rel=1e-3)
    assert f.host.request_ms == pytest.approx(HOST["request_ms"], rel=1e-3)
    assert f.heldout.median_ape < 0.1 and abs(f.train.time_bias_pct) < 0.01
    assert f.ranges.requests <= 33 and f.ranges.context_tokens <= 3000
    # a plain step log records no hardware: the fitting machine's, said so
    hw = load_model_file(out).hardware
    assert "step logs record none" in hw.source and hw.dtype == "bfloat16" and hw.cores >= 1


def test_the_first_step_of_a_token_count_is_fitted_and_priced_once(tmp_path):
    # vLLM on the CPU: a step of a token count the process has not run before is slower
    df = read_log(write_jsonl(tmp_path / "s.jsonl", records(new_shape=(1.5, 0.06))))
    assert 100 < steps.with_new_shapes(df)["new_shape"].sum() < len(df)
    fit, notes = steps.fit(df, heldout=0.0)
    assert fit.execution.new_shape_ms == pytest.approx(1.5, rel=1e-4)
    assert fit.execution.new_shape_token_ms == pytest.approx(0.06, rel=1e-4)
    assert fit.execution.prefill_token_ms == pytest.approx(EXEC["prefill_token_ms"], rel=1e-4)
    path = save_model_file(steps.model_file(fit, notes, rows=len(df), seed=0, heldout=0.0),
                           tmp_path / "m.yaml")
    cost = FittedCost(get_model("llama-3-8b"), get_gpu("h100-sxm"), 1,
                      FittedParams(profile=str(path)))
    plan = StepPlan.build(range(3), [1, 1, 300], [100, 200, 0])  # 302 tokens
    want = exec_ms(3, 300, 300 * 150, 2, 300) + HOST["base_ms"] + 3 * HOST["request_ms"]
    assert cost.step_times(plan)[0] * 1e3 == pytest.approx(want + 1.5 + 0.06 * 300, rel=1e-4)
    cost.observe(plan)  # committed: its count is no longer new
    assert cost.step_times(plan)[0] * 1e3 == pytest.approx(want, rel=1e-4)
    # a decode run: only its first step can be the first of its count
    run = StepPlan.build([0, 1], [1, 1], [1000, 3000], num_steps=4)
    ms = cost.step_times(run) * 1e3
    assert ms[0] - 1.5 == pytest.approx(ms[1] - 1e-3 * 2, rel=1e-6)


def test_time_weighting_keeps_the_total(tmp_path):
    # noisy steps: relative-error fits undershoot totals; least squares on ms do not
    df = read_log(write_jsonl(tmp_path / "s.jsonl", records(noise=0.15, seed=3)))
    fit, _ = steps.fit(df, heldout=0.0)
    assert abs(fit.train.time_bias_pct) < 0.5


def test_the_model_prices_plans_as_fitted(tmp_path):
    df = read_log(write_jsonl(tmp_path / "s.jsonl", records()))
    fit, notes = steps.fit(df)
    path = save_model_file(steps.model_file(fit, notes, rows=len(df), seed=0, heldout=0.2),
                           tmp_path / "m.yaml")
    cost = FittedCost(get_model("llama-3-8b"), get_gpu("h100-sxm"), 1,
                      FittedParams(profile=str(path)))
    # 8 decode requests (contexts 100..800) and one 300-token chunk over a 200-token prefix
    plan = StepPlan.build(range(9), [1] * 8 + [300], [100 * k for k in range(1, 9)] + [200])
    want = exec_ms(9, 300, 300 * (200 + 150), 8, 3600) + HOST["base_ms"] + 9 * HOST["request_ms"]
    assert cost.step_times(plan)[0] * 1e3 == pytest.approx(want, rel=1e-4)
    assert cost.fitted_delays_s() is None
    run = StepPlan.build([0, 1], [1, 1], [1000, 3000], num_steps=5)
    single = [cost.step_times(StepPlan.build([0, 1], [1, 1], [1000 + j, 3000 + j]))[0]
              for j in range(5)]
    np.testing.assert_allclose(cost.step_times(run), single, rtol=1e-12)


def test_outside_the_ranges_warns_once_with_the_count(tmp_path):
    df = read_log(write_jsonl(tmp_path / "s.jsonl", records(n=300)))
    fit, notes = steps.fit(df)
    path = save_model_file(steps.model_file(fit, notes, rows=len(df), seed=0, heldout=0.2),
                           tmp_path / "m.yaml")
    cost = FittedCost(get_model("llama-3-8b"), get_gpu("h100-sxm"), 1,
                      FittedParams(profile=str(path)))
    top = fit.ranges.context_tokens
    cost.observe(StepPlan.build([0], [1], [10]))  # inside
    cost.observe(StepPlan.build(range(40), [1] * 40, [10] * 40))  # batch 40 > 33
    cost.observe(StepPlan.build([0], [1], [top - 3], num_steps=10))  # last 7 read > top
    (w,) = cost.run_warnings()
    assert "8 of 12 steps outside the ranges" in w


def test_reads_vllm_iteration_log_and_csv(tmp_path):
    lines = [f"INFO [core.py:1] Iteration({i}): {i % 3 == 0:d} context requests, "
             f"{512 * (i % 3 == 0)} context tokens, {10 + i} generation requests, {10 + i} "
             f"generation tokens, iteration elapsed time: "
             f"{5 + 0.01 * 512 * (i % 3 == 0) + 0.05 * (10 + i):.2f} ms" for i in range(30)]
    lines.insert(5, "INFO Iteration(99): 0 context requests, 0 context tokens, 0 generation "
                    "requests, 0 generation tokens, iteration elapsed time: 0.10 ms (dummy)")
    (tmp_path / "vllm.log").write_text("\n".join(lines) + "\n")
    df = read_log(tmp_path / "vllm.log")
    assert len(df) == 30 and df["context_tokens"].isna().all() and df["interval_ms"].isna().all()
    fit, notes = steps.fit(df, heldout=0.0)
    assert fit.target == "execution" and fit.host is None
    assert fit.execution.prefill_token_ms == pytest.approx(0.01, rel=0.05)
    assert any("execution only" in n for n in notes)
    csv = tmp_path / "s.csv"
    pre, dec = np.tile([0, 100, 0, 300, 50], 6), np.repeat([1, 3, 6, 9, 12, 20], 5)
    pd.DataFrame({"prefill_tokens": pre, "decode_seqs": dec, "step_ms": 5 + 0.3 * pre + 0.5 * dec
                  }).to_csv(csv, index=False)
    fit, _ = steps.fit(read_log(csv), heldout=0.0)
    assert fit.target == "interval" and fit.execution.prefill_token_ms == pytest.approx(0.3)
    assert fit.execution.decode_seq_ms == pytest.approx(0.5) and fit.execution.decode_knee == 0


def test_nnls_matches_the_unconstrained_fit_when_it_is_positive():
    rng = np.random.default_rng(1)
    x = rng.random((200, 3))
    y = x @ np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(nnls(x, y), [1.0, 2.0, 3.0], rtol=1e-9)
    y2 = 1.0 + 2.0 * x[:, 0] - 0.5 * x[:, 1]
    coef = nnls(np.column_stack([np.ones(200), x[:, :2]]), y2)
    assert (coef >= 0).all() and coef[2] == 0.0


@pytest.mark.parametrize("text, needle", [
    ("a,b\n1,2\n", "missing column 'prefill_tokens'"),
    ("prefill_tokens,decode_seqs,step_ms\n1,2,x\n", "row 2: column step_ms"),
    ("prefill_tokens,decode_seqs,step_ms\n" + "1,2,-3\n" * 10, "column step_ms"),
    ("prefill_tokens,decode_seqs,step_ms\n1,2,3\n", "at least 8"),
])
def test_bad_csv_logs(tmp_path, text, needle):
    p = tmp_path / "s.csv"
    p.write_text(text)
    with pytest.raises(StepsError, match=needle):
        read_log(p)


def test_bad_jsonl_logs_name_the_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"num_ctx_requests": 1}\n')
    with pytest.raises(StepsError, match="line 1: missing field 'num_ctx_tokens'"):
        read_log(p)
    with pytest.raises(StepsError, match="not a recorded run"):
        read_log(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(StepsError, match="at least one"):
            fit_logs([])


@pytest.mark.parametrize(("cell", "needle"), [
    ("1e30", "column step_ms: expected a number from 0 to 3.6e+06, got 1e+30"),
    ("-5", "column step_ms: expected a number from 0 to 3.6e+06, got -5"),
])
def test_a_step_time_no_engine_takes_is_refused(tmp_path, cell, needle):
    path = tmp_path / "steps.csv"
    path.write_text(f"prefill_tokens,decode_seqs,step_ms\n10,1,{cell}\n")
    with pytest.raises(StepsError, match=needle.replace("+", r"\+")):
        read_log(path)
