"""prefix_affinity: send a prompt where its prefix was sent before (cache-aware routing).

The router remembers the prefix block hashes it sent to each replica (the trace's
``prefix_hashes``; the replica's cache may have evicted them since: the router cannot
know). A request goes to the replica whose remembered hashes match the longest run of its
leading hashes, if that match covers at least ``cache_threshold`` of its hashes; else,
or when the load is unbalanced, to the replica with the fewest outstanding requests. The
balance rule and the knob names follow SGLang's cache-aware router: the load counts as
unbalanced when max - min outstanding > ``balance_abs_threshold`` and max >
``balance_rel_threshold`` x min.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from sim.fleet.routers.base import ROUTERS, Router, tie_key
from traces.validated import Validated


class PrefixParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_threshold: float = Field(
        0.5, ge=0, le=1, description="Least matched share of a request's prefix hashes for "
        "affinity to decide (fraction); below it the least loaded replica gets it.")
    balance_abs_threshold: int = Field(
        32, ge=0, le=1_000_000, description="Outstanding-request gap (max - min) above which "
        "the load counts as unbalanced (requests).")
    balance_rel_threshold: float = Field(
        1.0001, ge=1, le=1e6, description="... and max > this x min (ratio).")


def _match(seen: set, hashes) -> int:
    """Leading hashes of ``hashes`` found in ``seen`` (blocks)."""
    n = 0
    for h in hashes:
        if h not in seen:
            break
        n += 1
    return n


@ROUTERS.register("prefix_affinity")
class PrefixAffinity(Router):
    description = ("longest remembered prompt-prefix match, unless the load is "
                   "unbalanced (SGLang's cache-aware rule)")
    Params = PrefixParams

    def __init__(self, *args):
        super().__init__(*args)
        self.seen: list[set] = [set() for _ in range(self.num_replicas)]
        self.last: dict = {}

    def _unbalanced(self, replicas) -> bool:
        load = [r.outstanding for r in replicas]
        p = self.params
        return (max(load) - min(load) > p.balance_abs_threshold
                and max(load) > p.balance_rel_threshold * min(load))

    def choose(self, req, replicas) -> int:
        least = min(replicas, key=lambda r: (r.outstanding, *tie_key(r))).index
        hashes = req.prefix_hashes
        if hashes is None or not len(hashes) or self._unbalanced(replicas):
            self.last = {"matched_blocks": 0, "by": "load"}
            return least
        hashes = hashes.tolist()
        scores = [_match(self.seen[r.index], hashes) for r in replicas]
        best = min(replicas, key=lambda r: (-scores[r.index], r.outstanding, *tie_key(r)))
        matched = scores[best.index]
        if matched < self.params.cache_threshold * len(hashes) or matched == 0:
            self.last = {"matched_blocks": matched, "by": "load"}
            return least
        self.last = {"matched_blocks": matched, "by": "prefix"}
        return best.index

    def routed(self, req, replica: int) -> None:
        if req.prefix_hashes is not None:
            self.seen[replica].update(req.prefix_hashes.tolist())

    def explain(self) -> dict:
        return self.last
