"""torch.library facade of the standalone Blackwell FMHA; raises in this build (no SM100 kernels)."""

from __future__ import annotations

from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface import _REASON
from mslk.utils.unavailable import unavailable


@unavailable(_REASON)
def cutlass_blackwell_fmha_custom_op(q, k, v, softmax_scale=None, causal=False, cu_seqlens_q=None, cu_seqlens_k=None,
                                     max_seq_len_q=None, max_seq_len_k=None, seqlen_kv=None, page_table=None,
                                     seqlen_k=-1, window_size_left=-1, window_size_right=-1, bottom_right=True):
    """Output of torch.ops.mslk.cutlass_blackwell_fmha_fwd (its LSE dropped)."""
