"""Raw attention ops served by the fused attention ops (torch.ops.mslk.fmha_fused_fwd / _bwd):

- mslk_flash::flash_bwd, mslk_flash3::flash_bwd (spec "Attention - Raw backend ops"): the
  FlashAttention 2 / 3 backward of the flash_fwd ops of _raw_ops.py (same mask semantics:
  bottom-right aligned windows, is_causal meaning window_right = 0), dense [B, M, H, K] with LSE
  [B, H, M] or variable-length [total, H, K] with LSE [H, total]; GQA/MQA (Hq a multiple of Hkv:
  dK/dV summed over the query heads of each K/V head). Dropout (mslk_flash only): flash_fwd with
  p > 0 draws rng_state from torch's CPU generator and returns it; flash_bwd regenerates the mask.
- mslk::fmha_fwd / fmha_bwd and mslk::cutlass_blackwell_fmha_fwd / _bwd (spec "Attention - Raw
  Blackwell torch ops"): the spec ties them to SM100 kernels; here they run the fused ops, i.e.
  mslk's own kernels on CUDA (Hopper / Ampere) and the exact reference on CPU. Layouts: dense
  [B, M, H, D] with LSE [B, H, M], or variable-length [total, H, D] with LSE [H, total]; causal and
  windows aligned bottom-right (bottom_right=True) or top-left; seqlen_kv limits each batch's keys;
  paged K/V (page_table, K/V as [num_pages, page_size, Hkv, D]) forward only.

Every op works on CPU (any float dtype) and on CUDA (fp16/bf16 forward; fp16/bf16/fp32 backward).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from mslk.attention.fmha import _raw_ops as _r
from mslk.utils.torch.library import define as _define

MASK_NONE, MASK_CAUSAL_TOP_LEFT, MASK_CAUSAL_BOTTOM_RIGHT, MASK_LOCAL_BOTTOM_RIGHT = 0, 1, 2, 3


def mask_args(causal: bool, window_left: int, window_right: int, bottom_right: bool) -> Tuple[int, int, int]:
    """(causal, windows, alignment) -> the fused ops' (mask_kind, window_left, window_right).
    Bottom-right is FlashAttention's convention (_raw_ops.flash_mask_args). Top-left: the same
    bounds on d = j - i (kind 1 if causal, else kind 0 with the windows)."""
    if bottom_right:
        return _r.flash_mask_args(causal, window_left, window_right)
    wl = int(window_left) if int(window_left) >= 0 else -1
    wr = int(window_right) if int(window_right) >= 0 else -1
    if causal:
        return MASK_CAUSAL_TOP_LEFT, wl, -1
    return MASK_NONE, wl, wr


def _per_query_head(k: torch.Tensor, Hq: int) -> torch.Tensor:
    """[B, N, Hkv, D] -> [B, N, Hq, D], K/V head h // (Hq / Hkv) for query head h (a copy)."""
    G = Hq // k.shape[2]
    if G == 1:
        return k
    return k.unsqueeze(3).expand(*k.shape[:3], G, k.shape[-1]).reshape(*k.shape[:2], Hq, k.shape[-1])


def _check_heads(api: str, q, k, v) -> None:
    for name, x in (("key", k), ("value", v)):
        if x.ndim != q.ndim:
            raise ValueError(f"{api}: {name} must have {q.ndim} dimensions like query; got shape {tuple(x.shape)}")
    Hq, Hkv = q.shape[-2], k.shape[-2]
    if Hkv == 0 or Hq % Hkv or v.shape[-2] != Hkv:
        raise ValueError(f"{api}: query heads ({Hq}) must be a multiple of key/value heads (key {Hkv}, value "
                         f"{v.shape[-2]})")


def _check_mode(api: str, q, cu_seqlens_q, cu_seqlens_k) -> bool:
    varlen = cu_seqlens_q is not None
    if varlen and (cu_seqlens_k is None or q.ndim != 3):
        raise ValueError(f"{api}: variable-length mode needs cu_seqlens_k and packed [total, H, K] tensors")
    if not varlen and (cu_seqlens_k is not None or q.ndim != 4):
        raise ValueError(f"{api}: dense mode needs [B, M, H, K] tensors and no cu_seqlens_k; got query "
                         f"{tuple(q.shape)}")
    return varlen


