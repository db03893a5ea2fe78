"""Fake (Meta) implementations of the rowwise FP8 GEMM ops, for torch.compile and export.

Shapes only; argument checks live in the C++ implementations (the real kernels raise).
"""

import torch


def _mm_out(XQ, WQ, dtype=torch.bfloat16):
    return XQ.new_empty((*XQ.shape[:-1], WQ.shape[0]), dtype=dtype)


@torch.library.register_fake("mslk::f8f8bf16_rowwise")
def _f8f8bf16_rowwise(XQ, WQ, x_scale, w_scale, bias=None, use_fast_accum=True):
    return _mm_out(XQ, WQ)


@torch.library.register_fake("mslk::f8f8f16_rowwise")
def _f8f8f16_rowwise(XQ, WQ, x_scale, w_scale, bias=None, use_fast_accum=True):
    return _mm_out(XQ, WQ, torch.float16)


@torch.library.register_fake("mslk::f8f8bf16_rowwise_out")
def _f8f8bf16_rowwise_out(XQ, WQ, x_scale, w_scale, output, bias=None, use_fast_accum=True):
    return None


# f8f8bf16_rowwise_batched and _grouped_mm are routers (csrc/common/out_router.h): fakes belong to
# their internal pair.
@torch.library.register_fake("mslk::_f8f8bf16_rowwise_batched_new")
def _f8f8bf16_rowwise_batched_new(XQ, WQ, x_scale, w_scale, bias=None, use_fast_accum=True):
    return XQ.new_empty((XQ.shape[0], XQ.shape[1], WQ.shape[-2]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8f8bf16_rowwise_grouped")
def _f8f8bf16_rowwise_grouped(XQ, WQ, x_scale, w_scale):
    return [x.new_empty((x.shape[0], w.shape[0]), dtype=torch.bfloat16) for x, w in zip(XQ, WQ)]


@torch.library.register_fake("mslk::f8f8bf16_rowwise_grouped_cat")
def _f8f8bf16_rowwise_grouped_cat(XQ, WQ, x_scale, w_scale):
    total = sum(x.shape[0] for x in XQ)
    return XQ[0].new_empty((total, WQ[0].shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8f8bf16_rowwise_grouped_stacked")
def _f8f8bf16_rowwise_grouped_stacked(XQ, WQ, x_scale, w_scale, M_sizes):
    return XQ.new_empty((XQ.shape[0], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::f8f8bf16_rowwise_grouped_dynamic")
def _f8f8bf16_rowwise_grouped_dynamic(XQ, WQ, x_scale, w_scale, zero_start_index_M, zeroing_output_tensor=True):
    return XQ.new_empty((XQ.shape[0], XQ.shape[1], WQ.shape[1]), dtype=torch.bfloat16)


@torch.library.register_fake("mslk::_f8f8bf16_rowwise_batched_into")
def _f8f8bf16_rowwise_batched_into(XQ, WQ, x_scale, w_scale, bias, use_fast_accum, output):
    return None


@torch.library.register_fake("mslk::_f8f8bf16_rowwise_grouped_mm_into")
def _f8f8bf16_rowwise_grouped_mm_into(XQ, WQ, x_scale, w_scale, offsets, output):
    return None


@torch.library.register_fake("mslk::_f8f8bf16_rowwise_grouped_mm_new")
def _f8f8bf16_rowwise_grouped_mm_new(XQ, WQ, x_scale, w_scale, offsets=None):
    if XQ.dim() == 3 and WQ.dim() == 3:
        shape = (XQ.shape[0], XQ.shape[1], WQ.shape[1])
    elif XQ.dim() == 2 and WQ.dim() == 3:
        shape = (XQ.shape[0], WQ.shape[1])
    elif XQ.dim() == 3:
        shape = (XQ.shape[1], WQ.shape[0])
    else:
        shape = (offsets.shape[0], XQ.shape[0], WQ.shape[0])
    return XQ.new_empty(shape, dtype=torch.bfloat16)


@torch.library.register_fake("triton::matmul_fp8_row")
def _matmul_fp8_row(a, b, a_scale, b_scale, bias=None, dot_out_dtype=None, allow_tf32=True, fp8_fast_accum=True,
                    imprecise_acc=False, tma_persistent=True, no_use_persistent=None, use_warp_specialization=False):
    return _mm_out(a, b)


from mslk.gemm import _fake_bf16_grouped  # noqa: E402,F401  (BF16 grouped ops)
