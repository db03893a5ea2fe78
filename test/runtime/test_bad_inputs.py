"""Bad-input sweep over the landed torch.ops.mslk / torch.ops.triton ops with a CPU kernel: each
tensor argument of a valid call gets a wrong dtype, a wrong rank and a last dimension of stride
2; the op must raise ValueError / TypeError / RuntimeError naming that argument (never crash,
never compute). A stride-2 last dim may instead be accepted when the result equals the
contiguous call's (the spec's layout rule lets an op copy). Mixed devices are not swept (this
file runs on the CPU; meta tensors are no stand-in for a second device). Ops whose CPU kernel
only reports "not available" (FP4 / MX, conv, Blackwell-only) and the underscore-prefixed
internal ops are left out."""

import re

import pytest
import torch

import mslk.attention.fmha  # noqa: F401  (registers the attention ops)
import mslk.moe  # noqa: F401
from mslk.quantize.triton import fp8_quantize  # noqa: F401

mslk, triton = torch.ops.mslk, torch.ops.triton
F8, BF, F32, I32 = torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.int32


def r(*shape, dtype=BF):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g).to(dtype)


def i32(*v):
    return torch.tensor(v, dtype=I32)


def words(*shape):
    """int32 words whose fp16 halves are finite (below 0x4000: at most 2)."""
    return torch.randint(0, 2**14, shape, generator=torch.Generator().manual_seed(sum(shape)), dtype=I32)


def attn(B=1, M=4, H=2, K=8):
    return r(B, M, H, K)