def flash_fwd_dropout(api, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, scale, is_causal,
                      window_left, window_right, p):
    """FlashAttention 2 forward with dropout: torch.ops.mslk.fmha_fused_fwd with a fresh rng_state
    (torch's CPU generator). K/V heads are expanded to the query heads: the dropout mask is indexed
    per query head, as flash_bwd reads it. Returns (out, lse float32, rng_state on q's device)."""
    from mslk.attention.fmha._backward import draw_rng_state

    if q.device.type == "cuda" and not _r._fused_takes(q, k, v):
        raise NotImplementedError(f"{api}: dropout on CUDA needs fp16/bf16 with head dims <= 256 (the fused kernel)")
    varlen = _check_mode(api, q, cu_seqlens_q, cu_seqlens_k)
    _check_heads(api, q, k, v)
    if varlen:
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
    k, v = _per_query_head(k, q.shape[2]), _per_query_head(v, q.shape[2])
    kind, wl, wr = _r.flash_mask_args(is_causal, window_left, window_right)
    dev, rng = q.device, draw_rng_state()
    out, lse = torch.ops.mslk.fmha_fused_fwd(
        q, k, v, None, seqstart_q=_r._i32(cu_seqlens_q, dev), seqstart_k=_r._i32(cu_seqlens_k, dev),
        seqlen_k=_r._i32(seqused_k, dev), max_seqlen_q=int(max_seqlen_q) if varlen else -1, mask_kind=kind,
        window_left=wl, window_right=wr, scale=float(scale), dropout_p=float(p), rng_state=rng)
    if varlen:
        out, lse = out[0], lse[0]
    return out, lse.float(), rng.to(dev)


