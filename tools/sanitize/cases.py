"""One small call per landed CUDA op, for compute-sanitizer (tools/sanitize/run.sh).

Runs the bad-input sweep's valid calls (test/runtime/test_bad_inputs.py: every landed op on tiny
shapes) moved to the GPU, then a few calls on odd shapes that reach the tiled kernels' edge paths
(sizes that are not tile multiples, an empty group, M = 1, the attention backward). A call that
raises is reported and makes the exit status 1; memory errors are the sanitizer's to report.
Args: optional substrings; only cases whose name contains one of them run."""

import os
import sys
import traceback

import torch

import mslk  # noqa: F401
from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab, triton_splitk
from test.runtime.test_bad_inputs import CASES, HOST_ARGS, _op_name

DEV = torch.device("cuda")
BF, F8, F32, I32 = torch.bfloat16, torch.float8_e4m3fn, torch.float32, torch.int32
gen = torch.Generator(device="cuda").manual_seed(0)


def rnd(*shape, dtype=BF, scale=1.0):
    return (torch.randn(*shape, generator=gen, device=DEV) * scale).to(dtype)


def to_cuda(v):
    if isinstance(v, torch.Tensor):
        return v.to(DEV)
    if isinstance(v, list):
        return [to_cuda(x) for x in v]
    if isinstance(v, torch.device):
        return DEV
    return v


def sweep_cases():
    for op, kwargs, _ in CASES:
        yield f"sweep:{_op_name(op)}", (lambda op=op, kw=kwargs: op(**{k: v if k in HOST_ARGS else to_cuda(v)
                                                                         for k, v in kw.items()}))


def grouped_bf16():
    # 4 groups, one empty: the ptr-array epilogue's per-group tensor maps include an unused one.
    return torch.ops.mslk.bf16bf16bf16_grouped_stacked(rnd(13, 256), rnd(4, 72, 256),
                                                       torch.tensor([5, 0, 3, 5], dtype=I32, device=DEV))


def grouped_fp8():
    return torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(
        rnd(13, 256, dtype=F8), rnd(4, 72, 256, dtype=F8), rnd(13, dtype=F32).abs(), rnd(4, 72, dtype=F32).abs(),
        torch.tensor([5, 0, 3, 5], dtype=I32, device=DEV))


def rowwise(m):
    return lambda: torch.ops.mslk.f8f8bf16_rowwise(rnd(m, 272, dtype=F8), rnd(200, 272, dtype=F8),
                                                   rnd(m, dtype=F32).abs(), rnd(200, dtype=F32).abs())


def quantizers():
    x = rnd(131, 300)
    torch.ops.triton.quantize_fp8_row(x)
    torch.ops.triton.quantize_fp8_block(x, 128, 128)
    torch.ops.triton.quantize_fp8_tensor(x)
    torch.ops.mslk.quantize_fp8_group(rnd(7, 384), group_size=128)


