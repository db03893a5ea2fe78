"""Standalone Blackwell FMHA facade (spec group "Attention - Standalone Blackwell FMHA").

The Blackwell (SM100) CUTLASS kernels are not part of this build: the functions exist with the
spec's signatures and raise a clear RuntimeError.
"""

from typing import Optional, Tuple

import torch

_NEEDS_SM100 = ("{fn}: the CUTLASS Blackwell FMHA is not available on this platform (needs SM100; this build has no "
                "Blackwell kernels). Use mslk.attention.fmha.memory_efficient_attention instead.")


def cutlass_blackwell_fmha_func(q, k, v, softmax_scale: Optional[float] = None, causal: bool = False,
                                cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None, max_seq_len_k=None,
                                seqlen_kv=None, page_table=None, seqlen_k=None,
                                window_size: Tuple[int, int] = (-1, -1), bottom_right: bool = True,
                                deterministic: bool = False) -> torch.Tensor:
    raise RuntimeError(_NEEDS_SM100.format(fn="cutlass_blackwell_fmha_func"))


def cutlass_blackwell_fmha_decode_forward(q, k, v, seqlen_kv=None, cu_seqlens_q=None, cu_seqlens_k=None,
                                          max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False,
                                          window_left=-1, window_right=-1, bottom_right=True, split_k_size=0,
                                          use_heuristic=True):
    raise RuntimeError(_NEEDS_SM100.format(fn="cutlass_blackwell_fmha_decode_forward"))


__all__ = ["cutlass_blackwell_fmha_func", "cutlass_blackwell_fmha_decode_forward"]