# (op, valid arguments by name, {argument: mutations it is exempt from, with why}).
# Mutations: "dtype" (a float argument becomes int16, an integer one float32, an FP8 one
# bfloat16), "rank" (one leading dimension more) and "stride" (last dim of stride 2).
ANY_RANK = {"rank": "any leading dims allowed"}
ROWS_ANY_DTYPE = {"dtype": "a row permutation moves rows of any dtype"}
BATCHED_XQ = {"rank": "3-D XQ selects the batched form, whose own rule (no offsets) is what the error names"}
CASES = [
    # FP8 quantization
    (triton.quantize_fp8_row, dict(a=r(4, 16), scale_ub=torch.tensor([8.0])), {"a": ANY_RANK, "scale_ub": ANY_RANK}),
    (triton.quantize_fp8_block, dict(x=r(8, 16), block_m=4, block_k=8, scale_ub=torch.tensor([8.0])),
     {"scale_ub": ANY_RANK}),
    (triton.quantize_fp8_tensor, dict(a=r(4, 16)), {"a": ANY_RANK}),
    (mslk.quantize_fp8_group, dict(x=r(4, 16), group_size=8, scale_ub=torch.tensor([8.0])),
     {"x": ANY_RANK, "scale_ub": ANY_RANK}),
    (mslk.dequantize_fp8_row, dict(xq=r(4, 16, dtype=F8), x_scale=r(4, dtype=F32)), {}),
    (mslk.dequantize_fp8_block, dict(xq=r(8, 16, dtype=F8), x_scale=r(2, 2, dtype=F32), block_m=4, block_k=8), {}),
    # FP8 rowwise GEMMs
    (mslk.f8f8bf16_rowwise, dict(XQ=r(4, 16, dtype=F8), WQ=r(8, 16, dtype=F8), x_scale=r(4, dtype=F32),
                                 w_scale=r(8, dtype=F32), bias=r(8)), {}),
    (mslk.f8f8f16_rowwise, dict(XQ=r(4, 16, dtype=F8), WQ=r(8, 16, dtype=F8), x_scale=r(4, dtype=F32),
                                w_scale=r(8, dtype=F32)), {}),
    (mslk.f8f8bf16_rowwise_out, dict(XQ=r(4, 16, dtype=F8), WQ=r(8, 16, dtype=F8), x_scale=r(4, dtype=F32),
                                     w_scale=r(8, dtype=F32), output=r(4, 8)),
     {"XQ": {"rank": "leading dims allowed: the error then names the output of the other shape"}}),
    (mslk.f8f8bf16_rowwise_batched, dict(XQ=r(2, 4, 16, dtype=F8), WQ=r(2, 8, 16, dtype=F8),
                                         x_scale=r(2, 4, dtype=F32), w_scale=r(2, 8, dtype=F32)), {}),
    (mslk.f8f8bf16_rowwise_grouped_stacked, dict(XQ=r(6, 16, dtype=F8), WQ=r(2, 8, 16, dtype=F8),
                                                 x_scale=r(6, dtype=F32), w_scale=r(2, 8, dtype=F32), M_sizes=i32(2, 4)),
     {}),
    (mslk.f8f8bf16_rowwise_grouped_mm, dict(XQ=r(6, 16, dtype=F8), WQ=r(2, 8, 16, dtype=F8),
                                            x_scale=r(6, dtype=F32), w_scale=r(2, 8, dtype=F32), offsets=i32(2, 6)),
     {"XQ": BATCHED_XQ}),
    (mslk.f8f8bf16_rowwise_grouped_dynamic, dict(XQ=r(2, 4, 16, dtype=F8), WQ=r(2, 8, 16, dtype=F8),
                                                 x_scale=r(2, 4, dtype=F32), w_scale=r(2, 8, dtype=F32),
                                                 zero_start_index_M=torch.tensor([2, 4])), {}),
    (mslk.f8f8bf16_rowwise_grouped, dict(XQ=[r(4, 16, dtype=F8)], WQ=[r(8, 16, dtype=F8)], x_scale=[r(4, dtype=F32)],
                                         w_scale=[r(8, dtype=F32)]), {}),
    (mslk.f8f8bf16_rowwise_grouped_cat, dict(XQ=[r(4, 16, dtype=F8)], WQ=[r(8, 16, dtype=F8)],
                                             x_scale=[r(4, dtype=F32)], w_scale=[r(8, dtype=F32)]), {}),
    (triton.matmul_fp8_row, dict(a=r(4, 16, dtype=F8), b=r(8, 16, dtype=F8), a_scale=r(4, dtype=F32),
                                 b_scale=r(8, dtype=F32), bias=r(8, dtype=F32)), {}),
    # BF16 grouped GEMMs
    (mslk.bf16bf16bf16_grouped_stacked, dict(X=r(6, 16), W=r(2, 8, 16), M_sizes=i32(2, 4), out=r(6, 8)), {}),
    (mslk.bf16bf16bf16_grouped_grad, dict(X=r(6, 8), W=r(2, 8, 16), M_sizes=i32(2, 4)), {}),
    (mslk.bf16bf16bf16_grouped_wgrad, dict(X=r(6, 8), W=r(6, 16), M_sizes=i32(2, 4)), {}),
    (mslk.bf16bf16bf16_grouped_dynamic, dict(X=r(2, 4, 16), W=r(2, 8, 16), zero_start_index_M=torch.tensor([2, 4])),
     {}),
    (mslk.bf16bf16bf16_grouped, dict(X=[r(4, 16)], W=[r(8, 16)]), {}),
    (mslk.bf16bf16bf16_grouped_cat, dict(X=[r(4, 16)], W=[r(8, 16)]), {}),
    # Attention
    (mslk.fmha_fused_fwd, dict(q=attn(), k=attn(), v=attn(), bias=r(1, 2, 4, 4)), {"bias": ANY_RANK}),
    (mslk.fmha_fused_bwd, dict(grad_out=attn(), q=attn(), k=attn(), v=attn(), out=attn(), lse=r(1, 2, 4, dtype=F32)),
     {}),
    (mslk.fmha_reference_fwd, dict(q=attn(), k=attn(), v=attn(), bias=r(1, 2, 4, 4)), {"bias": ANY_RANK}),
    (mslk.fmha_fwd, dict(query=attn(), key=attn(), value=attn()), {}),
    (mslk.fmha_bwd, dict(dOutput=attn(), query=attn(), key=attn(), value=attn(), output=attn(),
                         softmax_lse=r(1, 2, 4, dtype=F32)), {}),
    (mslk.cutlass_blackwell_fmha_fwd, dict(q=attn(), k=attn(), v=attn(), cu_seqlens_q=None, cu_seqlens_k=None,
                                           max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False,
                                           seqlen_kv=None, page_table=None), {}),
    (mslk.memory_efficient_attention_forward, dict(q=attn(), k=attn(), v=attn()), {}),
    (mslk.memory_efficient_attention_forward_with_bias, dict(q=attn(), k=attn(), v=attn(), b=r(1, 2, 4, 4)),
     {"b": ANY_RANK}),
    (mslk.fmha_merge_attentions_varargs, dict(attn_split=[r(1, 4, 1, 2, 8, dtype=F32)] * 2,
                                              lse_split=[r(1, 1, 2, 4, dtype=F32)] * 2, write_lse=True, output_dtype=None,
                                              B=1, M=4, G=1, H=2, Kq=8), {}),
    (mslk.merge_attentions_varargs_backward, dict(attn_split=[r(1, 4, 1, 2, 8, dtype=F32)] * 2,
                                                  lse_split=[r(1, 1, 2, 4, dtype=F32)] * 2,
                                                  attn_out=r(1, 4, 1, 2, 8, dtype=F32), lse_out=r(1, 1, 2, 4, dtype=F32),
                                                  grad_attn=r(1, 4, 1, 2, 8, dtype=F32), grad_lse=None), {}),
    (mslk.cutlass_blackwell_fmha_bwd, dict(dout=attn(), q=attn(), k=attn(), v=attn(), out=attn(),
                                           softmax_lse=r(1, 2, 4, dtype=F32), cu_seqlens_q=None, cu_seqlens_k=None,
                                           max_seq_len_q=None, max_seq_len_k=None, softmax_scale=None, causal=False),
     {}),
    (mslk.fmha_decode_splitk, dict(q=r(1, 2, 2, 2, 8), k=r(1, 4, 2, 8), v=r(1, 4, 2, 8), seqlen_k=i32(3)), {}),
    # ... over FP8 caches (rows of D // 4 int32 words, float32 scales a row)
    (mslk.fmha_decode_splitk, dict(q=r(1, 2, 2, 2, 16), k=words(1, 4, 2, 4), v=words(1, 4, 2, 4), seqlen_k=i32(3),
                                   k_scale_shift=r(1, 4, 2, dtype=F32), v_scale_shift=r(1, 4, 2, dtype=F32)), {}),
    (mslk.fmha_gen_fwd, dict(query=r(2, 1, 4, 8), key=r(2, 16, 2, 8), value=r(2, 16, 2, 8), seqlen_kv=i32(16, 3),
                             split_k_size=8), {}),
    (mslk.fmha_fp8_dequant, dict(x=r(2, 3, 4, 8, dtype=F8), descale=r(2, 4, dtype=F32), dtype=BF), {}),
    (mslk.fmha_dropout_mask, dict(rng_state=torch.tensor([1, 2], dtype=torch.int64), B=1, H=2, Mq=4, Mkv=4,
                                  dropout_p=0.5, device=torch.device("cpu")), {}),
    # FP8 block/group-scaled GEMMs
    (mslk.f8f8bf16_blockwise, dict(XQ=r(4, 256, dtype=F8), WQ=r(8, 256, dtype=F8), x_scale=r(1, 2, dtype=F32),
                                   w_scale=r(1, 2, dtype=F32)), {}),
    (mslk.f8f8bf16_groupwise, dict(XQ=r(4, 256, dtype=F8), WQ=r(8, 256, dtype=F8), x_scale=r(2, 4, dtype=F32),
                                   w_scale=r(2, 1, dtype=F32)), {}),
    (mslk.f8f8bf16_groupwise_grouped, dict(XQ=r(4, 256, dtype=F8), WQ=r(2, 8, 256, dtype=F8),
                                           x_scale=r(4, 2, dtype=F32), w_scale=r(2, 2, 1, dtype=F32),
                                           M_sizes=torch.tensor([1, 3], dtype=torch.int64)), {}),
    # INT8 and exact-FP32 GEMMs
    (mslk.i8i8bf16, dict(XQ=r(4, 32).clamp(-3, 3).to(torch.int8), WQ=r(8, 32).clamp(-3, 3).to(torch.int8),
                         scale=0.5), {}),
    (mslk.i8i8bf16_dynamic, dict(XQ=r(4, 32).clamp(-3, 3).to(torch.int8), WQ=r(8, 32).clamp(-3, 3).to(torch.int8),
                                 scale=torch.tensor([0.5])), {}),
    (mslk.bf16x9_gemm, dict(A=r(4, 16, dtype=F32), B=r(8, 16, dtype=F32)), {}),
    # INT4-weight GEMMs: W [N, K/2] packed int8, group scales / zeros [K/group, N]
    (mslk.bf16i4bf16_rowwise, dict(X=r(4, 256), W=r(8, 128).clamp(-3, 3).to(torch.int8),
                                   w_scale_group=r(2, 8), w_zero_group=r(2, 8)), {}),
    (mslk.bf16i4bf16_rowwise_batched, dict(X=r(2, 4, 256), WQ=r(2, 8, 128).clamp(-3, 3).to(torch.int8),
                                           w_scale=r(2, 2, 8), w_zp=r(2, 2, 8)), {}),
    (mslk.f8i4bf16_rowwise, dict(XQ=r(4, 256, dtype=F8), WQ=r(8, 128).clamp(-3, 3).to(torch.int8),
                                 x_scale=r(4, dtype=F32), w_scale=r(2, 8), w_zp=r(2, 8)), {}),
    (mslk.preshuffle_i4, dict(WQ=r(8, 128).clamp(-3, 3).to(torch.int8), w_scale=r(2, 8)), {"WQ": ANY_RANK}),
    (mslk.bf16i4bf16_shuffled, dict(X=r(4, 256), W=r(8, 128).clamp(-3, 3).to(torch.int8),
                                    w_scale_group=r(2, 8), w_zero_group=r(2, 8)), {}),
    (mslk.f8i4bf16_shuffled, dict(XQ=r(4, 256, dtype=F8), WQ=r(8, 128).clamp(-3, 3).to(torch.int8),
                                  x_scale=r(4, dtype=F32), w_scale=r(8, dtype=F32),
                                  w_scale_group=r(2, 8, 8, dtype=F8)), {}),
    # quantized K/V caches: INT4 rows of D // 8 + groups int32 words (fp16 scale / shift words first),
    # FP8 rows of D // 4 words with a float32 scale a row (the fp16-pair form: test_decode_quantized)
    (mslk.dequantize_kv_int4, dict(cache=words(2, 4, 3), num_groups=1, dtype=BF), {}),
    (mslk.dequantize_kv_fp8, dict(cache=words(2, 4, 4), scale_shift=r(2, 4, 1, dtype=F32), dtype=BF), {}),
    # MoE
    (mslk.index_shuffling, dict(routing_scores=r(8, 16, dtype=F32), valid_token_count=i32(6)), {}),
    (mslk.gather_scale_dense_tokens, dict(x=r(4, 16), token_indices=i32(0, 1, 2, 3), expert_indices=i32(0, 1, 0, 1),
                                          scores=r(4, 2)), {}),
    (mslk.gather_scale_quant_dense_tokens, dict(x=r(4, 16), token_indices=i32(0, 1, 2, 3),
                                                expert_indices=i32(0, 1, 0, 1), scores=r(4, 2, dtype=F32)), {}),
    (mslk.scatter_add_dense_tokens, dict(out_tokens=r(4, 16), in_tokens=r(4, 16), token_indices=i32(3, 1, 2, 0)), {}),
    (mslk.scatter_add_padded_tokens, dict(in_tokens=r(2, 6, 16), token_counts=i32(1, 2, 0, 3),
                                          token_indices=i32(0, 1, 2, 0, 2, 1), out_tokens=r(3, 16)), {}),
    (mslk.scatter_add_along_first_dim, dict(Dst=r(4, 16, dtype=F32), Src=r(3, 16, dtype=F32), Index=i32(3, 1, 2)), {}),
    (mslk.silu_mul, dict(x0=r(4, 16), x1=r(4, 16)), {}),
    (mslk.silu_mul_quant, dict(x0=r(4, 16), x1=r(4, 16)), {}),
    (mslk.combine_shuffling, dict(tokens=r(6, 16), token_counts=torch.tensor([[1, 2], [2, 1]], dtype=I32)),
     {"tokens": ROWS_ANY_DTYPE}),
    (mslk.split_shuffling, dict(tokens=r(6, 16), token_counts=torch.tensor([[1, 2], [2, 1]], dtype=I32)),
     {"tokens": ROWS_ANY_DTYPE}),
]


