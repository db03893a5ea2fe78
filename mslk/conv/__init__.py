"""Convolution (spec group "Convolution - FP8 3D convolution"): torch.ops.mslk.f8f8bf16_conv.

The kernel is an SM100 (Blackwell) CUTLASS convolution, which this build does not make: the op
exists under the spec's schema with a fake implementation and raises when called.
"""

from __future__ import annotations

import torch

from mslk.utils import unavailable as _u


def _out_size(size: int, k: int, pad: int, stride: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _conv_fake(activation, filter, scale, padding, stride, dilation):
    # Logical NCDHW (channels_last_3d storage) and KCTRS in, [N, K, Z, P, Q] out in the same
    # memory format; NDHWC / KTRSC in, [N, Z, P, Q, K] out.
    ncdhw = activation.is_contiguous(memory_format=torch.channels_last_3d) and not activation.is_contiguous()
    if ncdhw:
        n, dims, k, kdims = activation.shape[0], activation.shape[2:], filter.shape[0], filter.shape[2:]
    else:
        n, dims, k, kdims = activation.shape[0], activation.shape[1:4], filter.shape[0], filter.shape[1:4]
    out = [_out_size(dims[i], kdims[i], padding[i], stride[i], dilation[i]) for i in range(3)]
    if ncdhw:
        return activation.new_empty((n, k, *out), dtype=torch.bfloat16).contiguous(
            memory_format=torch.channels_last_3d)
    return activation.new_empty((n, *out, k), dtype=torch.bfloat16)


_u.define_op("mslk", "f8f8bf16_conv(Tensor activation, Tensor filter, Tensor scale, int[3] padding, int[3] stride, "
             "int[3] dilation) -> Tensor", _u.SM100, _conv_fake)
