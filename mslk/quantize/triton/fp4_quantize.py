"""FP4 quantizers (spec groups "Quantization - MXFP4 quantization", "- NVFP4 & legacy FP4",
"- FP4 constants & primitives").

This build makes no FP4 / MX kernel yet: the constants, RoundingMode and get_mx4_exp_bias are
real; every quantizer exists with the spec's signature and raises (mslk.utils.unavailable).
"""

from __future__ import annotations

import enum

import torch

from mslk.utils.unavailable import FP4, unavailable

FP4_E2M1_MAX = 6.0
FP8_E4M3_MAX = 448
FP4_EBITS = 2
FP4_MBITS = 1


class RoundingMode(enum.IntEnum):
    """How an MX block's shared exponent is rounded (stochastic is CUDA-only)."""

    nearest = 0
    floor = 1
    even = 2
    stochastic = 3
    ceil = 4


def get_mx4_exp_bias(ebits) -> int:
    """Exponent bias of an element format with `ebits` exponent bits (E2M1: 1)."""
    return 2 ** (ebits - 1) - 1


@unavailable(FP4)
def triton_quantize_mx4(input, *, rounding_mode=RoundingMode.ceil, seed=None) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4, group 32: packed uint8 [..., K/2] and E8M0 scales."""


@unavailable(FP4)
def triton_quantize_mx4_unpack(input, group_size=32, ebits=2, mbits=1, rounding_mode=RoundingMode.ceil,
                               stochastic_casting=False, *, seed=None) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4 with group 16 / 32 and the legacy rounding arguments."""


@unavailable(FP4)
def triton_quantize_nvfp4(x, global_scale, use_e8m0_scale=False, use_precise_math=True
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 (group 16, E4M3 block scales): packed FP4 and swizzled scales."""


@unavailable(FP4)
def triton_fake_quantize_nvfp4_per_tensor(input, static_scales=None, scale_ub=None
                                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor NVFP4 fake quantization: BF16 values and the FP32 scale (or amax)."""


@unavailable(FP4)
def nvfp4_quantize_stacked(m_sizes, input, global_scale) -> tuple[torch.Tensor, torch.Tensor]:
    """Stacked NVFP4: packed FP4 and the padded 2D swizzled scale buffer."""


@unavailable(FP4)
def nvfp4_quantize_stacked_with_token_scale(m_sizes, input) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stacked NVFP4 with a per-token inverse scale."""


@unavailable(FP4)
def calculate_group_max(input, m_sizes) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-segment NVFP4 global scales (448 * 6 / amax) and the row-to-segment map."""


@unavailable(FP4)
def cal_global_scale_mx4_as_nvfp4(x) -> torch.Tensor:
    """NVFP4-style global scale for MXFP4 data."""


@unavailable(FP4)
def unsigned_fp32_to_e8m0(tensor, mbits, scale_round_mode):
    """Triton primitive: positive FP32 magnitudes to E8M0 scales."""


@unavailable(FP4)
def nvfp4_scale_swizzle(offs_m):
    """Triton helper: rows into the NVFP4 scale-swizzle layout."""
