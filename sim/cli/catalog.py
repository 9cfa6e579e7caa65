"""`servesim catalog`: the models and GPUs a scenario can name, with the shipped calibrations."""

from __future__ import annotations

from pathlib import Path

import calibrate
from sim.catalog import GPUS, MODELS
from sim.config.memory import GIB
from sim.report.plan_tables import cell, show, table

CALIBRATIONS = Path(calibrate.__file__).parent / "models"


def calibrations(gpu: str) -> list[str]:
    """Shipped `fitted` cost-model profiles for ``gpu`` (``<gpu>/<framework>``)."""
    return sorted(f"{gpu}/{p.stem}" for p in (CALIBRATIONS / gpu).glob("*.yaml"))


def models_table():
    t = table("models (`model:` in a scenario)", [
        "name", "params (B)", "layers", "hidden", "heads q/kv", "context (tokens)",
        "KV KiB/token", "bf16 weights GiB"], wrap_first=False)
    for name, m in sorted(MODELS.items()):
        t.add_row(name, cell(m.num_params / 1e9, 2), cell(m.num_layers), cell(m.hidden_size),
                  f"{m.num_attention_heads}/{m.num_kv_heads}", cell(m.max_position_embeddings),
                  cell(m.kv_bytes_per_token(1) / 1024, 0), cell(m.weight_bytes_per_gpu(1) / GIB))
    return t


def gpus_table():
    t = table("GPUs (`gpu:` in a scenario)", [
        "name", "memory GiB", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "link GB/s",
        "calibrations (cost: fitted)"], wrap_first=False)
    for name, g in sorted(GPUS.items()):
        fp8 = cell(g.fp8_flops / 1e12, 0) if g.fp8_flops else "-"
        t.add_row(name, cell(g.hbm_bytes / GIB), cell(g.mem_bandwidth / 1e12, 2),
                  cell(g.bf16_flops / 1e12, 0), fp8, cell(g.interconnect_bandwidth / 1e9, 0),
                  ", ".join(calibrations(name)) or "- (roofline)")
    return t


def catalog() -> None:
    """List catalog models and GPUs (memory, bandwidth, shipped calibrations)."""
    show(models_table())
    show(gpus_table())
