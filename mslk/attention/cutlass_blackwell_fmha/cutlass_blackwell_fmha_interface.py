"""Standalone Blackwell FMHA (spec group "Attention - Standalone Blackwell FMHA").

The CUTLASS Blackwell (SM100) kernels are not part of this build. cutlass_blackwell_fmha_func and
_cutlass_blackwell_fmha_forward run mslk's fused attention ops instead (Hopper / Ampere kernels on
CUDA, the exact reference on CPU; see mslk.attention.fmha._raw_bwd_ops); the decode path
(cutlass_blackwell_fmha_decode_forward, torch.ops.mslk.fmha_gen_fwd) runs mslk's split-K decode op
with the splits left unmerged (_decode.py), and get_splitk_heuristic sizes splits by that op's plan.
"""

from __future__ import annotations

import enum
from typing import Optional, Tuple

import torch

from mslk.attention.cutlass_blackwell_fmha import _decode


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


def cutlass_blackwell_fmha_decode_forward(q, k, v, seqlen_kv=None, cu_seqlens_q=None, cu_seqlens_k=None,
                                          max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False,
                                          window_left=-1, window_right=-1, bottom_right=True, split_k_size=0,
                                          use_heuristic=True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Split-K decode: out [B,1,H,num_splits,D] and LSE [B,num_splits,H,1], splits left unmerged
    (_decode.py: q [B, H, D] or [B, 1, H, D] at the end of its seqlen_kv keys). split_k_size > 0
    fixes the split size; else get_splitk_heuristic's (use_heuristic) or one split. The causal
    mask is the bottom-right one (the query is the last position); variable-length packing
    (cu_seqlens_q / cu_seqlens_k) and a top-left causal mask are not served."""
    api = "cutlass_blackwell_fmha_decode_forward"
    if seqlen_kv is None:
        raise ValueError(f"{api}: seqlen_kv is required (the keys each sequence holds)")
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        raise NotImplementedError(f"{api}: cu_seqlens_q / cu_seqlens_k are not supported here; use "
                                  "mslk.attention.fmha with a decode mask (triton_splitk.FwOp)")
    if causal and not bottom_right:
        raise NotImplementedError(f"{api}: a top-left causal mask is not supported for decode (bottom_right=True)")
    if split_k_size <= 0 and use_heuristic:
        split_k_size = get_splitk_heuristic(q.shape[0], k.shape[1], k.shape[2])
    return _decode.split_decode(api, q, k, v, seqlen_kv, None, window_left, split_k_size, softmax_scale)


def _cutlass_blackwell_fmha_forward(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None,
                                    max_seq_len_k=None, softmax_scale=None, causal=False, seqlen_kv=None,
                                    page_table=None, seqlen_k=None, window_left=-1, window_right=-1,
                                    bottom_right=True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Forward returning (out, lse), on mslk's fused attention ops (see cutlass_blackwell_fmha_func)."""
    return torch.ops.mslk.cutlass_blackwell_fmha_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_len_q,
                                                     max_seq_len_k, softmax_scale, causal, seqlen_kv, page_table,
                                                     -1 if seqlen_k is None else seqlen_k, window_left,
                                                     window_right, bottom_right)


def get_splitk_heuristic(batch: int, seqlen_kv: int, kv_heads: int = 1, tile_n: int = 256,
                         sm_count: Optional[int] = None) -> int:
    """Decode split size (a multiple of tile_n) for batch x kv_heads sequences of seqlen_kv keys on
    sm_count SMs (default: the current CUDA device's, 132 without one), from the split count mslk's
    decode plan picks (torch.ops.mslk.fmha_decode_num_splits, head dim 128); 0 when one split covers
    the sequence."""
    if batch <= 0 or seqlen_kv <= 0 or kv_heads <= 0 or tile_n <= 0:
        raise ValueError(f"get_splitk_heuristic: batch, seqlen_kv, kv_heads and tile_n must be positive; got "
                         f"{batch}, {seqlen_kv}, {kv_heads}, {tile_n}")
    if sm_count is None:
        sm_count = torch.cuda.get_device_properties().multi_processor_count if torch.cuda.is_available() else 132
    splits = int(torch.ops.mslk.fmha_decode_num_splits(batch * kv_heads, seqlen_kv, 128, int(sm_count)))
    if splits <= 1:
        return 0
    size = -(-(-(-seqlen_kv // splits)) // tile_n) * tile_n
    return 0 if size >= seqlen_kv else size
