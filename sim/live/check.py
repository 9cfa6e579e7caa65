"""Does the live cache hold, for a request, exactly the K/V its tokens produce?

Gather the request's first ``n`` tokens of K and V through its block table, layer by layer,
and compare them with a contiguous recomputation of the same token ids (one causal pass
over the whole sequence: no pages, no chunks, no decode runs). Used by the tests and by
the GPU script after its run.
"""

from __future__ import annotations

import torch


def kv_error(executor, req: int, num_tokens: int) -> float:
    """Largest |paged - contiguous| over every executed layer's K and V of ``req``'s first
    ``num_tokens`` tokens, relative to the largest |contiguous| value."""
    table = executor.kv.block_table(req)
    ids = torch.as_tensor(executor.book.ids(req)[:num_tokens], device=executor.device)
    with torch.no_grad():
        ref = executor.model.kv_contiguous(ids)
    worst, scale = 0.0, 0.0
    for layer, (k_ref, v_ref) in enumerate(ref):
        k, v = executor.cache.gather(layer, table, num_tokens)
        for got, want in ((k, k_ref), (v, v_ref)):
            worst = max(worst, float((got.float() - want.float()).abs().max()))
            scale = max(scale, float(want.float().abs().max()))
    return worst / max(scale, 1e-30)


def null_block_untouched(executor) -> bool:
    """The null block (id 0) of every layer still holds zeros."""
    return not bool(executor.cache.data[:, :, 0].any())
