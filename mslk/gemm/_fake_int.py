"""Fake (Meta) implementations of the INT8 GEMMs and bf16x9_gemm, for torch.compile and export.

Shapes only; argument checks live in the C++ implementations (csrc/gemm/int8_gemm.cpp, bf16x9.cpp).
"""

import torch


@torch.library.register_fake("mslk::i8i8bf16")
def _i8i8bf16(XQ, WQ, scale, split_k=1):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::i8i8bf16_dynamic")
def _i8i8bf16_dynamic(XQ, WQ, scale, split_k=1):
    return XQ.new_empty((XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)


# bf16x9_gemm is a router (csrc/common/out_router.h): fakes belong to its internal pair.
@torch.library.register_fake("mslk::_bf16x9_gemm_new")
def _bf16x9_gemm_new(A, B):
    return A.new_empty((A.shape[0], B.shape[0]), dtype=torch.float32)


@torch.library.register_fake("mslk::_bf16x9_gemm_into")
def _bf16x9_gemm_into(A, B, output):
    return None
