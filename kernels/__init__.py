"""Triton PagedAttention kernels (decode, chunked prefill, KV write) with float64 references.

Imported only by calibration and live mode; the simulator core never imports this package.
Cache layout and conventions are documented in each launcher's module.
"""

from kernels.kv_write import kv_write, kv_write_ref
from kernels.layout import block_table, make_cache, slot_mapping
from kernels.paged_decode import paged_decode, paged_decode_ref
from kernels.paged_prefill import paged_prefill, paged_prefill_ref

__all__ = [
    "block_table",
    "kv_write",
    "kv_write_ref",
    "make_cache",
    "paged_decode",
    "paged_decode_ref",
    "paged_prefill",
    "paged_prefill_ref",
    "slot_mapping",
]
