"""The validated error of the shipped cost profiles, shown beside every answer.

`calibrate/models/validation.yaml` holds, per GPU and model class, how far servesim's
TTFT and TPOT were from NVIDIA's measured vLLM deployments (benchmarks/silicon, written by
`python -m benchmarks.silicon --record`): absolute error median and p90, signed bias, and
the rows behind them. A run priced by a shipped fitted profile reads its band here; any
other cost model, a user's profile, or a GPU or model class outside what was measured says
it is not validated, and why.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

BANDS_FILE = Path(__file__).resolve().parents[2] / "calibrate" / "models" / "validation.yaml"


@cache
def _bands(path: Path = BANDS_FILE) -> dict:
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def model_class(model) -> str:
    """The class a band covers: the architecture and the weight dtype ("dense bf16",
    "moe mla fp8", "moe 16/4-bit" for gpt-oss's bf16 attention and mxfp4 experts...)."""
    names = {4: "4-bit", 8: "fp8", 16: "bf16", 32: "fp32"}
    weights = names[model.dtype_bits] if model.moe_bits == model.dtype_bits \
        else f"{model.dtype_bits}/{model.moe_bits}-bit"
    arch = ("moe" if model.is_moe else "dense") + (" mla" if model.is_mla else "")
    return f"{arch} {weights}"


def band(resolved) -> dict:
    """The validated error band of the run's cost model, or ``validated: False`` and why."""
    sc, gpu = resolved.scenario, resolved.gpu.name
    cls = model_class(resolved.model)
    out = {"gpu": gpu, "model_class": cls}
    spec = sc.engine.speculative_config
    if spec is not None:  # no measured deployment speculates: say what checked the drafter
        out["speculative"] = spec.method
    cost = sc.cost.name if sc.cost is not None else "roofline"
    profile = getattr(sc.cost.params, "profile", None) if sc.cost is not None else None
    if profile == "auto":  # FittedParams' default: the GPU's shipped <gpu>/vllm profile
        profile = f"{gpu}/vllm"
    if cost != "fitted" or profile != f"{gpu}/vllm":
        what = f"cost {cost}" + (f" (profile {profile})" if cost == "fitted" else "")
        return {**out, "validated": False,
                "why": f"{what}: only the shipped <gpu>/vllm fitted profiles are validated"}
    data = _bands()
    out["published"] = data.get("published", {}).get(gpu, [])
    entry = data.get("bands", {}).get(gpu, {}).get(cls)
    if entry is None:
        have = sorted(data.get("bands", {}).get(gpu, {}))
        return {**out, "validated": False,
                "why": f"no measured deployment of a {cls} model on {gpu} "
                       f"(validated there: {', '.join(have) or 'nothing'})"}
    return {**out, "validated": True, "source": data.get("source", ""), **entry}


def _published(b: dict) -> str:
    pts = b.get("published") or []
    if not pts:
        return ""
    errs = ", ".join(f"{p['error_pct']:+.1f} %" for p in pts)
    return f"; vLLM's latency benchmark on {b['gpu']} (batch of 8, 32 in / 128 out): {errs}"


def _speculative(b: dict) -> str:
    if not b.get("speculative"):
        return ""
    return (f"; speculative decoding ({b['speculative']}) is in none of those rows: only "
            "SpecDecode-Bench's published EAGLE speedup on one H100 checks it "
            "(benchmarks/speculative)")


def describe(b: dict) -> str:
    """One line for the console."""
    if not b["validated"]:
        return (f"cost model error: not validated for {b['model_class']} on {b['gpu']}: "
                f"{b['why']}{_published(b)}{_speculative(b)}")
    t, p = b["ttft"], b["tpot"]
    models = ", ".join(m.split("/")[-1] for m in b.get("models", ()))
    return (f"cost model error on {b['gpu']} ({b['model_class']}: {b['rows']} measured vLLM "
            f"deployments of {models}): TTFT +/- {t['median_abs']:.1f} % median "
            f"(p90 {t['p90_abs']:.1f} %, bias {t['bias']:+.1f} %), "
            f"TPOT +/- {p['median_abs']:.1f} % (p90 {p['p90_abs']:.1f} %, "
            f"bias {p['bias']:+.1f} %){_published(b)}{_speculative(b)}")
