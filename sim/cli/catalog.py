"""`servesim catalog [import CONFIG]`: the models and GPUs a scenario can name, the shipped
calibrations, and a Hugging Face config.json read as a model spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

import calibrate
from sim.catalog import GPUS, MODELS
from sim.config.hardware import ModelSpec
from sim.config.memory import GIB
from sim.report.plan_tables import cell, show, table

CALIBRATIONS = Path(calibrate.__file__).parent / "models"

app = typer.Typer(help="List catalog models and GPUs (memory, bandwidth, shipped "
                  "calibrations); `catalog import` reads a config.json.",
                  invoke_without_command=True)


def calibrations(gpu: str) -> list[str]:
    """Shipped `fitted` cost-model profiles for ``gpu`` (``<gpu>/<framework>``)."""
    return sorted(f"{gpu}/{p.stem}" for p in (CALIBRATIONS / gpu).glob("*.yaml"))


def attention(m: ModelSpec) -> str:
    """GQA q/kv heads or MLA latent rank, and the sliding-window layers."""
    kind = f"MLA r{m.kv_lora_rank}+{m.qk_rope_head_dim}" if m.is_mla \
        else f"GQA {m.num_attention_heads}/{m.num_kv_heads}"
    return kind + (f", {m.num_sliding_layers}x SWA {m.sliding_window}"
                   if m.sliding_window else "")


def experts(m: ModelSpec) -> str:
    """top-k of routed experts (+ shared), or '-' for a dense model."""
    if not m.is_moe:
        return "-"
    shared = f"+{m.num_shared_experts or 1}s" if m.shared_expert_size else ""
    return f"{m.num_experts_per_tok}/{m.num_experts}{shared}"


def weights(m: ModelSpec) -> str:
    """Weight bits (dense/experts) and vLLM's quantization method."""
    bits = f"{m.dtype_bits}/{m.moe_bits}" if m.is_moe else f"{m.dtype_bits}"
    return bits + (f" {m.quantization}" if m.quantization else "")


def models_table():
    t = table("models (`model:` in a scenario)", [
        "name", "params (B)", "active (B)", "layers", "hidden", "attention", "experts k/E",
        "weight bits", "context (tokens)", "KV KiB/token", "weights GiB (1 GPU)"],
        wrap_first=False)
    for name, m in sorted(MODELS.items()):
        t.add_row(name, cell(m.num_params / 1e9, 2), cell(m.active_params / 1e9, 2),
                  cell(m.num_layers), cell(m.hidden_size), attention(m), experts(m),
                  weights(m), cell(m.max_position_embeddings),
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


@app.callback()
def catalog(ctx: typer.Context) -> None:
    """List catalog models and GPUs (memory, bandwidth, shipped calibrations)."""
    if ctx.invoked_subcommand is None:
        show(models_table())
        show(gpus_table())


@app.command(name="import")
def import_config(
    config: Annotated[Path, typer.Argument(help="A Hugging Face config.json (a sibling "
                                           "hf_quant_config.json is read too).")],
    name: Annotated[str | None, typer.Option(help="The model's name (default: from the "
                                             "file or folder name).")] = None,
) -> None:
    """Print CONFIG as a scenario's `model:` section (every ModelSpec field) and its sizes."""
    from sim.catalog.hf_config import import_hf_config

    m = import_hf_config(config, name=name)
    typer.echo(yaml.safe_dump({"model": m.model_dump(mode="json")}, sort_keys=False), nl=False)
    typer.echo(f"# {m.num_params / 1e9:.2f} B parameters, {m.active_params / 1e9:.2f} B active "
               f"per token; {m.kv_bytes_per_token(1):,} KV bytes per token; "
               f"{m.weight_bytes_per_gpu(1) / GIB:.1f} GiB of weights on one GPU")
