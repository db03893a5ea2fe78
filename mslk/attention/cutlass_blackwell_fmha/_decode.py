"""The Blackwell split-K decode interfaces served on other GPUs by mslk's split-K decode op
(torch.ops.mslk.fmha_decode_splitk): torch.ops.mslk.fmha_gen_fwd and
cutlass_blackwell_fmha_decode_forward, which leave the splits unmerged.

One query per sequence (q [B, H, D] or [B, 1, H, D]) against K/V [B_cache, Mk, Hkv, D] (H a
multiple of Hkv), sequence b holding seqlen_kv[b] keys of cache batch batch_idx[b] (default b). The
keys are cut into splits of split_k_size (one split when it is <= 0); split s yields attention
over the keys of [s * split_k_size, (s + 1) * split_k_size) that the query sees, normalized within
the split, and its natural-log LSE (-inf and out 0 where the split holds none):
out [B, 1, H, S, D] (q's dtype), lse [B, S, H, 1] (float32), S = ceil(Mk / split_k_size). Merging
them (mslk.attention.fmha.merge_attentions) gives attention over all the keys. The query sits at
position seqlen_kv[b] - 1 (bottom-right): window_left >= 0 keeps the keys j >= seqlen - 1 -
window_left; keys after the query do not exist, so window_right has no effect. Each split is one
call of the decode op on a packed view of the cache (no copy when the cache's batch and key dims
are contiguous with each other), the visible keys of every sequence given as a key lane: no host
sync, so a call can be captured in a CUDA graph. kernel_type (the SM100 kernel family) is ignored.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch


def _check(api, q, k, v, seqlen_kv, batch_idx):
    if q.ndim == 4:
        if q.shape[1] != 1:
            raise ValueError(f"{api}: query must be [B, H, D] or [B, 1, H, D] (one query per sequence); "
                             f"got shape {tuple(q.shape)}")
        q = q[:, 0]
    if q.ndim != 3:
        raise ValueError(f"{api}: query must be [B, H, D] or [B, 1, H, D]; got shape {tuple(q.shape)}")
    if k.ndim != 4 or v.ndim != 4 or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"{api}: key and value must be [B_cache, Mk, Hkv, D] of one shape but the last dim; got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}")
    B, H, D = q.shape
    Hkv = k.shape[2]
    if k.shape[3] != D or Hkv == 0 or H % Hkv:
        raise ValueError(f"{api}: query {tuple(q.shape)} and key {tuple(k.shape)}: the head dims must match and the "
                         "query heads be a multiple of the key/value heads")
    for name, x in (("seqlen_kv", seqlen_kv), ("batch_idx", batch_idx)):
        if x is None and name == "batch_idx":
            continue
        if not isinstance(x, torch.Tensor) or x.dtype not in (torch.int32, torch.int64) or x.shape != (B,):
            got = (x.dtype, tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{api}: {name} must be an int32 / int64 tensor of shape ({B},) (one entry per query); "
                             f"got {got}")
    for name, x in (("seqlen_kv", seqlen_kv), ("batch_idx", batch_idx), ("key", k), ("value", v)):
        if x is not None and x.device != q.device:
            raise ValueError(f"{api}: {name} is on {x.device} but query is on {q.device}")
    return q


def split_decode(api: str, q, k, v, seqlen_kv, batch_idx=None, window_left: int = -1, split_k_size: int = 0,
                 scale: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [B, 1, H, S, D], lse [B, S, H, 1]) as the module docstring says."""
    q = _check(api, q, k, v, seqlen_kv, batch_idx)
    B, H, D = q.shape
    Bc, Mk, Hkv, _ = k.shape
    R = H // Hkv
    size = int(split_k_size) if split_k_size and split_k_size > 0 else max(Mk, 1)
    S = max(1, math.ceil(Mk / size))
    scale = D ** -0.5 if scale is None else float(scale)
    dev = q.device
    # Packed cache: lane b's keys start at row cache_b * Mk (a view when batch and key dims are contiguous).
    kp, vp = k.reshape(1, Bc * Mk, Hkv, D), v.reshape(1, Bc * Mk, Hkv, v.shape[-1])
    cache_b = (batch_idx if batch_idx is not None else torch.arange(B, device=dev)).to(torch.int64)
    n = seqlen_kv.to(torch.int64).clamp(0, Mk)
    lo = torch.zeros_like(n) if window_left < 0 else (n - 1 - int(window_left)).clamp_min(0)
    q5 = q.reshape(1, B, Hkv, R, D)
    seqstart_q = torch.arange(B + 1, dtype=torch.int32, device=dev)
    outs, lses = [], []
    for s in range(S):
        a = torch.maximum(lo, torch.full_like(lo, s * size))
        e = torch.minimum(n, torch.full_like(n, (s + 1) * size))
        seqlen = (e - a).clamp_min(0)
        start = cache_b * Mk + torch.minimum(a, torch.full_like(a, Mk))
        seqstart_k = torch.cat([start, start[-1:] + seqlen[-1:]]).to(torch.int32)
        out, lse = torch.ops.mslk.fmha_decode_splitk(q5, kp, vp, seqstart_q=seqstart_q, seqstart_k=seqstart_k,
                                                     seqlen_k=seqlen.to(torch.int32), max_seqlen_q=1, scale=scale)
        outs.append(out.reshape(B, H, out.shape[-1]))  # [1, B, Hkv, R, D] -> [B, H, D]
        lses.append(lse.reshape(Hkv * R, B).t())  # [1, Hkv, R, B] -> [B, H]
    out = torch.stack(outs, dim=2).unsqueeze(1)  # [B, 1, H, S, D]
    lse = torch.stack(lses, dim=1).unsqueeze(-1)  # [B, S, H, 1]
    return out, lse


def gen_fwd(query, key, value, seqlen_kv, batch_idx=None, kernel_type=0, window_left=-1, window_right=-1,
            split_k_size=1024):
    return split_decode("mslk.fmha_gen_fwd", query, key, value, seqlen_kv, batch_idx, window_left, split_k_size)


def gen_fwd_fake(query, key, value, seqlen_kv, batch_idx=None, kernel_type=0, window_left=-1, window_right=-1,
                 split_k_size=1024):
    b, h, d = query.shape[0], query.shape[-2], value.shape[-1]
    splits = max(1, math.ceil(key.shape[1] / split_k_size)) if split_k_size > 0 else 1
    return query.new_empty((b, 1, h, splits, d)), query.new_empty((b, splits, h, 1), dtype=torch.float32)
