"""fit-steps: known coefficients are recovered; vLLM's iteration log is read; bad logs fail."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.model_file import load_model_file
from calibrate.steps import StepsError, fit_nonneg, fit_steps, read_steps
from sim.catalog import get_gpu, get_model
from sim.cli import main
from sim.cost.fitted import FittedCost, FittedParams
from sim.engine.plan import StepPlan

TRUE = dict(base_ms=4.0, prefill_tokens=0.02, decode_seqs=0.05, context_tokens=0.0004)


def synthetic(n=600, noise=0.01, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    decode = rng.integers(0, 256, n)
    prefill = np.where(rng.random(n) < 0.3, rng.integers(1, 8192, n), 0)
    context = decode * rng.integers(100, 4000, n)
    ms = (TRUE["base_ms"] + TRUE["prefill_tokens"] * prefill + TRUE["decode_seqs"] * decode
          + TRUE["context_tokens"] * context)
    ms = ms * (1 + noise * rng.standard_normal(n))
    return pd.DataFrame({"prefill_tokens": prefill, "decode_seqs": decode,
                         "context_tokens": context, "step_ms": ms})


def test_recovers_known_coefficients(tmp_path, capsys):
    csv = tmp_path / "steps.csv"
    synthetic().to_csv(csv, index=False)
    out = tmp_path / "m.yaml"
    assert main(["calibrate", "fit-steps", str(csv), "-o", str(out), "--gpu", "h100-sxm"]) == 0
    assert "held-out steps" in capsys.readouterr().out
    mf = load_model_file(out)
    s = mf.steps
    assert mf.kind == "steps" and s.heldout.rows > 60
    assert s.base_ms == pytest.approx(TRUE["base_ms"], rel=0.03)
    assert s.prefill_token_ms == pytest.approx(TRUE["prefill_tokens"], rel=0.03)
    assert s.decode_seq_ms == pytest.approx(TRUE["decode_seqs"], rel=0.05)
    assert s.context_token_ms == pytest.approx(TRUE["context_tokens"], rel=0.03)
    assert s.heldout.median_ape < 2.0 and mf.step_overhead_ms == pytest.approx(s.base_ms)


def test_the_steps_model_prices_plans(tmp_path):
    csv = tmp_path / "steps.csv"
    synthetic(noise=0.0).to_csv(csv, index=False)
    path = tmp_path / "m.yaml"
    from calibrate.model_file import save_model_file

    save_model_file(fit_steps(read_steps(csv)), path)
    cost = FittedCost(get_model("llama-3-8b"), get_gpu("h100-sxm"), 1,
                      FittedParams(profile=str(path)))
    plan = StepPlan.build([0, 1, 2], [500, 1, 1], [0, 1000, 3000])
    want = 4.0 + 0.02 * 500 + 0.05 * 2 + 0.0004 * 4000
    assert cost.step_times(plan)[0] * 1e3 == pytest.approx(want, rel=1e-6)
    run = StepPlan.build([0, 1], [1, 1], [1000, 3000], num_steps=5)
    single = [cost.step_times(StepPlan.build([0, 1], [1, 1], [1000 + j, 3000 + j]))[0]
              for j in range(5)]
    np.testing.assert_allclose(cost.step_times(run), single, rtol=1e-12)


def test_nonnegative_fit_drops_a_term_that_would_go_negative():
    rng = np.random.default_rng(1)
    x = rng.random((200, 2))
    y = 1.0 + 2.0 * x[:, 0] - 0.5 * x[:, 1]  # the true second slope is negative
    coef = fit_nonneg(x, y, np.ones(200))
    assert (coef >= 0).all() and coef[2] == 0.0


def test_reads_vllm_iteration_details_log(tmp_path):
    lines = [f"INFO 01-01 00:00:{i:02d} [core.py:123] Iteration({i}): {1 if i % 3 == 0 else 0} "
             f"context requests, {512 if i % 3 == 0 else 0} context tokens, {10 + i} generation "
             f"requests, {10 + i} generation tokens, iteration elapsed time: "
             f"{5 + 0.01 * 512 * (i % 3 == 0) + 0.05 * (10 + i):.2f} ms" for i in range(30)]
    lines.insert(5, "INFO Iteration(99): 0 context requests, 0 context tokens, 0 generation "
                    "requests, 0 generation tokens, iteration elapsed time: 0.10 ms (dummy)")
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    df = read_steps(log)
    assert len(df) == 30 and df["context_tokens"].isna().all()
    mf = fit_steps(df)
    assert mf.steps.prefill_token_ms == pytest.approx(0.01, rel=0.05)
    assert mf.steps.context_token_ms == 0.0 and mf.provenance.notes


@pytest.mark.parametrize("text, needle", [
    ("a,b\n1,2\n", "missing column 'prefill_tokens'"),
    ("prefill_tokens,decode_seqs,step_ms\n1,2,x\n" * 1, "row 2: column step_ms"),
    ("prefill_tokens,decode_seqs,step_ms\n" + "1,2,-3\n" * 10, "column step_ms"),
    ("prefill_tokens,decode_seqs,step_ms\n1,2,3\n", "at least 8"),
])
def test_bad_step_logs(tmp_path, text, needle):
    p = tmp_path / "s.csv"
    p.write_text(text)
    with pytest.raises(StepsError, match=needle):
        read_steps(p)
