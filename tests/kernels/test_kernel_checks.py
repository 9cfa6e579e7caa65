"""Launchers reject bad inputs with a clear ValueError/TypeError before launching anything."""

import importlib

import pytest
import torch

from kernels import _checks, kv_write, paged_decode, paged_prefill
from tests.kernels.kernel_testlib import int32

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

S, H, HKV, D, BS, NB = 2, 8, 2, 32, 16, 6


def decode_args(**over):
    args = dict(q=torch.randn(S, H, D), k_cache=torch.randn(NB, BS, HKV, D),
                v_cache=torch.randn(NB, BS, HKV, D),
                block_table=torch.tensor([[0, 1, 2], [3, 4, -1]], dtype=torch.int32),
                seq_lens=int32([40, 20]))
    args.update(over)
    return args


def prefill_args(**over):
    args = decode_args(q=torch.randn(5, H, D))
    del args["seq_lens"]
    args.update(prefix_lens=int32([30, 17]), query_start_loc=int32([0, 2, 5]))
    args.update(over)
    return args


def kv_args(**over):
    args = dict(k=torch.randn(3, HKV, D), v=torch.randn(3, HKV, D),
                k_cache=torch.zeros(NB, BS, HKV, D), v_cache=torch.zeros(NB, BS, HKV, D),
                slot_mapping=torch.tensor([0, 17, -1]))
    args.update(over)
    return args


T = torch.randn(NB, BS, HKV, D)
BAD = [
    # (launcher, args, exception, message fragment)
    (paged_decode, decode_args(q=torch.randn(S, H, D).half()), TypeError, "q must have dtype"),
    (paged_decode, decode_args(k_cache=T.double(), v_cache=T.double()), TypeError, "k_cache"),
    (paged_decode, decode_args(v_cache=T.half()), TypeError, "v_cache"),
    (paged_decode, decode_args(q=torch.randn(S, H, D + 1)), ValueError, "q must have shape"),
    (paged_decode, decode_args(q=torch.randn(S, D, H).transpose(1, 2)), ValueError,
     "contiguous in its last dim"),
    (paged_decode, decode_args(k_cache=torch.randn(NB, BS, D, HKV).transpose(2, 3)),
     ValueError, "contiguous"),
    (paged_decode, decode_args(q=torch.randn(S, 6, D), k_cache=torch.randn(NB, BS, 4, D),
                               v_cache=torch.randn(NB, BS, 4, D)), ValueError, "multiple of"),
    (paged_decode, decode_args(block_table=torch.tensor([[0, 1, 2], [3, 9, -1]],
                                                        dtype=torch.int32)),
     ValueError, "block_table entries"),
    (paged_decode, decode_args(block_table=torch.tensor([[0, 1, 2], [-1, 4, 5]],
                                                        dtype=torch.int32)),
     ValueError, "block_table entries"),
    (paged_decode, decode_args(seq_lens=int32([49, 20])), ValueError, "capacity"),
    (paged_decode, decode_args(seq_lens=int32([-1, 20])), ValueError, ">= 0"),
    (paged_decode, decode_args(seq_lens=torch.tensor([40, 20])), TypeError, "seq_lens"),
    (paged_decode, decode_args(seq_lens=int32([40])), ValueError, "seq_lens must have shape"),
    (paged_decode, decode_args(block_table=torch.zeros(S, 3, dtype=torch.int64)), TypeError,
     "block_table"),
    (paged_decode, decode_args(out=torch.empty(S, H, D).half()), TypeError, "out"),
    (paged_decode, decode_args(out=torch.empty(S, H + 1, D)), ValueError, "out"),
    (paged_decode, decode_args(max_seq_len=30), ValueError, "max_seq_len"),
    (paged_decode, decode_args(num_splits=0), ValueError, "num_splits"),
    (paged_decode, decode_args(scale=float("nan")), ValueError, "scale"),
    (paged_decode, decode_args(q=[1.0]), TypeError, "torch.Tensor"),
    (paged_decode, decode_args(q=torch.randn(S, H, 512), k_cache=torch.randn(1, BS, HKV, 512),
                               v_cache=torch.randn(1, BS, HKV, 512)), ValueError, "head_dim"),
    (paged_prefill, prefill_args(query_start_loc=int32([0, 2, 4])), ValueError,
     "query_start_loc"),
    (paged_prefill, prefill_args(query_start_loc=int32([0, 6, 5])), ValueError,
     "non-decreasing"),
    (paged_prefill, prefill_args(query_start_loc=int32([0, 5])), ValueError,
     "query_start_loc must have shape"),
    (paged_prefill, prefill_args(prefix_lens=int32([47, 17])), ValueError, "capacity"),
    (paged_prefill, prefill_args(prefix_lens=int32([30, 30])), ValueError,
     "block_table entries"),
    (paged_prefill, prefill_args(max_query_len=2), ValueError, "max_query_len"),
    (paged_prefill, prefill_args(q=torch.randn(5, H, D).bfloat16()), TypeError, "q"),
    (paged_prefill, prefill_args(q=torch.randn(5, 3, D)), ValueError, "multiple of"),
    (kv_write, kv_args(slot_mapping=torch.tensor([0, NB * BS, 1])), ValueError, "slot_mapping"),
    (kv_write, kv_args(slot_mapping=torch.tensor([0, -2, 1])), ValueError, "slot_mapping"),
    (kv_write, kv_args(slot_mapping=torch.tensor([0.0, 1.0, 2.0])), TypeError, "slot_mapping"),
    (kv_write, kv_args(slot_mapping=torch.tensor([0, 1])), ValueError, "slot_mapping"),
    (kv_write, kv_args(k=torch.randn(3, HKV + 1, D)), ValueError, "k must have shape"),
    (kv_write, kv_args(v=torch.randn(3, HKV, D).half()), TypeError, "v must have dtype"),
    (kv_write, kv_args(k=torch.randn(3, D, HKV).transpose(1, 2)), ValueError, "contiguous"),
]


@pytest.mark.parametrize("launcher,args,exc,fragment", BAD,
                         ids=[f"{b[0].__name__}-{i}-{b[3]}" for i, b in enumerate(BAD)])
def test_bad_input_raises(launcher, args, exc, fragment):
    with pytest.raises(exc, match=fragment):
        launcher(**args)


def test_valid_inputs_pass_checks():
    """The baseline argument sets above are valid (so each BAD case tests one defect)."""
    paged_decode(**decode_args())
    paged_prefill(**prefill_args())
    kv_write(**kv_args())


def test_cpu_tensors_without_interpreter_are_rejected(monkeypatch):
    for name in ("kernels.paged_decode", "kernels.paged_prefill", "kernels.kv_write"):
        module = importlib.import_module(name)
        monkeypatch.setattr(module.chk, "is_interpreting", lambda kernel: False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        paged_decode(**decode_args())
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        kv_write(**kv_args())


def test_value_checks_can_be_skipped():
    """validate=False skips the (syncing) value checks; structural checks still run."""
    bad_table = decode_args(seq_lens=int32([49, 20]))
    with pytest.raises(ValueError):
        paged_decode(**bad_table)
    with pytest.raises(TypeError):
        paged_decode(**decode_args(q=torch.randn(S, H, D).half()), validate=False)


def test_check_gqa_returns_group():
    assert _checks.check_gqa(32, 8) == 4
