"""Fake (Meta) implementations of the quantization ops, for torch.compile and export.

Shapes only; argument checks live in the C++ implementations (the real kernels raise).
"""

import torch

_FP8 = torch.float8_e4m3fn


def _cdiv(a, b):
    return (a + b - 1) // b


@torch.library.register_fake("triton::quantize_fp8_row")
def _quantize_fp8_row(a, scale_ub=None, zero_start_index_M=None, use_triton=True, output_device=None,
                      align_rows_to=None, eps_opt=1 / 512):
    k_out = a.shape[-1] if align_rows_to is None else _cdiv(a.shape[-1], align_rows_to) * align_rows_to
    dev = output_device if output_device is not None else a.device
    xq = a.new_empty((*a.shape[:-1], k_out), dtype=_FP8, device=dev)
    return xq, a.new_empty(a.shape[:-1], dtype=torch.float32, device=dev)


@torch.library.register_fake("triton::quantize_fp8_block")
def _quantize_fp8_block(x, block_m=256, block_k=256, scale_ub=None, use_triton=True, output_device=None,
                        k_major=True):
    gm, gk = _cdiv(x.shape[0], block_m), _cdiv(x.shape[1], block_k)
    dev = output_device if output_device is not None else x.device
    xq = x.new_empty(x.shape, dtype=_FP8, device=dev)
    return xq, x.new_empty((gm, gk) if k_major else (gk, gm), dtype=torch.float32, device=dev)


@torch.library.register_fake("triton::quantize_fp8_tensor")
def _quantize_fp8_tensor(a, use_triton=True):
    return a.new_empty(a.shape, dtype=_FP8), a.new_empty((), dtype=torch.float32)


@torch.library.register_fake("mslk::quantize_fp8_group")
def _quantize_fp8_group(x, group_size=128, scale_ub=None, m_sizes=None, k_major=True):
    ng = x.shape[-1] // group_size
    shape = (*x.shape[:-1], ng) if (k_major or m_sizes is not None) else (ng, x.shape[0])
    return x.new_empty(x.shape, dtype=_FP8), x.new_empty(shape, dtype=torch.float32)


@torch.library.register_fake("mslk::dequantize_fp8_row")
def _dequantize_fp8_row(xq, x_scale):
    return xq.new_empty(xq.shape, dtype=torch.bfloat16)


@torch.library.register_fake("mslk::dequantize_fp8_block")
def _dequantize_fp8_block(xq, x_scale, block_m=256, block_k=256):
    return xq.new_empty(xq.shape, dtype=torch.bfloat16)
