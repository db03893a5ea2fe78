"""Fake (Meta) implementations of the INT4-weight GEMMs (rowwise and preshuffled), for torch.compile and
export.

Shapes only; argument checks live in the C++ implementations (csrc/gemm/int4_gemm.cpp). Every op
takes the activations first and the packed weight second, and returns BF16.
"""

import torch


def _dense(x, w, *args, **kwargs):  # X [M, K], W [N, K/2] -> [M, N]
    return x.new_empty((x.shape[0], w.shape[0]), dtype=torch.bfloat16)


def _batched(x, w, *args, **kwargs):  # X [B, M, K], W [B, N, K/2] -> [B, M, N]
    return x.new_empty((x.shape[0], x.shape[1], w.shape[1]), dtype=torch.bfloat16)


def _grouped(x, w, *args, **kwargs):  # X [total_M, K], W [E, N, K/2] -> [total_M, N]
    return x.new_empty((x.shape[0], w.shape[1]), dtype=torch.bfloat16)


_SHAPES = {
    "bf16i4bf16_rowwise": _dense,
    "bf16i4bf16_rowwise_batched": _batched,
    "f8i4bf16_rowwise": _dense,
    "bf16i4bf16_shuffled": _dense,
    "bf16i4bf16_shuffled_batched": _batched,
    "bf16i4bf16_shuffled_grouped": _grouped,
    "f8i4bf16_shuffled": _dense,
    "f8i4bf16_shuffled_grouped": _grouped,
}
for _op, _fake in _SHAPES.items():
    torch.library.register_fake(f"mslk::{_op}")(_fake)

# preshuffle_i4 is CompositeExplicitAutograd (plain tensor ops): its C++ implementation runs on meta tensors.
