"""Fake (Meta) implementations of the block/group-scaled FP8 GEMM ops, for torch.compile and export.

Shapes only; argument checks live in the C++ implementations (csrc/gemm/fp8_blockwise.cpp).
"""

import torch


@torch.library.register_fake("mslk::f8f8bf16_blockwise")
def _f8f8bf16_blockwise(XQ, WQ, x_scale, w_scale, block_m=128, block_n=128, block_k=128):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8f8bf16_groupwise")
def _f8f8bf16_groupwise(XQ, WQ, x_scale, w_scale):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8f8bf16_groupwise_grouped")
def _f8f8bf16_groupwise_grouped(XQ, WQ, x_scale, w_scale, M_sizes):
    return XQ.new_empty((XQ.shape[0], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("triton::matmul_fp8_block")
def _matmul_fp8_block(a, b, a_scale, b_scale, scale_block_m=256, scale_block_n=256, scale_block_k=256,
                      dot_out_dtype=None, allow_tf32=True, fp8_fast_accum=True):
    # keeps a's leading dims, as the op does; dot_out_dtype is the result's dtype (None: bf16)
    return a.new_empty((*a.shape[:-1], b.shape[0]), dtype=dot_out_dtype or torch.bfloat16)
