"""Built-in GPU catalog: datasheet capacities plus efficiencies from public measurements.

Conventions (the same for every entry; ``sim/catalog/SOURCES.md`` has the per-figure sources):

* ``hbm_bytes``: the total CUDA reports (``torch.cuda.mem_get_info()[1]`` /
  ``get_device_properties().total_memory``), i.e. what vLLM budgets ``gpu_memory_utilization``
  against. It is ~0.5-1 GiB below nvidia-smi's ``memory.total`` and varies by a few tens of MiB
  across driver versions. Written as ``MiB * 2**20``.
* Bandwidths are decimal (1 GB/s = 1e9 B/s) and PEAK, one direction. Achieved/peak lives in the
  efficiency fields. PCIe figures are the datasheet's x16 numbers halved (Gen4 64 GB/s
  bidirectional -> 32e9; Gen5 128 GB/s -> 64e9), not the 128b/130b-exact 31.5/63 GB/s.
* FLOP/s are DENSE tensor-core peaks: NVIDIA datasheets quote sparsity figures, 2x dense.
* Efficiencies marked "estimate" are judgment calls with the reason given; the others cite a
  public measurement. ``step_overhead_s`` is a host/engine cost (vLLM scheduler, input prep,
  launch) rather than a GPU property; 2 ms is the same estimate everywhere.
"""

from __future__ import annotations

from sim.config.hardware import GpuSpec

_MiB = 2**20
_GB = 1e9
_TB = 1e12
_TFLOPS = 1e12

