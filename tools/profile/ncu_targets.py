"""One profiled call of an mslk op or its peer, for Nsight Compute: warm-up outside, then the call
inside the NVTX range "prof" (ncu --nvtx --nvtx-include "prof/" profiles only those kernels).
Usage: python3 tools/profile/ncu_targets.py <target>; targets are the keys of TARGETS."""

import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mslk  # noqa: F401
from mslk.attention import fmha


def attn(backend, B=2, H=32, S=4096, D=128):
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if backend == "mslk":
        return lambda: fmha.memory_efficient_attention_forward(q, k, v)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    be = SDPBackend.CUDNN_ATTENTION if backend == "cudnn" else SDPBackend.FLASH_ATTENTION

    def run():
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(qt, kt, vt)
    return run


def fp8(backend, M=8192, N=8192, K=8192):
    xq = (torch.randn(M, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    wq = (torch.randn(N, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    xs, ws = torch.rand(M, device="cuda") + 0.5, torch.rand(N, device="cuda") + 0.5
    if backend == "mslk":
        return lambda: torch.ops.mslk.f8f8bf16_rowwise(xq, wq, xs, ws, None, True)
    return lambda: torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                    out_dtype=torch.bfloat16, use_fast_accum=True)


def quant(kind, M=8192, K=8192):
    from mslk.quantize.triton import fp8_quantize as q
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    return {"row": lambda: q.quantize_fp8_row(x), "block128": lambda: q.quantize_fp8_block(x, 128, 128),
            "group128": lambda: q.quantize_fp8_group(x, 128)}[kind]


def copy(M=8192, K=8192):
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    return lambda: y.copy_(x)


def decode(fmt, route=None, B=8, Hkv=8, R=4, keys=8192, D=128):
    """Split-K decode of one query per sequence over a bf16, FP8 or INT4 (int4_g<groups>) cache
    (the decode benchmark's inputs; MSLK_DECODE_KV_DEQUANT=route when given)."""
    from bench.attention.bench_decode_quantized import decode as call, make
    args = make(B, Hkv * R, Hkv, keys, D, fmt)
    if route is not None:
        os.environ["MSLK_DECODE_KV_DEQUANT"] = route
    return lambda: call(*args)


def forced_kernel(name, fn):
    """fn with MSLK_FP8_GEMM_KERNEL=name (the op reads it per call; this process profiles one target)."""
    os.environ["MSLK_FP8_GEMM_KERNEL"] = name
    return fn


def fp8_grouped(row=None, E=8, tpe=2048, N=4096, K=7168):
    """The grouped block/group-scaled FP8 GEMM at E experts of tpe rows (the grouped benchmark's
    uniform shape); row: MSLK_FP8_BLOCKWISE_GROUPED_CONFIG (a CUTLASS row, or the row after them:
    mslk's wgmma kernel)."""
    M, kb = E * tpe, K // 128
    xq = (torch.randn(M, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    wq = (torch.randn(E, N, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    xs, ws = torch.rand(M, kb, device="cuda") * 0.01 + 1e-3, torch.rand(E, kb, N // 128, device="cuda") * 0.01 + 1e-3
    ms = torch.full((E,), tpe, dtype=torch.int64, device="cuda")
    if row is not None:
        os.environ["MSLK_FP8_BLOCKWISE_GROUPED_CONFIG"] = str(row)
    return lambda: torch.ops.mslk.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)


def fp8_blockwise_dense(M=16384, N=4096, K=7168):
    """The dense block/group-scaled FP8 GEMM over E 8 x 2048 rows' worth of tokens and one weight
    (the benchmark's inputs): the same 128 x 128 tiles as the grouped targets, without per-group work."""
    from bench.gemm.bench_fp8_blockwise import make, ours
    args = make(M, N, K)
    return lambda: ours(*args)


def bf16x9(M, kernel, row=None, N=8192, K=8192):
    """bf16x9_gemm at M x N x K with MSLK_BF16X9_KERNEL=kernel (and MSLK_BF16X9_FMA_CONFIG=row)."""
    os.environ["MSLK_BF16X9_KERNEL"] = kernel
    if row is not None:
        os.environ["MSLK_BF16X9_FMA_CONFIG"] = str(row)
    a, b = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
    return lambda: torch.ops.mslk.bf16x9_gemm(a, b)


TARGETS = {
    "attn-mslk": lambda: attn("mslk"), "attn-cudnn": lambda: attn("cudnn"),
    "attn-mslk-d64": lambda: attn("mslk", B=4, H=16, S=2048, D=64),
    "attn-cudnn-d64": lambda: attn("cudnn", B=4, H=16, S=2048, D=64),
    # d128 dense at 32 and 128 key tiles a work tile (16 and 32 whole rounds of 132 SMs): ours runs
    # 0.96-0.99x cuDNN at the first and 1.03-1.04x at the second (2026-12-01)
    "attn-mslk-s4096": lambda: attn("mslk", B=2, H=33, S=4096), "attn-cudnn-s4096": lambda: attn("cudnn", B=2, H=33, S=4096),
    "attn-mslk-s16384": lambda: attn("mslk", B=1, H=33, S=16384),
    "attn-cudnn-s16384": lambda: attn("cudnn", B=1, H=33, S=16384),
    "fp8-mslk": lambda: fp8("mslk"), "fp8-cublas": lambda: fp8("cublas"),
    # decode: M = 1 runs the skinny kernel (and its split-K reduce), M = 16 CUTLASS 64x128 tiles;
    # both ~2x the 64 MB weight-read floor at N = K = 8192 (bench/gemm/results_fp8_rowwise.md)
    "fp8-decode-m1": lambda: fp8("mslk", M=1), "fp8-decode-m16": lambda: fp8("mslk", M=16),
    "fp8-decode-m16-cublas": lambda: fp8("cublas", M=16),
    "fp8-decode-m16-skinny": lambda: forced_kernel("skinny", fp8("mslk", M=16)),
    # FP8 quantizers at 8192^2 bf16 (row: 78% of copy bandwidth, block 128: 1.54x its byte floor)
    # and torch's copy of the same tensor for the memory-side reference
    "quant-row": lambda: quant("row"), "quant-block128": lambda: quant("block128"),
    "quant-group128": lambda: quant("group128"), "copy-8192sq": copy,
    # split-K decode, B8 Hq32 Hkv8 d128 8192 keys: bf16 cache; FP8 folded, fused and registers; INT4 one group
    # (4-byte copies: 68-byte rows) and four groups (16-byte copies)
    "decode-bf16": lambda: decode("bf16"), "decode-fp8-folded": lambda: decode("fp8", "folded"),
    "decode-fp8-fused": lambda: decode("fp8", "fused"), "decode-fp8-registers": lambda: decode("fp8", "registers"), "decode-int4g1-folded": lambda: decode("int4_g1", "folded"),
    "decode-int4g4-fused": lambda: decode("int4_g4", "fused"),
    # grouped FP8 block/group-scaled at E 8 x 2048 rows: the CUTLASS pick (2x1 cluster), its 1x1
    # row of the same 128 x 128 tile, and mslk's wgmma kernel (same tile, no cluster)
    "fp8g-cutlass": lambda: fp8_grouped(), "fp8g-cutlass-1x1": lambda: fp8_grouped(2),
    "fp8g-wgmma": lambda: fp8_grouped(3), "fp8b-dense": fp8_blockwise_dense,
    # bf16x9 at N = K = 8192: the fused kernel (one tile row, K split in two) at 1, 32 and 128 rows,
    # whose times barely move with M (187 / 221 / 262 us, H100); the FMA kernel's row 8 at 16 rows
    "bf16x9-fused-m1": lambda: bf16x9(1, "fused"), "bf16x9-fused-m32": lambda: bf16x9(32, "fused"),
    "bf16x9-fused-m128": lambda: bf16x9(128, "fused"), "bf16x9-fma-m16": lambda: bf16x9(16, "fma", 8),
}

if __name__ == "__main__":
    fn = TARGETS[sys.argv[1]]()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    fn()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