def _bad_dtype(t):
    if t.dtype in (F8, torch.float8_e5m2):
        return t.to(BF)
    if t.is_floating_point():
        return t.to(torch.int16)
    return t.to(F32)


def _stride2(t):
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    view = wide[..., ::2]
    view.copy_(t)
    return view


MUTATIONS = {"dtype": _bad_dtype, "rank": lambda t: t[None], "stride": _stride2}

# Spec-level names some ops' messages use for their arguments (the same tensor either way).
ALIASES = [{"q", "query"}, {"k", "key"}, {"v", "value"}, {"b", "bias"}, {"dOutput", "dout", "grad_out"},
           {"output", "out"}, {"softmax_lse", "lse"}]
# Found by this sweep, not fixed yet: (op, argument, mutation) -> what is wrong.
KNOWN = {}
HOST_ARGS = {"rng_state"}  # arguments the spec keeps on the CPU (the GPU variants of the sweep leave them there)


def _op_name(op):
    return op._qualified_op_name if hasattr(op, "_qualified_op_name") else str(op)


def _cases():
    out = []
    for op, kwargs, exempt in CASES:
        for arg, val in kwargs.items():
            tensors = val if isinstance(val, list) else [val]
            if not tensors or not isinstance(tensors[0], torch.Tensor):
                continue
            for mut in MUTATIONS:
                if mut in exempt.get(arg, {}):
                    continue
                if mut == "stride" and tensors[0].shape[-1:] in ((), (1,)) or mut == "stride" and tensors[0].ndim == 0:
                    continue
                out.append(pytest.param(op, kwargs, arg, mut, id=f"{_op_name(op)}-{arg}-{mut}"))
    return out


