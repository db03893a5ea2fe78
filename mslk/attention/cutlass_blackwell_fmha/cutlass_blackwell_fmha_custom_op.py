"""torch.library facade of the standalone Blackwell FMHA (runs mslk's fused attention ops here:
no SM100 kernels in this build)."""

from __future__ import annotations

import torch


def cutlass_blackwell_fmha_custom_op(q, k, v, softmax_scale=None, causal=False, cu_seqlens_q=None, cu_seqlens_k=None,
                                     max_seq_len_q=None, max_seq_len_k=None, seqlen_kv=None, page_table=None,
                                     seqlen_k=-1, window_size_left=-1, window_size_right=-1, bottom_right=True):
    """Output of torch.ops.mslk.cutlass_blackwell_fmha_fwd (its LSE dropped)."""
    return torch.ops.mslk.cutlass_blackwell_fmha_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_len_q, max_seq_len_k,
                                                     softmax_scale, causal, seqlen_kv, page_table, seqlen_k,
                                                     window_size_left, window_size_right, bottom_right)[0]
