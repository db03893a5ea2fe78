"""FP4 decode / dequantization helpers (spec group "Quantization - NVFP4 & legacy FP4").

No FP4 / MX support in this build yet: each function exists with the spec's signature and raises
(mslk.utils.unavailable).
"""

from __future__ import annotations

import torch

from mslk.utils.unavailable import FP4, unavailable


@unavailable(FP4)
def global_scale_nvfp4(x) -> torch.Tensor:
    """Standard NVFP4 global scale (448 * 6 / amax)."""


@unavailable(FP4)
def fp4_to_float(x) -> torch.Tensor:
    """E2M1 nibbles to FP32."""


@unavailable(FP4)
def scale_nvfp4(x, scale, global_scale, group_size=16) -> torch.Tensor:
    """Apply NVFP4 block and global scales to decoded values."""


@unavailable(FP4)
def dequantize_nvfp4(input_quantized, scale, global_scale, group_size=16) -> torch.Tensor:
    """Packed NVFP4 to BF16."""


@unavailable(FP4)
def dequantize_mx4(input_quantized, scale, group_size=32) -> torch.Tensor:
    """Packed MXFP4 with NVIDIA blocked scales to BF16."""
