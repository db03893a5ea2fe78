"""Standalone Blackwell FMHA (spec group "Attention - Standalone Blackwell FMHA").

The CUTLASS Blackwell (SM100) kernels are not part of this build. cutlass_blackwell_fmha_func and
_cutlass_blackwell_fmha_forward run mslk's fused attention ops instead (Hopper / Ampere kernels on
CUDA, the exact reference on CPU; see mslk.attention.fmha._raw_bwd_ops); the decode path
(cutlass_blackwell_fmha_decode_forward, get_splitk_heuristic) raises (mslk.utils.unavailable).
"""

from __future__ import annotations

import enum
from typing import Optional, Tuple

import torch

from mslk.utils.unavailable import SM100, unavailable

_REASON = SM100 + ". Use mslk.attention.fmha.memory_efficient_attention instead"


class GenKernelType(enum.IntEnum):
    """Generated UMMA kernel family of the decode path (torch.ops.mslk.fmha_gen_fwd's kernel_type)."""

    UMMA_I = 0
    UMMA_P = 1


def cutlass_blackwell_fmha_func(q, k, v, softmax_scale: Optional[float] = None, causal: bool = False,
                                cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None, max_seq_len_k=None,
                                seqlen_kv=None, page_table=None, seqlen_k=None,
                                window_size: Tuple[int, int] = (-1, -1), bottom_right: bool = True,
                                deterministic: bool = False) -> torch.Tensor:
    """Autograd-capable dense / varlen attention. The spec's SM100 kernels are absent: this runs
    mslk's fused attention ops (Hopper / Ampere kernels on CUDA, the exact reference on CPU)."""
    from mslk.attention.fmha._raw_bwd_ops import blackwell_fmha_func

    return blackwell_fmha_func(q, k, v, softmax_scale, causal, cu_seqlens_q, cu_seqlens_k, max_seq_len_q,
                               max_seq_len_k, seqlen_kv, page_table, seqlen_k, window_size, bottom_right, deterministic)


@unavailable(_REASON)
def cutlass_blackwell_fmha_decode_forward(q, k, v, seqlen_kv=None, cu_seqlens_q=None, cu_seqlens_k=None,
                                          max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False,
                                          window_left=-1, window_right=-1, bottom_right=True, split_k_size=0,
                                          use_heuristic=True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Split-K decode: out [B,1,H,num_splits,D] and LSE [B,num_splits,H,1], splits left unmerged."""


def _cutlass_blackwell_fmha_forward(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None,
                                    max_seq_len_k=None, softmax_scale=None, causal=False, seqlen_kv=None,
                                    page_table=None, seqlen_k=None, window_left=-1, window_right=-1,
                                    bottom_right=True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Forward returning (out, lse), on mslk's fused attention ops (see cutlass_blackwell_fmha_func)."""
    return torch.ops.mslk.cutlass_blackwell_fmha_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_len_q,
                                                     max_seq_len_k, softmax_scale, causal, seqlen_kv, page_table,
                                                     -1 if seqlen_k is None else seqlen_k, window_left,
                                                     window_right, bottom_right)


@unavailable(_REASON)
def get_splitk_heuristic(batch: int, seqlen_kv: int, kv_heads: int = 1, tile_n: int = 256,
                         sm_count: Optional[int] = None) -> int:
    """Decode split size for the SM count of a Blackwell GPU (0: no split)."""