_ENTRIES: tuple[GpuSpec, ...] = (
    GpuSpec(
        name="a100-80gb",  # A100-SXM4-80GB
        compute_capability=8.0,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=81050 * _MiB,  # torch OOM text "total capacity of 79.15 GiB" (nvidia-smi 81920)
        mem_bandwidth=2.039 * _TB,  # datasheet, HBM2e
        bf16_flops=312 * _TFLOPS,  # datasheet dense (624 with sparsity)
        fp8_flops=None,  # Ampere has no FP8 tensor cores
        interconnect_bandwidth=300 * _GB,  # NVLink3 600 GB/s bidirectional per GPU
        host_bandwidth=32 * _GB,  # PCIe Gen4 x16, 64 GB/s bidirectional
        gemm_efficiency=0.80,  # MAMF 271.2/312 = 86.9% (ml-engineering), -~5 pts for real shapes
        attention_efficiency=0.50,  # FlashAttention-2 paper: 50-73% of A100 peak (fwd)
        mem_efficiency=0.85,  # NVIDIA forum: 1.80 TB/s read = 88% of peak; ~90% best kernels
        allreduce_efficiency=0.78,  # 8xA100 NVLink NCCL all_reduce busbw 230-250 GB/s of 300
        allreduce_latency_s=20e-6,  # estimate: NCCL small-message floor ~20-25 us (see SOURCES)
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA A100 datasheet; MAMF table (stas00/ml-engineering); FlashAttention-2"
        " (Dao 2023); nccl-tests busbw references; see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="h100-sxm",  # H100 80GB HBM3 (SXM5)
        compute_capability=9.0,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=81089 * _MiB,  # torch total_memory=81089MB (torch 2.7, CUDA 12.8); smi 81559
        mem_bandwidth=3.35 * _TB,  # datasheet, HBM3
        bf16_flops=989.4 * _TFLOPS,  # dense (datasheet 1,979 with sparsity)
        fp8_flops=1978.9 * _TFLOPS,  # dense (datasheet 3,958 with sparsity)
        interconnect_bandwidth=450 * _GB,  # NVLink4 900 GB/s bidirectional per GPU
        host_bandwidth=64 * _GB,  # PCIe Gen5 x16, 128 GB/s bidirectional
        gemm_efficiency=0.75,  # MAMF 794.5/989 = 80.3% (ml-engineering), -~5 pts for real shapes
        attention_efficiency=0.55,  # estimate: FA3 paper peaks at 75% bf16 (long seqs); FA2 35%
        mem_efficiency=0.85,  # estimate: streaming kernels reach ~85-90% of HBM peak
        allreduce_efficiency=0.80,  # 4xH100 all_reduce busbw 355-367 GB/s of 450 (ring, no NVLS)
        allreduce_latency_s=20e-6,  # nccl-tests 4xH100: ~24 us for <=128 KiB messages
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA H100 datasheet (SXM); MAMF table (stas00/ml-engineering);"
        " FlashAttention-3 (Shah et al. 2024); nccl-tests all_reduce_perf on 4xH100;"
        " see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="h100-pcie",  # H100 PCIe 80GB (HBM2e, 350 W)
        compute_capability=9.0,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=81008 * _MiB,  # torch total_memory=81008MB printed for 'NVIDIA H100 PCIe'
        mem_bandwidth=2.0 * _TB,  # datasheet "2,000 GB/s"
        bf16_flops=756.5 * _TFLOPS,  # dense (datasheet 1,513 with sparsity)
        fp8_flops=1513 * _TFLOPS,  # dense (datasheet 3,026 with sparsity)
        # No NVSwitch: GPU-GPU over PCIe Gen5 x16. An optional NVLink bridge joins PAIRS only
        # (600 GB/s bidirectional); spell the GPU out by hand for a bridged tp=2 setup.
        interconnect_bandwidth=64 * _GB,
        host_bandwidth=64 * _GB,  # PCIe Gen5 x16, 128 GB/s bidirectional
        gemm_efficiency=0.70,  # estimate: power-capped part; A100 PCIe MAMF is 5 pts under SXM
        attention_efficiency=0.50,  # estimate: FA3 on Hopper, lower clocks than SXM
        mem_efficiency=0.85,  # estimate: as other HBM parts
        allreduce_efficiency=0.60,  # 8xH100 PCIe (no NVSwitch) busbw 35-45 GB/s of 64
        allreduce_latency_s=30e-6,  # estimate: PCIe hops add to the NVLink ~20-25 us floor
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA H100 datasheet (PCIe column); nccl-tests busbw references;"
        " see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="h200-sxm",  # H200 141GB HBM3e (SXM5)
        compute_capability=9.0,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=143156 * _MiB,  # torch total_memory=143156MB; OOM text 139.80 GiB; smi 143771
        mem_bandwidth=4.8 * _TB,  # datasheet, HBM3e
        bf16_flops=989.4 * _TFLOPS,  # same GH100 compute as H100 SXM (datasheet 1,979 sparse)
        fp8_flops=1978.9 * _TFLOPS,  # dense (datasheet 3,958 with sparsity)
        interconnect_bandwidth=450 * _GB,  # NVLink4 900 GB/s bidirectional per GPU
        host_bandwidth=64 * _GB,  # PCIe Gen5 x16, 128 GB/s bidirectional
        gemm_efficiency=0.75,  # MAMF table notes "H200 is the same" as H100 SXM (80.3%)
        attention_efficiency=0.55,  # estimate: as H100 SXM (FA3)
        mem_efficiency=0.85,  # estimate: as other HBM parts
        allreduce_efficiency=0.80,  # same NVLink4/NVSwitch fabric as H100 SXM
        allreduce_latency_s=20e-6,  # as H100 SXM
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA H200 datasheet (SXM); MAMF table (stas00/ml-engineering);"
        " see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="l40s",  # L40S 48GB GDDR6 (Ada, PCIe, no NVLink)
        compute_capability=8.9,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=45589 * _MiB,  # torch total_memory=45589MB; nvidia-smi 46068 MiB
        mem_bandwidth=864 * _GB,  # datasheet, GDDR6 (not HBM)
        bf16_flops=362.05 * _TFLOPS,  # datasheet dense (733 with sparsity)
        fp8_flops=733 * _TFLOPS,  # datasheet dense (1,466 with sparsity)
        interconnect_bandwidth=32 * _GB,  # no NVLink: PCIe Gen4 x16, 64 GB/s bidirectional
        host_bandwidth=32 * _GB,  # PCIe Gen4 x16
        gemm_efficiency=0.65,  # estimate: 350 W board throttles under dense GEMM; no MAMF data
        attention_efficiency=0.45,  # estimate: FA2 on Ada, below its A100 figure
        mem_efficiency=0.85,  # estimate: as HBM parts; no public GDDR6 stream figure found
        allreduce_efficiency=0.65,  # estimate: PCIe all-reduce, below the NVLink ~0.8
        allreduce_latency_s=30e-6,  # estimate: as H100 PCIe
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA L40S datasheet; efficiencies are estimates (no public MAMF/NCCL"
        " figures found); see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="b200",  # HGX B200 (SXM6, 1000 W)
        compute_capability=10.0,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=182631 * _MiB,  # torch total_memory=182631MB (another print: 182642); smi 183359
        mem_bandwidth=7.7 * _TB,  # HGX B200 per-GPU spec 7.7 TB/s (launch material said 8 TB/s)
        bf16_flops=2250 * _TFLOPS,  # dense (HGX B200 table 4.5 PFLOPS with sparsity)
        fp8_flops=4500 * _TFLOPS,  # dense (9 PFLOPS with sparsity)
        interconnect_bandwidth=900 * _GB,  # NVLink5 1.8 TB/s bidirectional per GPU
        host_bandwidth=64 * _GB,  # PCIe Gen5 x16, 128 GB/s bidirectional (HGX B200 spec)
        gemm_efficiency=0.72,  # MAMF 1745/2250 = 77.6% (ml-engineering), -~5 pts
        attention_efficiency=0.50,  # estimate: Blackwell attention kernels (FA4/cuDNN) are young
        mem_efficiency=0.80,  # estimate: no public stream figure found; kept below Hopper
        allreduce_efficiency=0.80,  # estimate: same NVSwitch ring behaviour as Hopper
        allreduce_latency_s=20e-6,  # estimate: as Hopper NVLink
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA HGX B200 specifications (per-GPU column); MAMF table"
        " (stas00/ml-engineering); see sim/catalog/SOURCES.md",
    ),
    GpuSpec(
        name="b300",  # HGX B300 (Blackwell Ultra, SXM)
        compute_capability=10.3,  # CUDA compute capability (NVIDIA's CUDA GPUs table)
        hbm_bytes=275040 * _MiB,  # nvidia-smi 275040 MiB (aiconfigurator-core b300_sxm.yaml)
        mem_bandwidth=7.75 * _TB,  # 62 TB/s per 8-GPU board / 8 (Blackwell Ultra datasheet)
        bf16_flops=2250 * _TFLOPS,  # dense (4.5 PFLOPS with sparsity)
        fp8_flops=4500 * _TFLOPS,  # dense (9 PFLOPS with sparsity)
        interconnect_bandwidth=900 * _GB,  # NVLink5 1.8 TB/s bidirectional per GPU
        host_bandwidth=128 * _GB,  # PCIe Gen6 x16, 256 GB/s bidirectional
        gemm_efficiency=0.72,  # estimate: as B200
        attention_efficiency=0.50,  # estimate: as B200
        mem_efficiency=0.80,  # estimate: as B200
        allreduce_efficiency=0.80,  # estimate: as B200
        allreduce_latency_s=20e-6,  # estimate: as B200
        step_overhead_s=2e-3,  # estimate: vLLM per-step CPU cost, host dependent
        source="NVIDIA Blackwell Ultra datasheet (resources.nvidia.com/en-us-blackwell-"
        "architecture/blackwell-ultra-datasheet), figures as aiconfigurator-core 0.12.0 "
        "systems/b300_sxm.yaml copies them; see sim/catalog/SOURCES.md",
    ),
)

GPUS: dict[str, GpuSpec] = {g.name: g for g in _ENTRIES}
