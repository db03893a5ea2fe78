"""Fake (Meta) implementations of the attention ops, for torch.compile and export."""

import torch


@torch.library.register_fake("mslk::fmha_reference_fwd")
def _fmha_reference_fwd(q, k, v, bias=None, scale=1.0, output_dtype=None):
    B, Mq, H, _ = q.shape
    out = q.new_empty((B, Mq, H, v.shape[-1]), dtype=output_dtype if output_dtype is not None else q.dtype)
    lse = q.new_empty((B, H, Mq), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    return out, lse


@torch.library.register_fake("mslk::fmha_fused_fwd")
def _fmha_fwd(q, k, v, bias=None, seqstart_q=None, seqstart_k=None, seqlen_k=None, max_seqlen_q=-1, mask_kind=0,
              window_left=-1, window_right=-1, scale=1.0, block_tables=None, page_size=0, dropout_p=0.0,
              rng_state=None):
    B, Mq, H, _ = q.shape
    out = q.new_empty((B, Mq, H, v.shape[-1]))
    lse = q.new_empty((B, H, Mq), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    return out, lse


@torch.library.register_fake("mslk::fmha_fused_bwd")
def _fmha_bwd(grad_out, q, k, v, out, lse, bias=None, seqstart_q=None, seqstart_k=None, seqlen_k=None,
              max_seqlen_q=-1, max_seqlen_k=-1, mask_kind=0, window_left=-1, window_right=-1, scale=1.0,
              dropout_p=0.0, rng_state=None, bias_requires_grad=False, deterministic=False):
    # Contiguous, per head (an expand()ed K/V gets [B, Mkv, H, K] gradients).
    dq = q.new_empty(q.shape)
    dk = q.new_empty((*k.shape[:3], q.shape[-1]))
    dv = q.new_empty(v.shape)
    dbias = bias.new_empty(bias.shape) if bias_requires_grad and bias is not None else q.new_empty((0,))
    return dq, dk, dv, dbias


@torch.library.register_fake("mslk::fmha_dropout_mask")
def _fmha_dropout_mask(rng_state, B, H, Mq, Mkv, dropout_p, device):
    return torch.empty((B, H, Mq, Mkv), dtype=torch.bool, device=device)


@torch.library.register_fake("mslk::fmha_merge_attentions_varargs")
def _fmha_merge_attentions_varargs(attn_split, lse_split, write_lse, output_dtype, B, M, G, H, Kq):
    a = attn_split[0]
    out = a.new_empty((B, M, G, H, Kq), dtype=output_dtype if output_dtype is not None else a.dtype)
    return [out, a.new_empty((B, G, H, M), dtype=torch.float32)] if write_lse else [out]


@torch.library.register_fake("mslk::merge_attentions_varargs_backward")
def _merge_attentions_varargs_backward(attn_split, lse_split, attn_out, lse_out, grad_attn, grad_lse=None):
    return [torch.empty_like(a, memory_format=torch.contiguous_format) for a in attn_split], \
        [torch.empty_like(x, memory_format=torch.contiguous_format) for x in lse_split]


@torch.library.register_fake("mslk::_fmha_merge_attentions_into")
def _fmha_merge_attentions_into(attn_out, lse_out, attn_split, lse_split):
    return None


@torch.library.register_fake("mslk::dequantize_kv_int4")
def _dequantize_kv_int4(cache, num_groups, dtype):
    return cache.new_empty((*cache.shape[:-1], 8 * (cache.shape[-1] - num_groups)), dtype=dtype)


@torch.library.register_fake("mslk::dequantize_kv_fp8")
def _dequantize_kv_fp8(cache, scale_shift, dtype):
    return cache.new_empty((*cache.shape[:-1], 4 * cache.shape[-1]), dtype=dtype)


@torch.library.register_fake("mslk::fmha_fp8_dequant")
def _fmha_fp8_dequant(x, descale, dtype, seqstart=None):
    return x.new_empty(x.shape, dtype=dtype)
