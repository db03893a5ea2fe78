"""Python glue of the split-K decode op (torch.ops.mslk.fmha_decode_splitk): the query / K/V head
grouping its kernel reads (quantized caches' scale/shift rows included), and the op's fake (Meta)
implementation for torch.compile."""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch

_OP = "mslk::fmha_decode_splitk"


def op_loaded() -> bool:
    return hasattr(torch.ops.mslk, "fmha_decode_splitk")


if op_loaded():

    @torch.library.register_fake(_OP)
    def _fmha_decode_splitk(q, k, v, seqstart_q=None, seqstart_k=None, seqlen_k=None, max_seqlen_q=-1, mask_kind=0,
                            window_left=-1, window_right=-1, scale=1.0, block_tables=None, page_size=0, num_splits=0,
                            output_dtype=None, k_scale_shift=None, v_scale_shift=None):
        B, Mq, Hkv, R, D = q.shape
        Kv = D if v.dtype == torch.int32 else v.shape[-1]  # quantized caches: the logical head dim
        out = q.new_empty((B, Mq, Hkv, R, Kv), dtype=output_dtype if output_dtype is not None else q.dtype)
        lse = q.new_empty((B, Hkv, R, Mq), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
        return out, lse


def _shared(x: torch.Tensor, dim: int) -> bool:
    """Whether x is the same tensor along `dim` (an expand()ed K/V head dim)."""
    return x.shape[dim] > 1 and x.stride(dim) == 0


def group_size(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    """Query heads per K/V head group_heads makes of BMHK / BMGHK q, k, v (R)."""
    return q.shape[-2] if _shared(k, q.ndim - 2) and _shared(v, q.ndim - 2) else 1


def group_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Callable, Callable]:
    """BMHK or BMGHK q, k, v -> (q [B, Mq, Hkv, R, K], k [B, Mkv, Hkv, K], v [B, Mkv, Hkv, Kv],
    out_back, lse_back): K/V heads expanded over the query heads (stride 0) are read once per
    group; otherwise every query head is its own group (R = 1). out_back / lse_back map the op's
    out [B, Mq, Hkv, R, Kv] and lse [B, Hkv, R, Mq] to q's layout ([B, Mq, (G,) H, Kv], [B, (G,) H, Mq])."""
    B, Mq, Mkv, Kv = q.shape[0], q.shape[1], k.shape[1], v.shape[-1]
    heads = q.shape[2:-1]  # (H,) or (G, H)
    if group_size(q, k, v) > 1:  # K/V heads shared by the last head dim
        if q.ndim == 4:
            q5, k4, v4 = q.unsqueeze(2), k.narrow(2, 0, 1), v.narrow(2, 0, 1)
        else:  # (select / narrow: a fraction of the cost of Python indexing, on every decode call)
            q5, k4, v4 = q, k.select(3, 0), v.select(3, 0)
    else:
        n = 1
        for h in heads:
            n *= h
        q5 = q.reshape(B, Mq, n, 1, q.shape[-1])
        k4, v4 = k.reshape(B, Mkv, n, k.shape[-1]), v.reshape(B, Mkv, n, Kv)
    return (q5, k4, v4, lambda out: out.reshape(B, Mq, *heads, out.shape[-1]),
            lambda lse: lse.reshape(lse.shape[0], *heads, lse.shape[-1]))


def group_like_k(x: torch.Tensor, q: torch.Tensor, grouped: bool) -> torch.Tensor:
    """A per-K/V-row tensor x [B, Mkv, (G,) H, W] grouped as group_heads groups K: head 0 of each
    group (grouped, the rows are shared over the query heads) or every head flattened."""
    if grouped:
        return x[:, :, :1] if q.ndim == 4 else x[:, :, :, 0]
    return x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1])


def grouped_scale_shift(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_scale_shift, v_scale_shift
                        ) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """The FP8 caches' per-row scale/shift tensors (k's rows' shape, int32 fp16 pairs or float32)
    grouped as group_heads groups k / v, [B, Mkv, Hkv, 1]; (None, None) for INT4 caches."""
    if k_scale_shift is None:
        return None, None
    grouped = group_size(q, k, v) > 1
    return (group_like_k(k_scale_shift.reshape(*k.shape[:-1], 1), q, grouped),
            group_like_k(v_scale_shift.reshape(*v.shape[:-1], 1), q, grouped))
