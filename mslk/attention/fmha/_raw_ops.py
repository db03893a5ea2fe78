"""Raw backend ops (spec group "Attention - Raw backend ops"), registered under the spec's names and
schemas so that code referencing them finds them; each has a fake (Meta) implementation.

- mslk_flash::flash_fwd, mslk_flash3::flash_fwd: FlashAttention 2 / 3 style forward.
  * CUDA, fp16/bf16, head dims <= 256 (where mslk::fmha_fused_fwd has a CUDA kernel): the fused
    kernel (the Hopper kernel on sm_90 where it applies, else the FlashAttention-2 style one), see
    `fused_attention` / `_fused_flash_fwd` below. Dense or varlen (cu_seqlens_q/k, seqused_k),
    causal / sliding windows (bottom-right aligned, as FlashAttention), softmax scale, GQA/MQA
    (Hq a multiple of Hkv, K/V never copied) and paged KV (block_tables / block_table with K/V as
    [num_pages, page_size, Hkv, K]).
  * anything else (CPU, fp32/fp64, head dims > 256): the exact reference op
    (mslk::fmha_reference_fwd) for what it can honour -- dense or varlen, causal and windows,
    scale, GQA/MQA; paged KV raises NotImplementedError there.
  return_softmax and leftpad_k raise NotImplementedError everywhere; dropout (mslk_flash only, not
  with paged KV) runs the fused op with a fresh rng_state (_raw_bwd_ops.py). mslk_flash3 takes
  float8_e4m3fn query / key / value with descale_q / descale_k / descale_v ([B or num_seqs, H or Hkv]
  float32, None meaning 1; one row with paged KV): they are dequantized to bfloat16
  (torch.ops.mslk.fmha_fp8_dequant, fmha/_fp8.py) and the output is bfloat16.
  Layouts (both paths): out like query with V's head dim; LSE float32, natural log, [B, H, M] dense
  and [H, total_q] varlen; rows with no visible key (and varlen rows outside every sequence) give
  out 0 and LSE -inf.
  Mask semantics (FlashAttention's): key j is visible from query i of a sequence with Mq queries
  and Mk keys iff i + Mk - Mq - window_left <= j <= i + Mk - Mq + window_right, a negative window
  being unbounded; is_causal forces window_right = 0.
- mslk_flash::flash_bwd, mslk_flash3::flash_bwd: the fused backward (see _raw_bwd_ops.py, which
  also serves the Blackwell-named raw ops).
- mslk_flash_mtia::*, xformers::*_ck, xformers::_ck_rand_uniform: MTIA / ROCm only; calling them
  raises mslk.utils.unavailable's RuntimeError ("<op>: not available on this platform: ...").
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

from mslk.attention.fmha.common import _kernel_registered
from mslk.utils import unavailable
from mslk.utils.torch.library import define as _define


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


def _fwd_fake_shapes(query, value, cu_seqlens_q, out_dtype=None):
    out = query.new_empty((*query.shape[:-1], value.shape[-1]), dtype=out_dtype or query.dtype)
    if cu_seqlens_q is None:
        B, M, H, _ = query.shape
        lse = query.new_empty((B, H, M), dtype=torch.float32)
    else:
        M, H, _ = query.shape
        lse = query.new_empty((H, M), dtype=torch.float32)
    return out, lse


# ---------------------------------------------------------------------------------------------
# Fused path: torch.ops.mslk.fmha_fused_fwd (CUDA kernels; the op also has a CPU implementation,
# the exact reference, which the tests use to check the argument mapping without a GPU).

_FUSED_OP = "mslk::fmha_fused_fwd"
# mask_kind values of mslk::fmha_fused_fwd (csrc/attention/attention_ops.cpp)
MASK_NONE, MASK_CAUSAL_TOP_LEFT, MASK_CAUSAL_BOTTOM_RIGHT, MASK_LOCAL_BOTTOM_RIGHT = 0, 1, 2, 3
_MAX_SEQS = 65535  # the fused op's limit on the number of sequences (grid dim)
_FUSED_DTYPES = (torch.float16, torch.bfloat16)
_FUSED_MAX_K = 256


def fused_cuda_registered() -> bool:
    """Whether mslk::fmha_fused_fwd has a CUDA kernel in this build."""
    return hasattr(torch.ops.mslk, "fmha_fused_fwd") and _kernel_registered(_FUSED_OP, "CUDA")


def _fused_takes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
    """The raw flash ops run the fused CUDA kernel for these tensors (else the reference path)."""
    return (query.device.type == "cuda" and query.dtype in _FUSED_DTYPES
            and query.dtype == key.dtype == value.dtype
            and 1 <= query.shape[-1] <= _FUSED_MAX_K and 1 <= value.shape[-1] <= _FUSED_MAX_K
            and fused_cuda_registered())


def flash_mask_args(is_causal: bool, window_left: int, window_right: int) -> Tuple[int, int, int]:
    """FlashAttention's (is_causal, window_left, window_right) -> the fused op's (mask_kind,
    window_left, window_right). FlashAttention: key j is visible from query i iff
    i + Mk - Mq - window_left <= j <= i + Mk - Mq + window_right (negative window: unbounded),
    is_causal meaning window_right = 0. The fused op, with d = j - i - (lk - lq) for its bottom-right
    kinds: kind 2 (causal bottom-right) allows d <= 0, kind 3 (local bottom-right) nothing by
    itself, and then window_left >= 0 adds d >= -window_left, window_right >= 0 adds
    d <= window_right. So: causal -> (2, wl, -1); any window -> (3, wl, wr); neither -> (0, -1, -1)."""
    wl = int(window_left) if int(window_left) >= 0 else -1
    wr = int(window_right) if int(window_right) >= 0 else -1
    if is_causal:
        return MASK_CAUSAL_BOTTOM_RIGHT, wl, -1
    if wl >= 0 or wr >= 0:
        return MASK_LOCAL_BOTTOM_RIGHT, wl, wr
    return MASK_NONE, -1, -1


def _i32(t: Optional[torch.Tensor], device) -> Optional[torch.Tensor]:
    return None if t is None else t.to(device=device, dtype=torch.int32).contiguous()


def _flat_rows(x: torch.Tensor) -> Tuple[torch.Tensor, int]:
    """[B, N, H, D] -> ([1, R, H, D] view over the same memory where the strides allow it, else a
    copy; the row where batch b starts is b * step)."""
    B, N = x.shape[0], x.shape[1]
    s0, s1 = x.stride(0), x.stride(1)
    if B == 1:
        return x, 0
    if B == 0:
        return x.reshape(1, 0, x.shape[2], x.shape[3]), N
    if N > 0 and s1 > 0 and s0 >= 0 and s0 % s1 == 0:
        step = s0 // s1
        rows = (B - 1) * step + N
        return x.as_strided((1, rows, x.shape[2], x.shape[3]), (rows * s1, s1, x.stride(2), x.stride(3))), step
    return x.reshape(1, B * N, x.shape[2], x.shape[3]), N


def _fold_groups(q, k, v, seqstart_q, seqstart_k, seqlen_k, block_tables, max_seqlen_q, G, kw):
    """GQA in variable-length mode without copying K/V: q [1, T, Hkv * G, K] (query head h reads
    key/value head h // G), k/v [1, R, Hkv, *]. The G query heads of a K/V head become G copies of
    the sequence list over a re-laid-out query [1, G * T, Hkv, K]; each copy g holds, in order, a
    filler block for rows [0, seqstart_q[0]), the real blocks, and a filler for rows
    [seqstart_q[-1], T), the fillers having no keys (their rows come out 0 / -inf, as rows outside
    every sequence must). max_seqlen_q bounds the real blocks only: a longer filler is partly
    skipped by the grid, its rows keep the op's variable-length initialisation (0 / -inf), which
    is the same value. Everything stays on the device (no host sync)."""
    T, Hq, K = q.shape[1], q.shape[2], q.shape[3]
    Hkv = Hq // G
    n = seqstart_q.numel() - 1
    dev = q.device
    sk = seqstart_k[:n]
    lk = seqlen_k if seqlen_k is not None else seqstart_k[1:n + 1] - seqstart_k[:n]
    z = seqstart_q.new_zeros(1)
    per_q = torch.cat([z, seqstart_q])          # group-relative starts of n + 2 blocks
    per_k = torch.cat([z, sk, z])
    per_l = torch.cat([z, lk, z])
    per_bt = None
    if block_tables is not None:
        zr = block_tables.new_zeros(1, block_tables.shape[1])
        per_bt = torch.cat([zr, block_tables, zr])
    msq = max_seqlen_q if 0 <= max_seqlen_q <= T else T
    qg = q[0].unflatten(1, (Hkv, G))            # [T, Hkv, G, K] (a view)
    chunk = max(1, min(G, _MAX_SEQS // (n + 2)))
    outs, lses = [], []
    for g0 in range(0, G, chunk):
        gc = min(chunk, G - g0)
        qf = qg[:, :, g0:g0 + gc].permute(2, 0, 1, 3).reshape(1, gc * T, Hkv, K)
        offs = torch.arange(gc, device=dev, dtype=torch.int32).unsqueeze(1) * T
        sq = torch.cat([(per_q.unsqueeze(0) + offs).reshape(-1), z + gc * T])
        extra = dict(block_tables=per_bt.repeat(gc, 1)) if per_bt is not None else {}
        o, l_ = torch.ops.mslk.fmha_fused_fwd(qf, k, v, None, seqstart_q=sq, seqstart_k=per_k.repeat(gc),
                                              seqlen_k=per_l.repeat(gc), max_seqlen_q=msq, **kw, **extra)
        outs.append(o[0].view(gc, T, Hkv, o.shape[-1]))
        lses.append(l_[0].view(Hkv, gc, T))
    out = torch.cat(outs, 0).permute(1, 2, 0, 3).reshape(1, T, Hq, outs[0].shape[-1])
    lse = torch.cat(lses, 1).reshape(1, Hq, T)
    return out, lse


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
                    seqstart_q: Optional[torch.Tensor] = None, seqstart_k: Optional[torch.Tensor] = None,
                    seqlen_k: Optional[torch.Tensor] = None, max_seqlen_q: int = -1, mask_kind: int = MASK_NONE,
                    window_left: int = -1, window_right: int = -1, block_tables: Optional[torch.Tensor] = None,
                    page_size: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch.ops.mslk.fmha_fused_fwd (same arguments and results: out [B, Mq, Hq, Kv], lse
    [B, Hq, Mq]) with GQA/MQA: k / v may have Hkv heads, Hq a multiple of Hkv, query head h reading
    key/value head h // (Hq / Hkv). MQA (Hkv == 1) expands K/V (stride 0, no copy); other groupings
    fold the query heads of a K/V head into extra sequences (`_fold_groups`; a dense problem is
    first turned into a variable-length one), so K/V -- a paged cache too -- are never copied."""
    Hq, Hkv = q.shape[2], k.shape[2]
    if v.shape[2] != Hkv:
        raise ValueError(f"fused attention: key has {Hkv} heads but value has {v.shape[2]}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"fused attention: query heads ({Hq}) must be a multiple of key/value heads ({Hkv})")
    kw = dict(scale=float(scale), mask_kind=int(mask_kind), window_left=int(window_left),
              window_right=int(window_right))
    G = Hq // Hkv
    if G > 1 and Hkv == 1:
        k = k.expand(k.shape[0], k.shape[1], Hq, k.shape[3])
        v = v.expand(v.shape[0], v.shape[1], Hq, v.shape[3])
        G = 1
    if G == 1:
        extra = dict(block_tables=block_tables, page_size=int(page_size)) if block_tables is not None else {}
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, None, seqstart_q=seqstart_q, seqstart_k=seqstart_k,
                                             seqlen_k=seqlen_k, max_seqlen_q=int(max_seqlen_q), **kw, **extra)
    if block_tables is not None:
        kw["page_size"] = int(page_size)
    if seqstart_q is not None:
        return _fold_groups(q, k, v, seqstart_q, seqstart_k, seqlen_k, block_tables, int(max_seqlen_q), G, kw)
    if block_tables is not None or seqstart_k is not None:
        raise ValueError("fused attention: block_tables / seqstart_k need seqstart_q (variable-length mode)")
    # Dense GQA: batch b becomes sequence b of a variable-length problem over flattened K/V.
    B, M, N = q.shape[0], q.shape[1], k.shape[1]
    if k.shape[0] != B or v.shape[0] != B:
        raise ValueError(f"fused attention: batch sizes differ: q {B}, k {k.shape[0]}, v {v.shape[0]}")
    if B == 0 or M == 0:
        return (q.new_zeros((B, M, Hq, v.shape[3])),
                torch.full((B, Hq, M), -math.inf, device=q.device, dtype=torch.float32))
    kf, ks = _flat_rows(k)
    vf, vs = _flat_rows(v)
    if ks != vs:
        kf, vf, ks = k.reshape(1, B * N, Hkv, k.shape[3]), v.reshape(1, B * N, Hkv, v.shape[3]), N
    dev = q.device
    sq = torch.arange(B + 1, device=dev, dtype=torch.int32) * M
    sk = torch.arange(B, device=dev, dtype=torch.int32) * ks
    lk = (seqlen_k.to(dtype=torch.int32) if seqlen_k is not None
          else torch.full((B,), N, device=dev, dtype=torch.int32))
    out, lse = _fold_groups(q.reshape(1, B * M, Hq, q.shape[3]), kf, vf, sq, sk, lk, None, M, G, kw)
    return out.view(B, M, Hq, out.shape[-1]), lse[0].view(Hq, B, M).transpose(0, 1).contiguous()


def _fused_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, softmax_scale,
                     is_causal, window_left, window_right, block_table, mask=None):
    """FlashAttention forward arguments -> fused_attention; returns (out, lse) in FlashAttention's
    layouts (dense: out [B, M, H, Kv], lse [B, H, M]; varlen: out [total_q, H, Kv], lse
    [H, total_q]). Paged KV: key / value are [num_pages, page_size, Hkv, *] and block_table
    [num_seqs, max_pages] (int32); sequence b's keys are its logical positions [0, n_b) of its
    pages, n_b = seqused_k[b], else cu_seqlens_k[b + 1] - cu_seqlens_k[b], else
    max_pages * page_size (FlashAttention 2's paged semantics). `mask`: the fused op's (mask_kind,
    window_left, window_right) in place of (is_causal, window_left, window_right)."""
    kind, wl, wr = mask if mask is not None else flash_mask_args(is_causal, window_left, window_right)
    dev = query.device
    query, key, value = (x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous() for x in (query, key, value))
    kw = dict(scale=float(softmax_scale), mask_kind=kind, window_left=wl, window_right=wr)
    if block_table is not None:
        if key.ndim != 4 or value.ndim != 4:
            raise ValueError(f"{api}: paged KV needs key/value as [num_pages, page_size, Hkv, K]; got key "
                             f"{tuple(key.shape)}, value {tuple(value.shape)}")
        n, max_pages = block_table.shape[0], block_table.shape[1]
        page = key.shape[1]
        if seqused_k is not None:
            lens = _i32(seqused_k, dev)
        elif cu_seqlens_k is not None:
            ck = _i32(cu_seqlens_k, dev)
            lens = ck[1:] - ck[:-1]
        else:
            lens = torch.full((n,), max_pages * page, device=dev, dtype=torch.int32)
        kw.update(seqstart_k=torch.zeros(n, device=dev, dtype=torch.int32), seqlen_k=lens,
                  block_tables=_i32(block_table, dev), page_size=page)
        k = key.reshape(1, key.shape[0] * page, key.shape[2], key.shape[3])
        v = value.reshape(1, value.shape[0] * page, value.shape[2], value.shape[3])
        if cu_seqlens_q is None:
            if query.ndim != 4:
                raise ValueError(f"{api}: dense query must be [B, M, H, K]; got {tuple(query.shape)}")
            B, M, H = query.shape[0], query.shape[1], query.shape[2]
            if B != n:
                raise ValueError(f"{api}: block_table has {n} rows but the batch is {B}")
            sq = torch.arange(B + 1, device=dev, dtype=torch.int32) * M
            out, lse = fused_attention(query.reshape(1, B * M, H, query.shape[3]), k, v, seqstart_q=sq,
                                       max_seqlen_q=M, **kw)
            return out.view(B, M, H, out.shape[-1]), lse[0].view(H, B, M).transpose(0, 1).contiguous()
        if query.ndim != 3:
            raise ValueError(f"{api}: variable-length query must be packed [total_q, H, K]; got {tuple(query.shape)}")
        out, lse = fused_attention(query.unsqueeze(0), k, v, seqstart_q=_i32(cu_seqlens_q, dev),
                                   max_seqlen_q=int(max_seqlen_q), **kw)
        return out[0], lse[0]
    if cu_seqlens_q is None:
        if cu_seqlens_k is not None or seqused_k is not None:
            raise ValueError(f"{api}: cu_seqlens_k / seqused_k need cu_seqlens_q (variable-length mode)")
        if query.ndim != 4:
            raise ValueError(f"{api}: dense query must be [B, M, H, K]; got {tuple(query.shape)}")
        return fused_attention(query, key, value, **kw)
    if cu_seqlens_k is None or query.ndim != 3:
        raise ValueError(f"{api}: variable-length mode needs cu_seqlens_k and packed [total, H, K] tensors")
    out, lse = fused_attention(query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0),
                               seqstart_q=_i32(cu_seqlens_q, dev), seqstart_k=_i32(cu_seqlens_k, dev),
                               seqlen_k=_i32(seqused_k, dev), max_seqlen_q=int(max_seqlen_q), **kw)
    return out[0], lse[0]


