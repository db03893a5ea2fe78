"""ROCm MLA (spec group "Attention - ROCm MLA"): Triton kernels tuned for AMD gfx942 / gfx950.

Post-weight-absorption Multi-head Latent Attention in the fixed DeepSeek-V3 geometry. This build
targets NVIDIA only: the geometry constants exist, the two entry points raise
(mslk.utils.unavailable).
"""

from __future__ import annotations

import torch

from mslk.utils.unavailable import ROCM, unavailable

MLA_NUM_HEADS = 128
MLA_NUM_KV_HEADS = 1
MLA_KV_LORA_RANK = 512
MLA_QK_ROPE_HEAD_DIM = 64
MLA_QK_HEAD_DIM = MLA_KV_LORA_RANK + MLA_QK_ROPE_HEAD_DIM  # 576
MLA_V_HEAD_DIM = MLA_KV_LORA_RANK  # 512


@unavailable(ROCM)
def mla_decode_fwd(query, kv_buffer, block_tables, cu_seqlens_q, seqused_k, softmax_scale=None) -> torch.Tensor:
    """Paged decode, one query per sequence: query [B,128,576] -> BF16 [B,128,512]."""


@unavailable(ROCM)
def mla_prefill_fwd(query, kv_buffer, block_tables, cu_seqlens_q, seqused_k, softmax_scale=None) -> torch.Tensor:
    """Packed varlen prefill: query [total,128,576] -> BF16 [total,128,512]."""
