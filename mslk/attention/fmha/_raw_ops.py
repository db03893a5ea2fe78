"""Raw backend ops (spec group "Attention - Raw backend ops"), registered under the spec's names and
schemas so that code referencing them finds them; each has a fake (Meta) implementation.

- mslk_flash::flash_fwd, mslk_flash3::flash_fwd: thin adapters over the exact reference op
  (mslk::fmha_reference_fwd) for what they can honour -- dense or varlen (cu_seqlens, seqused_k),
  causal and sliding windows (bottom-right aligned, as FlashAttention), softmax scale, GQA/MQA
  (Hq a multiple of Hkv). Dropout, return_softmax, paged KV (block tables), leftpad_k and FP8
  descales raise NotImplementedError.
- mslk_flash::flash_bwd, mslk_flash3::flash_bwd: NotImplementedError (fused attention backward is
  pending in this build).
- mslk_flash_mtia::*, xformers::*_ck, xformers::_ck_rand_uniform: MTIA / ROCm only; calling them
  raises RuntimeError ("not available on this platform").
"""

from __future__ import annotations

import math
from typing import List, Optional

import torch

_BWD_PENDING = ("{op}: not implemented in this build: the fused attention backward is pending "
                "(forward-only attention for now; see mslk.attention.fmha.merge_training for a trainable path)")

_FLASH2_FWD = ("flash_fwd(Tensor query, Tensor key, Tensor value, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
               "Tensor? seqused_k, int max_seqlen_q, int max_seqlen_k, float p, float softmax_scale, bool is_causal, "
               "int window_left, int window_right, bool return_softmax, Tensor? block_tables) "
               "-> (Tensor, Tensor, Tensor)")
_FLASH2_BWD = ("flash_bwd(bool grads_share_storage, Tensor grad, Tensor query, Tensor key, Tensor value, Tensor out, "
               "Tensor lse, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float p, "
               "float softmax_scale, bool is_causal, int window_left, int window_right, Tensor rng_state) "
               "-> (Tensor, Tensor, Tensor)")
_FLASH3_FWD = ("flash_fwd(Tensor query, Tensor key, Tensor value, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
               "Tensor? seqused_k, Tensor? leftpad_k, int max_seqlen_q, int max_seqlen_k, float p, "
               "float softmax_scale, bool is_causal, Tensor? descale_q=None, Tensor? descale_k=None, "
               "Tensor? descale_v=None, Tensor? block_table=None, bool use_kvsplit=False, int window_left=-1, "
               "int window_right=-1) -> (Tensor, Tensor)")
_FLASH3_BWD = ("flash_bwd(bool grads_share_storage, Tensor dout, Tensor query, Tensor key, Tensor value, Tensor out, "
               "Tensor softmax_lse, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, "
               "float softmax_scale, bool is_causal, int window_left, int window_right) -> (Tensor, Tensor, Tensor)")
_CK = {
    "efficient_attention_forward_ck": (
        "efficient_attention_forward_ck(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
        "Tensor? seqstart_q, Tensor? seqstart_k, int? max_seqlen_q, float dropout_p, bool compute_logsumexp, "
        "int custom_mask_type, float? scale, Tensor? seqlen_k, int? window_size, Tensor? block_tables, "
        "int? page_size) -> (Tensor, Tensor?, int, int)"),
    "efficient_attention_backward_ck": (
        "efficient_attention_backward_ck(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
        "Tensor? seqstart_q, Tensor? seqstart_k, int? max_seqlen_q, int? max_seqlen_k, Tensor? seqlen_k, "
        "Tensor logsumexp, Tensor output, float dropout_p, int rng_seed, int rng_offset, int custom_mask_type, "
        "float? scale, int? window_size) -> (Tensor, Tensor, Tensor, Tensor)"),
    "efficient_attention_forward_decoder_ck": (
        "efficient_attention_forward_decoder_ck(Tensor query, Tensor key, Tensor value, Tensor seq_positions, "
        "float scale) -> Tensor"),
    "efficient_attention_forward_decoder_splitk_ck": (
        "efficient_attention_forward_decoder_splitk_ck(Tensor query, Tensor key, Tensor value, "
        "Tensor seq_positions, float scale, int split_k) -> Tensor"),
    "_ck_rand_uniform": "_ck_rand_uniform(float p, Tensor out) -> Tensor",
}


def _define(ns: str, schema: str, impl, fake) -> None:
    name, args = schema.split("(", 1)
    qualname = f"{ns}::{name}"
    if hasattr(getattr(torch.ops, ns), name):
        return  # already registered (module reloaded)
    torch.library.define(qualname, "(" + args)
    torch.library.impl(qualname, "CompositeExplicitAutograd")(impl)
    torch.library.register_fake(qualname)(fake)