def fused_bwd(api: str, grad, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              scale: float, mask: Tuple[int, int, int], deterministic: bool = False, p: float = 0.0,
              rng_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-layout backward on torch.ops.mslk.fmha_fused_bwd (see the module doc)."""
    varlen = _check_mode(api, q, cu_seqlens_q, cu_seqlens_k)
    _check_heads(api, q, k, v)
    for name, x in (("dout", grad), ("out", out), ("softmax_lse", lse)):  # cast below: refuse non-floats
        if not x.is_floating_point():
            raise TypeError(f"{api}: {name} must be a floating-point tensor, got {x.dtype}")
    if varlen:
        grad, q, k, v, out = (x.unsqueeze(0) for x in (grad, q, k, v, out))
        lse = lse.unsqueeze(0)
    Hq, Hkv = q.shape[2], k.shape[2]
    G = Hq // Hkv
    k, v = _per_query_head(k, Hq), _per_query_head(v, Hq)  # the op's per-head dK/dV are summed below
    dev = q.device
    kind, wl, wr = mask
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    grad, out, q, k, v = (x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous() for x in (grad, out, q, k, v))
    dq, dk, dv, _ = torch.ops.mslk.fmha_fused_bwd(
        grad.to(q.dtype), q, k, v, out.to(q.dtype), lse.to(acc), None, seqstart_q=_r._i32(cu_seqlens_q, dev),
        seqstart_k=_r._i32(cu_seqlens_k, dev), max_seqlen_q=int(max_seqlen_q) if varlen else -1,
        max_seqlen_k=int(max_seqlen_k) if varlen else -1, mask_kind=kind, window_left=wl, window_right=wr,
        scale=float(scale), dropout_p=float(p), rng_state=None if p == 0.0 else rng_state.cpu(),
        deterministic=bool(deterministic))
    if G > 1:
        dk = dk.view(*dk.shape[:2], Hkv, G, dk.shape[-1]).sum(3)
        dv = dv.view(*dv.shape[:2], Hkv, G, dv.shape[-1]).sum(3)
    if varlen:
        dq, dk, dv = dq[0], dk[0], dv[0]
    return dq, dk, dv


# --- FlashAttention 2 / 3 backward ----------------------------------------------------------------

def _flash2_bwd(grads_share_storage, grad, query, key, value, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                max_seqlen_k, p, softmax_scale, is_causal, window_left, window_right, rng_state):
    return fused_bwd("mslk_flash::flash_bwd", grad, query, key, value, out, lse, cu_seqlens_q, cu_seqlens_k,
                     max_seqlen_q, max_seqlen_k, softmax_scale, _r.flash_mask_args(is_causal, window_left, window_right),
                     p=float(p), rng_state=rng_state)


def _flash3_bwd(grads_share_storage, dout, query, key, value, out, softmax_lse, cu_seqlens_q, cu_seqlens_k,
                max_seqlen_q, max_seqlen_k, softmax_scale, is_causal, window_left, window_right):
    return fused_bwd("mslk_flash3::flash_bwd", dout, query, key, value, out, softmax_lse, cu_seqlens_q, cu_seqlens_k,
                     max_seqlen_q, max_seqlen_k, softmax_scale, _r.flash_mask_args(is_causal, window_left,
                                                                                   window_right))


# --- Blackwell-named ops ---------------------------------------------------------------------------

def _scale(q: torch.Tensor, softmax_scale: Optional[float]) -> float:
    return q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)


def blackwell_fwd(api, *args):
    """(out, lse) of the Blackwell-named forward ops; LSE float32 as their schema's fake says."""
    out, lse = _blackwell_fwd(api, *args)
    return out, lse.float()


def _blackwell_fwd(api, q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None, max_seq_len_k=None,
                  softmax_scale=None, causal=False, seqlen_kv=None, page_table=None, seqlen_k=None,
                  window_size_left=-1, window_size_right=-1, bottom_right=True):
    if q.device.type == "cuda" and not _r._fused_takes(q, k, v):
        raise NotImplementedError(f"{api}: on CUDA it needs fp16/bf16 q/k/v with head dims <= 256 (the fused "
                                  f"kernel); got {q.dtype}, head dims {q.shape[-1]}/{v.shape[-1]}")
    kind, wl, wr = mask_args(causal, window_size_left, window_size_right, bottom_right)
    if page_table is None and seqlen_kv is not None and cu_seqlens_q is None:
        # dense with per-batch key counts: the fused op's seqlen_k
        q_, k_, v_ = (x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
        return _r.fused_attention(q_, k_, v_, scale=_scale(q, softmax_scale), seqlen_k=_r._i32(seqlen_kv, q.device),
                                  mask_kind=kind, window_left=wl, window_right=wr)
    if page_table is not None and seqlen_kv is None and cu_seqlens_k is None:
        raise ValueError(f"{api}: paged K/V (page_table) needs seqlen_kv or cu_seqlens_k")
    mq = max_seq_len_q if max_seq_len_q is not None else -1
    return _r._fused_flash_fwd(api, q, k, v, cu_seqlens_q, cu_seqlens_k, seqlen_kv, mq, _scale(q, softmax_scale),
                               False, -1, -1, page_table, mask=(kind, wl, wr))


def blackwell_bwd(api, dout, q, k, v, out, softmax_lse, cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None,
                  max_seq_len_k=None, softmax_scale=None, causal=False, window_size_left=-1, window_size_right=-1,
                  bottom_right=True, deterministic=False):
    mask = mask_args(causal, window_size_left, window_size_right, bottom_right)
    mq = max_seq_len_q if max_seq_len_q is not None else -1
    mk = max_seq_len_k if max_seq_len_k is not None else -1
    return fused_bwd(api, dout, q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, mq, mk,
                     _scale(q, softmax_scale), mask, deterministic)


def _fmha_fwd(query, key, value, cu_seqlens_q=None, cu_seqlens_k=None, max_seq_len_q=None, max_seq_len_k=None,
              softmax_scale=None, causal=False, seqlen_kv=None, page_table=None, seqlen_k=None, window_size_left=-1,
              window_size_right=-1, bottom_right=True):
    return blackwell_fwd("mslk::fmha_fwd", query, key, value, cu_seqlens_q, cu_seqlens_k, max_seq_len_q,
                         max_seq_len_k, softmax_scale, causal, seqlen_kv, page_table, seqlen_k, window_size_left,
                         window_size_right, bottom_right)


def _cb_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_len_q, max_seq_len_k, softmax_scale, causal, seqlen_kv,
            page_table, seqlen_k=-1, window_size_left=-1, window_size_right=-1, bottom_right=True):
    return blackwell_fwd("mslk::cutlass_blackwell_fmha_fwd", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_len_q,
                         max_seq_len_k, softmax_scale, causal, seqlen_kv, page_table, seqlen_k, window_size_left,
                         window_size_right, bottom_right)


def _fmha_bwd(dOutput, query, key, value, output, softmax_lse, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False, window_size_left=-1,
              window_size_right=-1, bottom_right=True, deterministic=False):
    return blackwell_bwd("mslk::fmha_bwd", dOutput, query, key, value, output, softmax_lse, cu_seqlens_q,
                         cu_seqlens_k, max_seq_len_q, max_seq_len_k, softmax_scale, causal, window_size_left,
                         window_size_right, bottom_right, deterministic)


def _cb_bwd(dout, q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, max_seq_len_q, max_seq_len_k,
            softmax_scale, causal, window_size_left=-1, window_size_right=-1, bottom_right=True, deterministic=False):
    return blackwell_bwd("mslk::cutlass_blackwell_fmha_bwd", dout, q, k, v, out, softmax_lse, cu_seqlens_q,
                         cu_seqlens_k, max_seq_len_q, max_seq_len_k, softmax_scale, causal, window_size_left,
                         window_size_right, bottom_right, deterministic)


def _blackwell_fwd_fake(query, key, value, cu_seqlens_q=None, *args, **kwargs):
    out = query.new_empty((*query.shape[:-1], value.shape[-1]))
    if query.dim() == 4:  # [B, M, H, D] -> LSE [B, H, M]
        lse = query.new_empty((query.shape[0], query.shape[2], query.shape[1]), dtype=torch.float32)
    else:  # varlen [total, H, D] -> packed LSE [H, total]
        lse = query.new_empty((query.shape[1], query.shape[0]), dtype=torch.float32)
    return out, lse


def _blackwell_bwd_fake(dout, query, key, value, *args, **kwargs):
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


_BW_FWD_TAIL = ("Tensor? seqlen_kv=None, Tensor? page_table=None, int? seqlen_k=None, int window_size_left=-1, "
                "int window_size_right=-1, bool bottom_right=True) -> (Tensor, Tensor)")
_BW_BWD_TAIL = ("Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, int? max_seq_len_q=None, "
                "int? max_seq_len_k=None, float? softmax_scale=None, bool causal=False, int window_size_left=-1, "
                "int window_size_right=-1, bool bottom_right=True, bool deterministic=False) "
                "-> (Tensor, Tensor, Tensor)")
BLACKWELL_SCHEMAS = {
    ("fmha_fwd(Tensor query, Tensor key, Tensor value, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, "
     "int? max_seq_len_q=None, int? max_seq_len_k=None, float? softmax_scale=None, bool causal=False, "
     + _BW_FWD_TAIL): (_fmha_fwd, _blackwell_fwd_fake),
    ("fmha_bwd(Tensor dOutput, Tensor query, Tensor key, Tensor value, Tensor output, Tensor softmax_lse, "
     + _BW_BWD_TAIL): (_fmha_bwd, _blackwell_bwd_fake),
    ("cutlass_blackwell_fmha_fwd(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
     "int? max_seq_len_q, int? max_seq_len_k, float? softmax_scale, bool causal, Tensor? seqlen_kv, "
     "Tensor? page_table, int seqlen_k=-1, int window_size_left=-1, int window_size_right=-1, "
     "bool bottom_right=True) -> (Tensor, Tensor)"): (_cb_fwd, _blackwell_fwd_fake),
    ("cutlass_blackwell_fmha_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, "
     "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int? max_seq_len_q, int? max_seq_len_k, float? softmax_scale, "
     "bool causal, int window_size_left=-1, int window_size_right=-1, bool bottom_right=True, "
     "bool deterministic=False) -> (Tensor, Tensor, Tensor)"): (_cb_bwd, _blackwell_bwd_fake),
}


class _BlackwellFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, kw, deterministic):
        out, lse = torch.ops.mslk.cutlass_blackwell_fmha_fwd(q, k, v, **kw)
        ctx.kw, ctx.deterministic = kw, deterministic
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        kw = ctx.kw
        if kw["page_table"] is not None or kw["seqlen_kv"] is not None:
            raise NotImplementedError("cutlass_blackwell_fmha_func: paged K/V or seqlen_kv has no backward")
        dq, dk, dv = torch.ops.mslk.cutlass_blackwell_fmha_bwd(
            dout, q, k, v, out, lse, kw["cu_seqlens_q"], kw["cu_seqlens_k"], kw["max_seq_len_q"],
            kw["max_seq_len_k"], kw["softmax_scale"], kw["causal"], kw["window_size_left"], kw["window_size_right"],
            kw["bottom_right"], ctx.deterministic)
        return dq, dk, dv, None, None


