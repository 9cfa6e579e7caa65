"""The real paged KV cache: one tensor, laid out as the KV manager's block tables say.

    data [layers, 2 (K, V), num_blocks + 1, block_size, num_kv_heads, head_dim]

Block ids are the KV manager's: ``1 .. num_blocks`` are the pool's usable blocks, block 0
is vLLM's null block, which no block table holds and nothing ever writes (its pages stay
zero; the warm-up only reads it). ``layer(l)`` gives the kernels their per-layer
``(k_cache, v_cache)``, each [num_blocks + 1, block_size, Hkv, D] and contiguous.

``fits`` refuses a pool that does not fit the device and names the largest that does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from traces.errors import InputError

GIB = 1 << 30
HEADROOM = 0.05  # fraction of free memory left for the allocator, kernels' scratch, etc.


@dataclass(frozen=True)
class CacheShape:
    layers: int  # blocks executed (count)
    num_blocks: int  # usable blocks, the null block excluded (count)
    block_size: int  # token slots per block (tokens)
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype

    @property
    def block_bytes(self) -> int:
        """One block's K and V over every executed layer (bytes)."""
        elt = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.layers * self.block_size * self.num_kv_heads * self.head_dim * elt

    @property
    def total_bytes(self) -> int:
        return (self.num_blocks + 1) * self.block_bytes


def free_memory(device: str) -> int:
    """Bytes the device can still allocate: CUDA's free memory, or MemAvailable on the CPU."""
    if device == "cuda":
        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def fits(shape: CacheShape, other_bytes: int, device: str, free: int | None = None) -> None:
    """Raise InputError unless the pool plus ``other_bytes`` (weights, activations) fit the
    device's free memory less a headroom; the message names the largest pool that fits."""
    free = free_memory(device) if free is None else free
    room = int(free * (1 - HEADROOM)) - other_bytes
    largest = room // shape.block_bytes - 1  # usable blocks: the null block takes one
    if shape.num_blocks <= largest:
        return
    need = (shape.total_bytes + other_bytes) / GIB
    hint = (f"at most {largest} usable blocks fit (engine.num_gpu_blocks_override: "
            f"{largest + 1})" if largest >= 1 else "not even one block fits")
    raise InputError(
        f"cost live: the KV pool of {shape.num_blocks} blocks ({shape.total_bytes / GIB:.2f} "
        f"GiB) plus weights and activations ({other_bytes / GIB:.2f} GiB) need {need:.2f} GiB "
        f"but {device} has {free / GIB:.2f} GiB free; {hint}")


class PagedCache:
    def __init__(self, shape: CacheShape, device: str):
        self.shape = shape
        self.data = torch.zeros((shape.layers, 2, shape.num_blocks + 1, shape.block_size,
                                 shape.num_kv_heads, shape.head_dim),
                                dtype=shape.dtype, device=device)

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data[i, 0], self.data[i, 1]

    def move(self, src: list[int], dst: list[int]) -> None:
        """Copy blocks ``src`` to ``dst`` (every layer, K and V); a permutation is safe."""
        if src == dst or not src:
            return
        dev = self.data.device
        s = torch.tensor(src, dtype=torch.int64, device=dev)
        d = torch.tensor(dst, dtype=torch.int64, device=dev)
        self.data[:, :, d] = self.data[:, :, s]  # the right side is gathered first

    def save(self, blocks: list[int]) -> torch.Tensor:
        """A host copy of ``blocks`` (swap-out)."""
        idx = torch.tensor(blocks, dtype=torch.int64, device=self.data.device)
        return self.data[:, :, idx].to("cpu")

    def restore(self, saved: torch.Tensor, blocks: list[int]) -> None:
        """Write a ``save`` copy into ``blocks`` (swap-in)."""
        idx = torch.tensor(blocks, dtype=torch.int64, device=self.data.device)
        self.data[:, :, idx] = saved.to(self.data.device)

    def gather(self, layer: int, table: list[int], length: int) -> tuple[torch.Tensor, ...]:
        """K and V of the first ``length`` tokens of a sequence with ``table`` (tests,
        checks): each [length, Hkv, D]."""
        idx = torch.tensor(table, dtype=torch.int64, device=self.data.device)
        kv = self.data[layer][:, idx].flatten(1, 2)[:, :length]
        return kv[0], kv[1]