def _clone(kwargs):
    return {k: ([t.clone() for t in v] if isinstance(v, list) and v and isinstance(v[0], torch.Tensor)
                else v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}


def _same(a, b):
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8) if a.dtype == F8 else a,
                                                                         b.view(torch.uint8) if b.dtype == F8 else b)
    return a == b


def test_every_valid_call_runs():
    """The table's calls are valid: each mutation below is the only thing wrong."""
    for op, kwargs, _ in CASES:
        op(**_clone(kwargs))


def _names(op, arg):
    names = {arg}
    for group in ALIASES:
        if arg in group:
            names |= group
    return names


def names_argument(op, arg, msg: str) -> bool:
    """Whether an error message names `arg` (or an alias of it) as a word."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", msg, re.IGNORECASE)
               for n in _names(op, arg))


@pytest.mark.parametrize("op,kwargs,arg,mut", _cases())
def test_bad_input_names_the_argument(op, kwargs, arg, mut, request):
    known = KNOWN.get((_op_name(op), arg, mut))
    if known:
        request.applymarker(pytest.mark.xfail(reason=known, strict=False))
    good = _clone(kwargs)
    bad = _clone(kwargs)
    f = MUTATIONS[mut]
    bad[arg] = [f(bad[arg][0])] + bad[arg][1:] if isinstance(bad[arg], list) else f(bad[arg])
    try:
        got = op(**bad)
    except (ValueError, TypeError, RuntimeError) as e:
        assert names_argument(op, arg, str(e)), \
            f"{_op_name(op)}: the error for a bad '{arg}' ({mut}) does not name it: {str(e)[:300]}"
        return
    # Accepted: only a layout the op may take (a strided last dim, one more leading dim of 1),
    # and then it must compute exactly what the valid call computes.
    assert mut != "dtype", f"{_op_name(op)} accepted '{arg}' with a wrong dtype"
    want = op(**good)
    if got is None:  # an in-place op: compare what it wrote
        got, want = bad, good
    assert _same(_flat(got), _flat(want)), f"{_op_name(op)} accepted a {mut} '{arg}' but computed something else"


def _flat(x):
    if isinstance(x, dict):
        return [_flat(v) for v in x.values() if isinstance(v, (torch.Tensor, list))]
    if isinstance(x, (list, tuple)):
        return [_flat(v) for v in x]
    return x.reshape(-1) if isinstance(x, torch.Tensor) else x
