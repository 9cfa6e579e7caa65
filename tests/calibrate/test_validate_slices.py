"""`calibrate validate --slices / --noise-floor`: whole shape slices and extrapolation held
out, beside the random holdout; the cross-framework noise floor."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.fit import fit_profile
from calibrate.profile import make_row
from calibrate.shapes import Shape
from calibrate.slices import slice_table
from calibrate.timing import Timing
from sim.cli import main
from sim.cost.profile.model_file import Norm
from sim.cost.profile.work import roofline_s

NORM = Norm(peak_flops=1e15, mem_bandwidth=3e12, link_bandwidth=4e11, floor_s=5e-6)


def _profile(efficiency) -> pd.DataFrame:
    """GEMM rows timed at roofline / efficiency(m) (a synthetic device)."""
    rows = []
    for m in (1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384):
        for n in (256, 512, 1024, 2048, 4096, 8192):
            for k in (512, 2048, 8192):
                s = Shape("gemm", "x", m=m, n=n, k=k)
                f, b = s.work()
                sec = roofline_s(f, b, NORM.peak_flops, NORM.mem_bandwidth, NORM.floor_s)
                t = Timing(1e3 * sec / efficiency(m), np.nan, np.nan, 1)
                rows.append(make_row(s, t, "synthetic", "test", {}, "synthetic"))
    return pd.DataFrame(rows)


def test_a_constant_efficiency_extrapolates_exactly():
    df = _profile(lambda m: 0.6)
    mf = fit_profile(df, norm=NORM, gpu="synthetic")
    t = slice_table(mf, df).set_index("test")
    assert list(t.index) == ["random 20% (the fit's)", "n slices (4 folds)",
                             "m > 4096 (tokens)"]
    assert (t["max_ape"] < 0.5).all()  # the roofline carries the physics, the table a constant
    assert t.loc["m > 4096 (tokens)", "held_rows"] == 2 * 6 * 3


def test_extrapolation_error_shows_what_the_random_holdout_hides():
    # efficiency collapses beyond m = 4096: neighbours of random rows know it, a fit that
    # never saw m > 4096 cannot
    df = _profile(lambda m: 0.6 if m <= 4096 else 0.3)
    t = slice_table(fit_profile(df, norm=NORM, gpu="synthetic"), df).set_index("test")
    assert t.loc["m > 4096 (tokens)", "median_ape"] > 40
    assert t.loc["n slices (4 folds)", "median_ape"] < 5


def test_validate_prints_slices_and_the_noise_floor(tmp_path, capsys):
    pytest.importorskip("aiconfigurator_core")
    out = tmp_path / "a100.yaml"
    assert main(["calibrate", "import-aiconfigurator", "--system", "a100_sxm", "-o",
                 str(out)]) == 0
    capsys.readouterr()
    assert main(["calibrate", "validate", str(out), str(out.with_suffix(".parquet")),
                 "--slices", "--noise-floor"]) == 0
    text = capsys.readouterr().out
    for needle in ("leave-slice-out", "random 20% (the fit's)", "n slices (4 folds)",
                   "batch > 256", "kv_len > 8192 (context)", "q > 4096 (prompt)",
                   "noise floor: a100_sxm vllm", "sglang", "trtllm"):
        assert needle in text, needle
    gemm_vs_trt = next(ln for ln in text.splitlines() if " gemm " in ln and "trtllm" in ln)
    assert float(gemm_vs_trt.split("│")[-3]) < 5.0  # the same GEMMs measured twice


def test_noise_floor_needs_an_aiconfigurator_model(tmp_path, capsys):
    df = _profile(lambda m: 0.6)
    from calibrate.profile import write_profile
    from sim.cost.profile.model_file import save_model_file

    save_model_file(fit_profile(df, norm=NORM, gpu="synthetic"), tmp_path / "m.yaml")
    write_profile(df, tmp_path / "p.parquet")
    code = main(["calibrate", "validate", str(tmp_path / "m.yaml"), str(tmp_path / "p.parquet"),
                 "--noise-floor"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--noise-floor needs a model imported from aiconfigurator" in err