# ---------------------------------------------------------------------------------------------
# Reference-path adapter shared by the FlashAttention 2 / 3 forward ops.

def _window_bias(mq: int, mk: int, wl: int, wr: int, device) -> Optional[torch.Tensor]:
    """Additive mask of FlashAttention's bottom-right aligned window: key j is visible from query i
    iff i + mk - mq - wl <= j <= i + mk - mq + wr (a negative bound is unbounded)."""
    if wl < 0 and wr < 0:
        return None
    i = torch.arange(mq, device=device).unsqueeze(1)
    j = torch.arange(mk, device=device).unsqueeze(0)
    d = j - i - (mk - mq)
    ok = torch.ones(mq, mk, dtype=torch.bool, device=device)
    if wl >= 0:
        ok &= d >= -wl
    if wr >= 0:
        ok &= d <= wr
    return torch.where(ok, 0.0, -math.inf).to(torch.float32)


def _attend(q, k, v, scale, wl, wr):
    """q [B, Mq, H, K], k/v [B, Mk, Hkv, *] -> out [B, Mq, H, Kv] (q.dtype), lse [B, H, Mq] (fp32)."""
    H, Hkv = q.shape[2], k.shape[2]
    if H != Hkv:
        if H % Hkv:
            raise ValueError(f"flash_fwd: query heads ({H}) must be a multiple of key/value heads ({Hkv})")
        k, v = k.repeat_interleave(H // Hkv, dim=2), v.repeat_interleave(H // Hkv, dim=2)
    bias = _window_bias(q.shape[1], k.shape[1], wl, wr, q.device)
    out, lse = torch.ops.mslk.fmha_reference_fwd(q, k, v, bias, scale, None)
    return out, lse.float()


def _reference_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, softmax_scale, is_causal,
                         window_left, window_right):
    wl, wr = int(window_left), (0 if is_causal else int(window_right))
    if cu_seqlens_q is None:
        if cu_seqlens_k is not None or seqused_k is not None:
            raise ValueError(f"{api}: cu_seqlens_k / seqused_k need cu_seqlens_q (variable-length mode)")
        if query.ndim != 4:
            raise ValueError(f"{api}: dense query must be [B, M, H, K]; got {tuple(query.shape)}")
        return _attend(query, key, value, softmax_scale, wl, wr)
    if cu_seqlens_k is None or query.ndim != 3:
        raise ValueError(f"{api}: variable-length mode needs cu_seqlens_k and packed [total, H, K] tensors")
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    used = seqused_k.tolist() if seqused_k is not None else None
    outs: List[torch.Tensor] = []
    lses: List[torch.Tensor] = []
    for b in range(len(cq) - 1):
        k0, k1 = ck[b], (ck[b] + used[b] if used is not None else ck[b + 1])
        o, l_ = _attend(query[cq[b]:cq[b + 1]][None], key[k0:k1][None], value[k0:k1][None], softmax_scale, wl, wr)
        outs.append(o[0])
        lses.append(l_[0])
    out = query.new_zeros((query.shape[0], query.shape[1], value.shape[-1]))
    lse = torch.full((query.shape[1], query.shape[0]), -math.inf, dtype=torch.float32, device=query.device)
    if outs:
        out[cq[0]:cq[-1]] = torch.cat(outs)
        lse[:, cq[0]:cq[-1]] = torch.cat(lses, dim=1)
    return out, lse


def _fwd_fake_shapes(query, value, cu_seqlens_q):
    out = query.new_empty((*query.shape[:-1], value.shape[-1]))
    if cu_seqlens_q is None:
        B, M, H, _ = query.shape
        lse = query.new_empty((B, H, M), dtype=torch.float32)
    else:
        M, H, _ = query.shape
        lse = query.new_empty((H, M), dtype=torch.float32)
    return out, lse


# --- mslk_flash (FlashAttention 2) -------------------------------------------------------------

def _flash2_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, p,
                softmax_scale, is_causal, window_left, window_right, return_softmax, block_tables):
    api = "mslk_flash::flash_fwd"
    if p != 0.0:
        raise NotImplementedError(f"{api}: dropout (p={p}) is not supported by the reference path")
    if return_softmax:
        raise NotImplementedError(f"{api}: return_softmax=True is not supported by the reference path")
    if block_tables is not None:
        raise NotImplementedError(f"{api}: paged KV (block_tables) is not supported by the reference path")
    out, lse = _reference_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, softmax_scale,
                                    is_causal, window_left, window_right)
    return out, lse, torch.zeros(2, dtype=torch.int64, device=query.device)