# --- mslk_flash (FlashAttention 2) -------------------------------------------------------------

def _flash2_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, p,
                softmax_scale, is_causal, window_left, window_right, return_softmax, block_tables):
    api = "mslk_flash::flash_fwd"
    if return_softmax:
        raise NotImplementedError(f"{api}: return_softmax=True is not supported")
    if p != 0.0:
        if block_tables is not None:
            raise NotImplementedError(f"{api}: dropout with paged KV (block_tables) is not supported")
        from mslk.attention.fmha import _raw_bwd_ops

        return _raw_bwd_ops.flash_fwd_dropout(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                              max_seqlen_q, softmax_scale, is_causal, window_left, window_right, p)
    if _fused_takes(query, key, value):
        out, lse = _fused_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                                    softmax_scale, is_causal, window_left, window_right, block_tables)
    else:
        if block_tables is not None:
            raise NotImplementedError(f"{api}: paged KV (block_tables) needs the fused CUDA kernel (CUDA, fp16/bf16, "
                                      "head dims <= 256); the reference path does not support it")
        out, lse = _reference_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                        softmax_scale, is_causal, window_left, window_right)
    # No dropout, so there is no RNG state: (seed, offset) = (0, 0).
    return out, lse, torch.zeros(2, dtype=torch.int64, device=query.device)


