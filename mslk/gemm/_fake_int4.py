"""Fake (Meta) implementations of the INT4-weight GEMMs (rowwise and preshuffled), for torch.compile and
export.

Shapes only; argument checks live in the C++ implementations (csrc/gemm/int4_gemm.cpp).
"""

import torch


@torch.library.register_fake("mslk::bf16i4bf16_rowwise")
def _bf16i4bf16_rowwise(X, W, w_scale_group, w_zero_group):
    return X.new_empty((X.shape[0], W.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::bf16i4bf16_rowwise_batched")
def _bf16i4bf16_rowwise_batched(X, WQ, w_scale, w_zp):
    return X.new_empty((X.shape[0], X.shape[1], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8i4bf16_rowwise")
def _f8i4bf16_rowwise(XQ, WQ, x_scale, w_scale, w_zp):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::bf16i4bf16_shuffled")
def _bf16i4bf16_shuffled(X, W, w_scale_group, w_zero_group):
    return X.new_empty((X.shape[0], W.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::bf16i4bf16_shuffled_batched")
def _bf16i4bf16_shuffled_batched(X, WQ, w_scale, w_zp):
    return X.new_empty((X.shape[0], X.shape[1], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::bf16i4bf16_shuffled_grouped")
def _bf16i4bf16_shuffled_grouped(X, WQ, w_scale_group, w_zero_group, M_sizes):
    return X.new_empty((X.shape[0], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8i4bf16_shuffled")
def _f8i4bf16_shuffled(XQ, WQ, x_scale, w_scale, w_scale_group):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8i4bf16_shuffled_grouped")
def _f8i4bf16_shuffled_grouped(XQ, WQ, x_scale, w_scale, w_scale_group, M_sizes):
    return XQ.new_empty((XQ.shape[0], WQ.shape[1]), dtype=torch.bfloat16)


# preshuffle_i4 is CompositeExplicitAutograd (plain tensor ops): its C++ implementation runs on meta tensors.
