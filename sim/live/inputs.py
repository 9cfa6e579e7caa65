"""One step's plan -> the tensors the model and kernels consume.

Requests are reordered so that prefill-shaped ones (more than one token this step) come
first and decode-shaped ones (one token: a decode, or a one-token prefill tail, the same
computation) after them, so each attention kernel reads a contiguous slice of the query:

    tokens   [ prefill chunk of r3 | chunk of r0 | r1 | r5 | r2 ]     plan order r0..r5
              <------ prefill: paged_prefill -----><- decode: paged_decode ->

Token t of request r sits at position ``ctx_r + i`` and is written to slot
``table_r[pos // block_size] * block_size + pos % block_size``. The LM head reads one row
per request (its last token), as vLLM computes logits for every scheduled request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class PagedBatch:
    """The paged-attention arguments of one group of sequences."""

    table: torch.Tensor  # [S, W] int32 block ids
    start: torch.Tensor  # [S] int32: prefill: prefix_lens; decode: seq_lens
    qsl: torch.Tensor | None  # [S + 1] int32 query_start_loc (prefill only)
    max_len: int  # prefill: the longest chunk; decode: the longest context (tokens)


@dataclass(frozen=True)
class StepInputs:
    token_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    slots: torch.Tensor  # [T] int64 cache slots the step's K/V go to
    num_prefill_tokens: int  # tokens [0, P) belong to prefill-shaped requests
    prefill: PagedBatch | None
    decode: PagedBatch | None
    logit_rows: torch.Tensor  # [R] int64: the last token of each request, in `order`
    order: np.ndarray  # request ids in execution order (prefill-shaped first)
    emit: np.ndarray  # bool per entry of `order`: that request emits a token this step


def _table(rows: list[list[int]], device) -> torch.Tensor:
    width = max(1, max(len(r) for r in rows))
    arr = np.zeros((len(rows), width), dtype=np.int32)
    for i, r in enumerate(rows):
        arr[i, : len(r)] = r
    return torch.from_numpy(arr).to(device)


def _i32(values, device) -> torch.Tensor:
    return torch.from_numpy(np.asarray(values, dtype=np.int32)).to(device)


def build(req_ids: np.ndarray, num_tokens: np.ndarray, ctx: np.ndarray, tables: dict,
          book, block_size: int, device) -> StepInputs:
    """Inputs of one step: ``tables[r]`` holds the blocks for r's context + this step."""
    pre = num_tokens > 1
    order = np.concatenate((np.flatnonzero(pre), np.flatnonzero(~pre)))
    ids, n, c = req_ids[order], num_tokens[order], ctx[order]
    toks, pos, slots = [], [], []
    for r, k, start in zip(ids.tolist(), n.tolist(), c.tolist()):
        p = np.arange(start, start + k)
        blocks = np.asarray(tables[r], dtype=np.int64)
        toks.append(book.ids(r)[start: start + k])
        pos.append(p)
        slots.append(blocks[p // block_size] * block_size + p % block_size)
    known = np.fromiter((book.known(r) for r in ids.tolist()), np.int64, len(ids))
    num_pre = int(pre.sum())
    p_tok = int(n[:num_pre].sum())
    as_t = lambda a: torch.from_numpy(np.concatenate(a)).to(device)  # noqa: E731
    return StepInputs(
        token_ids=as_t(toks), positions=as_t(pos), slots=as_t(slots),
        num_prefill_tokens=p_tok,
        prefill=_prefill(ids[:num_pre], n[:num_pre], c[:num_pre], tables, device),
        decode=_decode(ids[num_pre:], c[num_pre:], tables, device),
        logit_rows=torch.from_numpy(np.cumsum(n) - 1).to(device),
        order=ids, emit=c + n == known,
    )


def _prefill(ids, n, c, tables, device) -> PagedBatch | None:
    if not len(ids):
        return None
    qsl = np.concatenate(([0], np.cumsum(n)))
    return PagedBatch(_table([tables[r] for r in ids.tolist()], device), _i32(c, device),
                      _i32(qsl, device), int(n.max()))


def _decode(ids, c, tables, device) -> PagedBatch | None:
    if not len(ids):
        return None
    return PagedBatch(_table([tables[r] for r in ids.tolist()], device), _i32(c + 1, device),
                      None, int(c.max()) + 1)