def _flash2_fwd_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, p,
                     softmax_scale, is_causal, window_left, window_right, return_softmax, block_tables):
    out, lse = _fwd_fake_shapes(query, value, cu_seqlens_q)
    return out, lse, query.new_empty((2,), dtype=torch.int64)


def _bwd_raiser(op):
    def impl(grads_share_storage, grad, query, key, value, *args):
        raise NotImplementedError(_BWD_PENDING.format(op=op))
    return impl


def _bwd_fake(grads_share_storage, grad, query, key, value, *args):
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


# --- mslk_flash3 (FlashAttention 3) ------------------------------------------------------------

def _flash3_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k, max_seqlen_q, max_seqlen_k, p,
                softmax_scale, is_causal, descale_q=None, descale_k=None, descale_v=None, block_table=None,
                use_kvsplit=False, window_left=-1, window_right=-1):
    api = "mslk_flash3::flash_fwd"
    if p != 0.0:
        raise NotImplementedError(f"{api}: dropout (p={p}) is not supported (FlashAttention 3 has none)")
    if any(x is not None for x in (descale_q, descale_k, descale_v)):
        raise NotImplementedError(f"{api}: FP8 descale factors are not supported by the reference path")
    if block_table is not None:
        raise NotImplementedError(f"{api}: paged KV (block_table) is not supported by the reference path")
    if leftpad_k is not None:
        raise NotImplementedError(f"{api}: leftpad_k is not supported by the reference path")
    # use_kvsplit is a scheduling hint; the exact reference path ignores it.
    return _reference_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, softmax_scale,
                                is_causal, window_left, window_right)


def _flash3_fwd_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k, max_seqlen_q, max_seqlen_k,
                     p, softmax_scale, is_causal, descale_q=None, descale_k=None, descale_v=None, block_table=None,
                     use_kvsplit=False, window_left=-1, window_right=-1):
    return _fwd_fake_shapes(query, value, cu_seqlens_q)


# --- platform-only ops (MTIA, ROCm/CK) ---------------------------------------------------------

def _unavailable(op: str, platform: str):
    def impl(*args, **kwargs):
        raise RuntimeError(f"{op} is not available on this platform (needs {platform}; this is an NVIDIA/CPU build)")
    return impl


def _ck_fwd_fake(query, key, value, attn_bias, seqstart_q, seqstart_k, max_seqlen_q, dropout_p, compute_logsumexp,
                 custom_mask_type, scale, seqlen_k, window_size, block_tables, page_size):
    out = query.new_empty((*query.shape[:-1], value.shape[-1]))
    B, M, H = query.shape[0], query.shape[1], query.shape[2]
    lse = query.new_empty((B, H, M), dtype=torch.float32) if compute_logsumexp else None
    return out, lse, 0, 0


def _ck_bwd_fake(grad_out, query, key, value, attn_bias, *args):
    db = torch.empty_like(attn_bias) if attn_bias is not None else query.new_empty((0,))
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), db


def _ck_decoder_fake(query, key, value, seq_positions, scale, *args):
    return query.new_empty((*query.shape[:-1], value.shape[-1]))


def _ck_rand_fake(p, out):
    return torch.empty_like(out)


def register() -> None:
    _define("mslk_flash", _FLASH2_FWD, _flash2_fwd, _flash2_fwd_fake)
    _define("mslk_flash", _FLASH2_BWD, _bwd_raiser("mslk_flash::flash_bwd"), _bwd_fake)
    _define("mslk_flash3", _FLASH3_FWD, _flash3_fwd, _flash3_fwd_fake)
    _define("mslk_flash3", _FLASH3_BWD, _bwd_raiser("mslk_flash3::flash_bwd"), _bwd_fake)
    _define("mslk_flash_mtia", _FLASH2_FWD, _unavailable("mslk_flash_mtia::flash_fwd", "an MTIA device"),
            _flash2_fwd_fake)
    _define("mslk_flash_mtia", _FLASH2_BWD, _unavailable("mslk_flash_mtia::flash_bwd", "an MTIA device"), _bwd_fake)
    fakes = {"efficient_attention_forward_ck": _ck_fwd_fake, "efficient_attention_backward_ck": _ck_bwd_fake,
             "efficient_attention_forward_decoder_ck": _ck_decoder_fake,
             "efficient_attention_forward_decoder_splitk_ck": _ck_decoder_fake, "_ck_rand_uniform": _ck_rand_fake}
    for name, schema in _CK.items():
        _define("xformers", schema, _unavailable(f"xformers::{name}", "AMD ROCm (CK)"), fakes[name])


register()
