"""FP4 Triton primitives (spec group "Quantization - FP4 constants & primitives").

The two constants are real (tl.constexpr, read on the host through .value). The primitives are
device functions of the FP4 quantizers, which this build does not make yet: each exists with the
spec's signature and raises (mslk.utils.unavailable).
"""

from __future__ import annotations

from mslk.utils.unavailable import FP4, unavailable

try:
    from triton.language import constexpr as _constexpr
except ImportError:  # Triton absent: the same host-side view (.value)
    class _constexpr:  # noqa: N801
        def __init__(self, value):
            self.value = value

        def __repr__(self):
            return f"constexpr[{self.value}]"

E8M0_EXPONENT_BIAS = _constexpr(127)
BF16_MIN_NORMAL = _constexpr(2**-126)


@unavailable(FP4)
def blocked_scale_offset(logical_row, logical_col, n_col_blocks, num_cols):
    """Offset of a logical scale coordinate in the 128 x 4 blocked (Blackwell) layout."""


@unavailable(FP4)
def stacked_segment_map(m_sizes_ptr, pid_m, M_PER_BLOCK, NUM_SEGMENTS, PREFIX_NUM, BSEARCH_ITERS):
    """Segment (expert) of a stacked row tile."""


@unavailable(FP4)
def mx4_scale_normalize_encode(x_blocks, block_amax, pid_m, pid_n, seed, N, M_PER_BLOCK, NUM_GROUPS, GROUP_SIZE,
                               ROUNDING_MODE, EBITS, MBITS, STOCHASTIC):
    """Normalize an MX block and encode its E8M0 scale."""


@unavailable(FP4)
def convert_fp32_to_fp4_packed(x_pairs, IS_GFX950, IS_ROCM):
    """Pairs of FP32 values to packed E2M1 nibbles."""
