"""Raw Blackwell torch ops (spec group "Attention - Raw Blackwell torch ops").

No SM100 kernel in this build: the ops exist under the spec's schemas with fake implementations
and raise when called (mslk.utils.unavailable).
"""

from __future__ import annotations

import math

import torch

from mslk.utils import unavailable as _u


def _fwd_fake(query, key, value, *args, **kwargs):
    out = query.new_empty((*query.shape[:-1], value.shape[-1]))
    if query.dim() == 4:  # [B, M, H, D] -> LSE [B, H, M]
        lse = query.new_empty((query.shape[0], query.shape[2], query.shape[1]), dtype=torch.float32)
    else:  # varlen [total, H, D] -> packed LSE [H, total]
        lse = query.new_empty((query.shape[1], query.shape[0]), dtype=torch.float32)
    return out, lse


def _bwd_fake(dout, query, key, value, *args, **kwargs):
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


def _gen_fake(query, key, value, seqlen_kv, batch_idx=None, kernel_type=0, window_left=-1, window_right=-1,
              split_k_size=1024):
    # q [B, H, D] or [B, 1, H, D]; K/V [B, Mk, Hkv, D]; splits are left unmerged.
    b, h, d = query.shape[0], query.shape[-2], value.shape[-1]
    splits = max(1, math.ceil(key.shape[1] / split_k_size)) if split_k_size > 0 else 1
    out = query.new_empty((b, 1, h, splits, d))
    lse = query.new_empty((b, splits, h, 1), dtype=torch.float32)
    return out, lse


_FWD_TAIL = ("Tensor? seqlen_kv=None, Tensor? page_table=None, int? seqlen_k=None, int window_size_left=-1, "
             "int window_size_right=-1, bool bottom_right=True) -> (Tensor, Tensor)")
_BWD_TAIL = ("Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, int? max_seq_len_q=None, "
             "int? max_seq_len_k=None, float? softmax_scale=None, bool causal=False, int window_size_left=-1, "
             "int window_size_right=-1, bool bottom_right=True, bool deterministic=False) "
             "-> (Tensor, Tensor, Tensor)")
SCHEMAS = {
    ("fmha_fwd(Tensor query, Tensor key, Tensor value, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, "
     "int? max_seq_len_q=None, int? max_seq_len_k=None, float? softmax_scale=None, bool causal=False, "
     + _FWD_TAIL): _fwd_fake,
    ("fmha_bwd(Tensor dOutput, Tensor query, Tensor key, Tensor value, Tensor output, Tensor softmax_lse, "
     + _BWD_TAIL): _bwd_fake,
    ("fmha_gen_fwd(Tensor query, Tensor key, Tensor value, Tensor seqlen_kv, Tensor? batch_idx=None, "
     "int kernel_type=0, int window_left=-1, int window_right=-1, int split_k_size=1024) -> (Tensor, Tensor)"):
        _gen_fake,
    ("cutlass_blackwell_fmha_fwd(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
     "int? max_seq_len_q, int? max_seq_len_k, float? softmax_scale, bool causal, Tensor? seqlen_kv, "
     "Tensor? page_table, int seqlen_k=-1, int window_size_left=-1, int window_size_right=-1, "
     "bool bottom_right=True) -> (Tensor, Tensor)"): _fwd_fake,
    ("cutlass_blackwell_fmha_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
     "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int? max_seq_len_q, int? max_seq_len_k, float? softmax_scale, "
     "bool causal, int window_size_left=-1, int window_size_right=-1, bool bottom_right=True, "
     "bool deterministic=False) -> (Tensor, Tensor, Tensor)"): _bwd_fake,
}

for _schema, _fake in SCHEMAS.items():
    _u.define_op("mslk", _schema, _u.SM100, _fake)