def blackwell_fmha_func(q, k, v, softmax_scale=None, causal=False, cu_seqlens_q=None, cu_seqlens_k=None,
                        max_seq_len_q=None, max_seq_len_k=None, seqlen_kv=None, page_table=None, seqlen_k=None,
                        window_size=(-1, -1), bottom_right=True, deterministic=False) -> torch.Tensor:
    """cutlass_blackwell_fmha_func on the fused ops: the output, differentiable w.r.t. q, k, v
    (forward only with paged K/V or seqlen_kv). Decode (sq = 1) takes the same path."""
    kw = dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seq_len_q=max_seq_len_q,
              max_seq_len_k=max_seq_len_k, softmax_scale=softmax_scale, causal=bool(causal), seqlen_kv=seqlen_kv,
              page_table=page_table, seqlen_k=-1 if seqlen_k is None else int(seqlen_k),
              window_size_left=int(window_size[0]), window_size_right=int(window_size[1]),
              bottom_right=bool(bottom_right))
    return _BlackwellFunc.apply(q, k, v, kw, bool(deterministic))


def register() -> None:
    _define("mslk_flash", _r._FLASH2_BWD, _flash2_bwd, _r._bwd_fake)
    _define("mslk_flash3", _r._FLASH3_BWD, _flash3_bwd, _r._bwd_fake)
    for schema, (impl, fake) in BLACKWELL_SCHEMAS.items():
        _define("mslk", schema, impl, fake)
