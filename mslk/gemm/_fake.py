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


@torch.library.register_fake("mslk::f8f8bf16_rowwise_preshuffle")
def _f8f8bf16_rowwise_preshuffle(XQ, WQ, x_scale, w_scale, bias=None, use_fast_accum=True):
    return _mm_out(XQ, WQ)


@torch.library.register_fake("mslk::f8f8f16_rowwise_preshuffle")
def _f8f8f16_rowwise_preshuffle(XQ, WQ, x_scale, w_scale, bias=None, use_fast_accum=True):
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
    if len(XQ) == 0:  # as the C++ check says (no tensor to take a device from)
        raise ValueError("f8f8bf16_rowwise_grouped_cat: argument 'XQ' (and 'WQ') must hold at least one group, "
                         "got empty lists")
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
    # the layout checks of the C++ op (fp8_rowwise_grouped.cpp), which never runs under the fake
    op = "f8f8bf16_rowwise_grouped_mm"
    if XQ.dim() not in (2, 3) or WQ.dim() not in (2, 3):
        raise ValueError(f"{op}: argument 'XQ' must be [total_M, K] or [G, M, K] and 'WQ' [G, N, K] or "
                         f"[total_N, K]; got 'XQ' {tuple(XQ.shape)}, 'WQ' {tuple(WQ.shape)}")
    if (offsets is None) != (XQ.dim() == 3 and WQ.dim() == 3):
        given = "None" if offsets is None else "given"
        raise ValueError(f"{op}: 'offsets' must be omitted for 3D x 3D (batched) inputs and given otherwise; "
                         f"got 'XQ' {tuple(XQ.shape)}, 'WQ' {tuple(WQ.shape)}, offsets {given}")
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
    # dot_out_dtype is the result's dtype (None: bf16); higher-rank a keeps its leading dims
    return _mm_out(a, b, dot_out_dtype or torch.bfloat16)


from mslk.gemm import _fake_bf16_grouped  # noqa: E402,F401  (BF16 grouped ops)
from mslk.gemm import _fake_blockwise  # noqa: E402,F401  (FP8 block/group-scaled ops)
from mslk.gemm import _fake_int  # noqa: E402,F401  (INT8 and BF16x9 GEMMs)
from mslk.gemm import _fake_int4  # noqa: E402,F401  (INT4-weight GEMMs)
from mslk.gemm import _empty_lists  # noqa: E402,F401  (after every fake)
