"""FlyDSL flash attention (spec group "Attention - FlyDSL Flash Attention"), AMD ROCm only.

This build carries no FlyDSL kernels (see mslk.flydsl.common): both functions exist with the
spec's signatures and raise (mslk.utils.unavailable).
"""

from __future__ import annotations

from mslk.flydsl.common import unavailable_reason
from mslk.utils.unavailable import unavailable


@unavailable(unavailable_reason)
def flydsl_flash_attn_func(q, k, v, *, causal=True, num_kv_heads=None, cu_seqlens_q=None, cu_seqlens_kv=None,
                           max_seqlen_q=None, max_seqlen_kv=None, cross_seqlen=None, block_table=None, seqlen_k=None,
                           kv_cache_layout="linear", num_kv_splits=1, q_descale=None, k_descale=None, v_descale=None,
                           out=None, waves_per_eu=2, daz=True, dualwave_swp_lazy_rescale=True,
                           dualwave_swp_setprio=True, dualwave_swp_enable_stagger=True, debug_counts=None,
                           return_lse=False, stream=None):
    """Dense / varlen / GQA / paged forward; (out, lse) with return_lse=True."""


@unavailable(unavailable_reason)
def dualwave_splitk_workspace_elems(batch_size, num_heads, seq_len, num_kv_splits, head_dim=128) -> int:
    """FP32 element count of the gfx950 dual-wave split-K workspace."""