def blockwise(m):
    k, n = 384, 264
    return lambda: torch.ops.mslk.f8f8bf16_groupwise(rnd(m, k, dtype=F8), rnd(n, k, dtype=F8),
                                                     rnd(k // 128, m, dtype=F32).abs(),
                                                     rnd(k // 128, (n + 127) // 128, dtype=F32).abs())


def blockwise_grouped():
    sizes, k, n = [0, 5, 130, 1], 384, 264
    m = sum(sizes) + 3  # rows past every group: zeroed
    return torch.ops.mslk.f8f8bf16_groupwise_grouped(
        rnd(m, k, dtype=F8), rnd(len(sizes), n, k, dtype=F8), rnd(m, k // 128, dtype=F32).abs(),
        rnd(len(sizes), k // 128, (n + 127) // 128, dtype=F32).abs(), torch.tensor(sizes, device=DEV))


def with_env(env, call):
    def run():
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return call()
        finally:
            for k, v in old.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
    return run


def int4(m):
    n, k, g = 72, 512, 128
    return lambda: torch.ops.mslk.bf16i4bf16_rowwise(
        rnd(m, k), torch.randint(-128, 127, (n, k // 2), generator=gen, device=DEV, dtype=torch.int8),
        rnd(k // g, n, scale=0.1), rnd(k // g, n, scale=0.1))


def int8(m):
    return lambda: torch.ops.mslk.i8i8bf16(
        torch.randint(-9, 9, (m, 272), generator=gen, device=DEV, dtype=torch.int8),
        torch.randint(-9, 9, (200, 272), generator=gen, device=DEV, dtype=torch.int8), 0.01)


def attention(d, dtype, mask, backward=True):
    def call():
        q, k, v = (rnd(1, 129, 2, d, dtype=dtype).requires_grad_(backward) for _ in range(3))
        out = fmha.memory_efficient_attention(q, k, v, mask)
        if backward:
            out.backward(torch.randn_like(out))
    return call


def forward_sm90(kind):
    """The Hopper forward forced onto paged K/V (pages of 16 and 256 keys: rows across pages and whole
    tiles, a gappy lane off a page) or a tensor bias (strided keys); forward only, its output unread."""
    def call():
        if kind == "paged":
            from test.attention.test_fmha_fwd_kernel import paged_masks
            for page in (16, 256):
                for bias in (paged_masks("cuda", page)[0], paged_masks("cuda", page)[4]):
                    q = rnd(1, bias.q_seqinfo.total, 2, 128)
                    k, v = rnd(1, 14 * page, 2, 128), rnd(1, 14 * page, 2, 128)
                    fmha.memory_efficient_attention_forward(q, k, v, bias)
        else:
            q, k, v = (rnd(2, 200, 2, 128) for _ in range(3))
            fmha.memory_efficient_attention_forward(q, k, v, rnd(2, 2, 200, 200, dtype=F32).transpose(-1, -2))
    return with_env({"MSLK_FMHA_KERNEL": "sm90"}, call)


def decode():
    q = rnd(2, 1, 2, 4, 128)
    k = rnd(2, 1100, 2, 1, 128).expand(2, 1100, 2, 4, 128)
    v = rnd(2, 1100, 2, 1, 128).expand(2, 1100, 2, 4, 128)
    fmha.memory_efficient_attention_forward(q, k, v, op=triton_splitk.FwOp)


def decode_quantized(fmt):
    """The fused quantized-cache decode kernel on ragged, unaligned rows: INT4 with one group (68-byte
    rows, 4-byte copies) or FP8 (16-byte copies and the scale/shift rows)."""
    def call():
        from mslk.attention.fmha import quantized_kv as qkv
        q = rnd(1, 3, 2, 4, 128)
        x = [torch.randn(1, 1500, 2, 128, generator=gen, device=DEV) for _ in range(2)]
        if fmt == "int4":
            (kq, vq), (ks, vs) = [qkv.quantize_kv_int4(t, 1) for t in x], (None, None)
        else:
            (kq, ks), (vq, vs) = [qkv.quantize_kv_fp8(t) for t in x]
        i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=DEV)  # noqa: E731
        torch.ops.mslk.fmha_decode_splitk(q, kq, vq, seqstart_q=i32([0, 1, 3]), seqstart_k=i32([0, 700, 1500]),
                                          seqlen_k=i32([5, 777]), max_seqlen_q=2, mask_kind=2, scale=0.1,
                                          num_splits=3, k_scale_shift=ks, v_scale_shift=vs)
    return with_env({"MSLK_DECODE_KV_DEQUANT": "fused"}, call)


def moe():
    scores = rnd(37, 16, dtype=F32)
    counts, experts, tokens = torch.ops.mslk.index_shuffling(scores, top_k=1)
    x = rnd(37, 136)
    gathered = mslk.moe.gather_scale_dense_tokens(x, tokens, experts, scores)
    out = torch.zeros_like(x)
    mslk.moe.scatter_add_dense_tokens(out, gathered, tokens)
    torch.ops.mslk.silu_mul_quant(rnd(37, 136), rnd(37, 136))


EDGE = [
    ("edge:quantizers", quantizers),
    ("edge:f8f8bf16_rowwise_m1", rowwise(1)),
    ("edge:f8f8bf16_rowwise_m131", rowwise(131)),
    ("edge:f8f8bf16_rowwise_grouped_stacked_empty_group", grouped_fp8),
    ("edge:bf16bf16bf16_grouped_stacked_empty_group", grouped_bf16),
    ("edge:f8f8bf16_groupwise_m1", blockwise(1)),
    ("edge:f8f8bf16_groupwise_m16", blockwise(16)),
    ("edge:f8f8bf16_groupwise_m131", blockwise(131)),
    ("edge:f8f8bf16_groupwise_grouped_empty_group", blockwise_grouped),
    # a swizzle that pads each group's tile grid: the padding tiles must read and store nothing
    ("edge:f8f8bf16_groupwise_grouped_swizzled",
     with_env({"MSLK_GEMM_SWIZZLE": "8", "MSLK_GEMM_RASTER": "n"}, blockwise_grouped)),
    ("edge:bf16i4bf16_rowwise_m1", int4(1)),
    ("edge:bf16i4bf16_rowwise_m7", int4(7)),
    ("edge:bf16i4bf16_rowwise_m33", int4(33)),
    ("edge:i8i8bf16_m7", int8(7)),
    ("edge:i8i8bf16_m131", int8(131)),
    ("edge:attention_d128_bf16_causal", attention(128, BF, ab.LowerTriangularMask())),
    ("edge:attention_d64_fp16", attention(64, torch.float16, None)),
    ("edge:attention_d40_fp32_causal", attention(40, F32, ab.LowerTriangularMask())),
    ("edge:attention_d256_bf16", attention(256, BF, None)),
    # the Hopper backward's tile-contiguous dQ sums: bulk reductions and their conversion
    ("edge:attention_d128_bf16_causal_dq_tiles",
     with_env({"MSLK_FMHA_BWD_SM90_DQ": "tiles"}, attention(128, BF, ab.LowerTriangularMask()))),
    ("edge:attention_d64_fp16_dq_tiles", with_env({"MSLK_FMHA_BWD_SM90_DQ": "tiles"}, attention(64, torch.float16, None))),
    ("edge:attention_d256_bf16_causal_sm90", with_env({"MSLK_FMHA_BWD_SM90_D256": "1"},
                                                      attention(256, BF, ab.LowerTriangularMask()))),
    ("edge:attention_forward_sm90_paged", forward_sm90("paged")),
    ("edge:attention_forward_sm90_bias", forward_sm90("bias")),
    ("edge:decode_splitk", decode),
    ("edge:decode_splitk_int4_fused", decode_quantized("int4")),
    ("edge:decode_splitk_fp8_fused", decode_quantized("fp8")),
    ("edge:moe_tokens", moe),
]


def forward_then_read(kernel):
    """The attention forward on one kernel (MSLK_FMHA_KERNEL), then a torch kernel reading its output."""
    def call():
        os.environ["MSLK_FMHA_KERNEL"] = kernel
        try:
            q, k, v = (rnd(1, 129, 2, 128) for _ in range(3))
            fmha.memory_efficient_attention(q, k, v).float().sum().item()
        finally:
            del os.environ["MSLK_FMHA_KERNEL"]
    return call


# Run only when their prefix is named. "probe": what initcheck sees of outputs written by TMA
# bulk-tensor stores (the Hopper attention forward's epilogue) against ordinary stores (the sm80
# kernel's). "forward": the attention forward alone, for the initcheck pass whose forward runs
# the Hopper kernel (its output, read by the backward, would show as uninitialised there).
ON_REQUEST = [
    ("probe:attention_forward_sm90_tma_store", forward_then_read("sm90")),
    ("probe:attention_forward_sm80_st_global", forward_then_read("sm80")),
    ("forward:attention_d128_bf16_causal", attention(128, BF, ab.LowerTriangularMask(), backward=False)),
    ("forward:attention_d64_fp16", attention(64, torch.float16, None, backward=False)),
    ("forward:attention_d256_bf16", attention(256, BF, None, backward=False)),
]


def main(selection):
    failed = 0
    asked = [c for c in ON_REQUEST if any(c[0].startswith(s.split(":")[0] + ":") for s in selection)]
    for name, call in [*sweep_cases(), *EDGE, *asked]:
        if selection and not any(s in name for s in selection):
            continue
        try:
            call()
            torch.cuda.synchronize()
            print(f"ok   {name}", flush=True)
        except Exception:  # noqa: BLE001  (report every case, then fail)
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    print(f"cases: {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
