"""The work each timed operation does (FLOPs, bytes) and the coordinates its fit uses.

Pure numpy: the profiler (achieved TFLOP/s, GB/s), the fitter and the ``fitted`` cost model
all call these, so a shape is described the same way when it is measured and when it is
priced. Every function takes arrays (or scalars) and broadcasts.

Operations, per transformer layer on one GPU of the tensor-parallel group:

* ``gemm``: ``[m, k] @ [k, n]`` (m = token rows); FLOPs ``2mnk``, bytes ``e(mk + mn) + w kn``
  (``e`` activation, ``w`` weight bytes per element: fp8 weights, 16-bit activations).
* ``prefill_attn``: ``batch`` sequences, each ``q`` query tokens attending causally to
  ``p`` cached tokens plus themselves; FLOPs ``4 h d (q p + q (q + 1) / 2)`` per sequence,
  bytes = K/V of ``p + q`` tokens + Q in and O out.
* ``decode_attn``: ``batch`` sequences, one query token over ``s`` KV tokens (the context
  plus the token just written); FLOPs ``4 h d s``, bytes = K/V of ``s`` tokens + Q/O.
* ``allreduce``: a ring all-reduce of ``msg`` bytes over ``g`` GPUs moves ``2 (g-1)/g msg``.

Fit coordinates (all log2) are chosen so that a table fitted on one model prices another:
GEMMs by ``(m, n, k)``; attention by sequences, per-sequence length (and prefix), heads, the
GQA group size ``h / h_kv`` and ``head_dim`` -- never by model name.
"""

from __future__ import annotations

import numpy as np

# Axes of each operation's fit table, in coordinate order: (name, node policy). A policy
# (max_unique, step) takes the distinct log2 values as nodes when there are at most
# max_unique of them, else a regular log2 grid of that step (README "Model file").
AXES: dict[str, tuple[tuple[str, tuple[int, float]], ...]] = {
    "gemm": (("m", (80, 0.5)), ("n", (80, 0.5)), ("k", (80, 0.5))),
    "prefill_attn": (("seqs", (40, 0.5)), ("q", (40, 0.5)), ("prefix_ratio", (40, 0.5)),
                     ("heads", (40, 0.5)), ("group", (8, 1.0)), ("head_dim", (8, 0.5))),
    "decode_attn": (("seqs", (40, 0.5)), ("kv_len", (40, 0.5)), ("kv_heads", (40, 0.5)),
                    ("group", (8, 1.0)), ("head_dim", (8, 0.5))),
    "allreduce": (("bytes", (80, 0.5)), ("gpus", (8, 1.0))),
}


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def gemm_work(m, n, k, elem_bytes=2, weight_bytes=None):
    """(FLOPs, bytes) of ``[m, k] @ [k, n]``: weights + activations in and out.

    ``elem_bytes``: activation element size; ``weight_bytes``: weight element size
    (default: the same)."""
    m, n, k = _f(m), _f(n), _f(k)
    w = elem_bytes if weight_bytes is None else weight_bytes
    return 2.0 * m * n * k, elem_bytes * (m * k + m * n) + w * k * n


def prefill_work(batch, q, p, heads, kv_heads, head_dim, act_bytes=2, kv_bytes=2):
    """(FLOPs, bytes) of causal attention of ``q`` new tokens over ``p`` cached + themselves."""
    b, q, p = _f(batch), _f(q), _f(p)
    hd, kvd = _f(heads) * head_dim, _f(kv_heads) * head_dim
    flops = 4.0 * hd * b * (q * p + q * (q + 1) / 2)
    nbytes = b * (kv_bytes * 2 * kvd * (p + q) + act_bytes * 2 * hd * q)
    return flops, nbytes


def decode_work(batch, kv_len, heads, kv_heads, head_dim, act_bytes=2, kv_bytes=2):
    """(FLOPs, bytes) of one query token per sequence over ``kv_len`` cached tokens."""
    b, s = _f(batch), _f(kv_len)
    hd, kvd = _f(heads) * head_dim, _f(kv_heads) * head_dim
    return 4.0 * hd * b * s, b * (kv_bytes * 2 * kvd * s + act_bytes * 2 * hd)


def allreduce_wire_bytes(msg_bytes, gpus):
    """Bytes each GPU sends in a ring all-reduce of ``msg_bytes`` over ``gpus`` GPUs."""
    g = _f(gpus)
    return 2.0 * (g - 1) / g * _f(msg_bytes)


def roofline_s(flops, nbytes, peak_flops: float, mem_bw: float, floor_s: float):
    """Normalising time: ``max(FLOPs / peak, bytes / bandwidth) + floor`` (seconds).

    Fits model ``log2(measured / roofline_s)``; the floor (a launch-latency scale) keeps
    that ratio in a small range for tiny operations.
    """
    return np.maximum(_f(flops) / peak_flops, _f(nbytes) / mem_bw) + floor_s


def gemm_coords(m, n, k) -> np.ndarray:
    """[N, 3] fit coordinates of GEMMs."""
    return np.log2(np.stack(np.broadcast_arrays(_f(m), _f(n), _f(k)), axis=-1))


def prefill_coords(batch, q, p, heads, kv_heads, head_dim) -> np.ndarray:
    """[N, 6] fit coordinates: log2 of sequences, q, 1 + p/q, heads, h/h_kv, head_dim."""
    b, q, p, h, hkv, d = np.broadcast_arrays(*(_f(a) for a in (batch, q, p, heads, kv_heads,
                                                                head_dim)))
    return np.log2(np.stack((b, q, 1.0 + p / q, h, h / hkv, d), axis=-1))


def decode_coords(batch, kv_len, heads, kv_heads, head_dim) -> np.ndarray:
    """[N, 5] fit coordinates: log2 of sequences, KV length, KV heads, h/h_kv, head_dim."""
    b, s, h, hkv, d = np.broadcast_arrays(*(_f(a) for a in (batch, kv_len, heads, kv_heads,
                                                             head_dim)))
    return np.log2(np.stack((b, s, hkv, h / hkv, d), axis=-1))


def allreduce_coords(msg_bytes, gpus) -> np.ndarray:
    """[N, 2] fit coordinates: log2 of message bytes and GPU count."""
    return np.log2(np.stack(np.broadcast_arrays(_f(msg_bytes), _f(gpus)), axis=-1))