def _flash2_fwd_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, p,
                     softmax_scale, is_causal, window_left, window_right, return_softmax, block_tables):
    out, lse = _fwd_fake_shapes(query, value, cu_seqlens_q)
    return out, lse, query.new_empty((2,), dtype=torch.int64)


def _bwd_fake(grads_share_storage, grad, query, key, value, *args):
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


# --- mslk_flash3 (FlashAttention 3) ------------------------------------------------------------

def _flash3_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k, max_seqlen_q, max_seqlen_k, p,
                softmax_scale, is_causal, descale_q=None, descale_k=None, descale_v=None, block_table=None,
                use_kvsplit=False, window_left=-1, window_right=-1):
    api = "mslk_flash3::flash_fwd"
    if p != 0.0:
        raise NotImplementedError(f"{api}: dropout (p={p}) is not supported (FlashAttention 3 has none)")
    if leftpad_k is not None:
        raise NotImplementedError(f"{api}: leftpad_k is not supported")
    fp8 = [x.dtype == torch.float8_e4m3fn for x in (query, key, value)]
    if any(x is not None for x in (descale_q, descale_k, descale_v)) and not all(fp8):
        raise TypeError(f"{api}: descale_q/k/v need float8_e4m3fn query, key and value; got {query.dtype}, "
                        f"{key.dtype}, {value.dtype}")
    if any(fp8):  # FP8: the operands dequantized to bfloat16 (fmha/_fp8.py), then the bf16 paths
        from mslk.attention.fmha import _fp8

        paged = block_table is not None
        query = _fp8.raw_operand(api, "query", query, descale_q, cu_seqlens_q)
        key = _fp8.raw_operand(api, "key", key, descale_k, cu_seqlens_k, paged)
        value = _fp8.raw_operand(api, "value", value, descale_v, cu_seqlens_k, paged)
    # use_kvsplit is a scheduling hint (split-KV); neither path splits, the results are the same.
    if _fused_takes(query, key, value):
        return _fused_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                                softmax_scale, is_causal, window_left, window_right, block_table)
    if block_table is not None:
        raise NotImplementedError(f"{api}: paged KV (block_table) needs the fused CUDA kernel (CUDA, fp16/bf16, "
                                  "head dims <= 256); the reference path does not support it")
    return _reference_flash_fwd(api, query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, softmax_scale,
                                is_causal, window_left, window_right)


