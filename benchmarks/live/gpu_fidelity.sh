#!/usr/bin/env bash
# Live mode on one GPU (an H200): Llama-3-8B shapes, the Triton kernels, CUDA events.
#
#   bash benchmarks/live/gpu_fidelity.sh [OUT]        (repository root; ~8-10 minutes)
#
# 1. environment: the GPU, torch/triton versions, the Python packages servesim needs;
# 2. benchmarks/live/gpu_check.py: a short live run whose paged cache is checked against a
#    contiguous recomputation after every plan (decode runs, preemption, prefix sharing);
# 3. servesim fidelity scenarios/live-h200-llama8b.yaml --device cuda --repeats 2:
#    profile + fit on this GPU, the fitted run, two live runs (each cut at 120 s of
#    simulated time), the report (OUT/fidelity/report.md, report.json, step_times.png).
# Everything lands in OUT (default: $OUT when set, else benchmarks/live/results/gpu).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-${OUT:-benchmarks/live/results/gpu}}
PY=${PYTHON:-python3}
mkdir -p "$DEST"
start=$(date +%s)
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm --format=csv || true
  "$PY" - <<'PYEOF'
import importlib, sys
missing = [m for m in ("torch", "triton", "simpy", "numpy", "pandas", "pyarrow", "matplotlib",
                       "yaml", "typer", "rich", "pydantic") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing Python packages: {' '.join(missing)} (pip install -e '.[kernels]')")
import torch, triton
print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)
assert torch.cuda.is_available(), "no CUDA device visible"
print(torch.cuda.get_device_name(), torch.cuda.mem_get_info())
PYEOF
} 2>&1 | tee "$DEST/environment.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 150 "$PY" benchmarks/live/gpu_check.py --out "$DEST" 2>&1 | tee "$DEST/gpu_check.log"
timeout 480 "$PY" -m sim.cli fidelity scenarios/live-h200-llama8b.yaml --device cuda \
  --repeats 2 --out "$DEST/fidelity" 2>&1 | tee "$DEST/fidelity.log"
echo "total $(( $(date +%s) - start )) s; results in $DEST"
