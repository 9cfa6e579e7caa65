"""KV-cache policies. Importing this package registers every built-in one."""

from sim.kv import contiguous_exact, contiguous_max, paged  # noqa: F401
from sim.kv.base import KV_POLICIES, KVManager, KVUsage

__all__ = ["KV_POLICIES", "KVManager", "KVUsage"]