def _flash3_fwd_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k, max_seqlen_q, max_seqlen_k,
                     p, softmax_scale, is_causal, descale_q=None, descale_k=None, descale_v=None, block_table=None,
                     use_kvsplit=False, window_left=-1, window_right=-1):
    fp8 = query.dtype == torch.float8_e4m3fn  # FP8 attention writes bfloat16
    return _fwd_fake_shapes(query, value, cu_seqlens_q, torch.bfloat16 if fp8 else None)


# --- platform-only ops (MTIA, ROCm/CK) ---------------------------------------------------------

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
    _define("mslk_flash3", _FLASH3_FWD, _flash3_fwd, _flash3_fwd_fake)
    from mslk.attention.fmha import _raw_bwd_ops  # flash_bwd and the Blackwell-named ops

    _raw_bwd_ops.register()
    unavailable.define_op("mslk_flash_mtia", _FLASH2_FWD, unavailable.MTIA, _flash2_fwd_fake)
    unavailable.define_op("mslk_flash_mtia", _FLASH2_BWD, unavailable.MTIA, _bwd_fake)
    fakes = {"efficient_attention_forward_ck": _ck_fwd_fake, "efficient_attention_backward_ck": _ck_bwd_fake,
             "efficient_attention_forward_decoder_ck": _ck_decoder_fake,
             "efficient_attention_forward_decoder_splitk_ck": _ck_decoder_fake, "_ck_rand_uniform": _ck_rand_fake}
    for name, schema in _CK.items():
        unavailable.define_op("xformers", schema, unavailable.ROCM, fakes[name])


register()
