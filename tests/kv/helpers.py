"""The simulator builder of tests/sim/helpers, re-exported for the KV tests.

``build`` / ``run`` take any KV policy (``kv``), prefix caching (``prefix_caching`` with
``prefix_hashes`` / ``hash_block_size``), host swap space (``swap_blocks``, ``block_bytes``,
``host_bandwidth``) and an admission rule (``admission`` / ``admission_params``).
"""

from tests.sim.helpers import BLOCK_BYTES, HOST_BANDWIDTH, Sim, build, run

__all__ = ["BLOCK_BYTES", "HOST_BANDWIDTH", "Sim", "build", "run"]
