"""Host time per eager call on tiny shapes (device work ~ nothing): what a decode step pays before
the GPU does anything. Usage: python3 tools/microbench/host_overhead.py [cuda|cpu] (default: cuda
when present). On the CPU the same glue runs (argument checks, allocation, dispatch) without the
CUDA runtime calls and the launch, with the CPU reference doing the (tiny) arithmetic."""

import sys
import time

import torch

import mslk  # noqa: F401
from mslk.gemm.triton.fp8_gemm import matmul_fp8_row
from mslk.quantize.triton.fp8_quantize import quantize_fp8_row


def per_call_us(fn, device, n=3000, reps=5):
    """The best of `reps` runs of n calls (the noise of a shared host only ever adds)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(reps):
        sync()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu")
    # CPU: the reference's arithmetic is not free, so smaller operands keep it out of the number.
    M, N, K = (1, 256, 256) if d == "cuda" else (1, 16, 32)
    xq = torch.randn(M, K, device=d).to(torch.float8_e4m3fn)
    wq = torch.randn(N, K, device=d).to(torch.float8_e4m3fn)
    xs, ws = torch.rand(M, device=d) + 0.5, torch.rand(N, device=d) + 0.5
    x = torch.randn(M, K, device=d, dtype=torch.bfloat16)
    cases = {
        "mslk f8f8bf16_rowwise": lambda: torch.ops.mslk.f8f8bf16_rowwise(xq, wq, xs, ws, None, True),
        "mslk matmul_fp8_row (py)": lambda: matmul_fp8_row(xq, wq, xs, ws),
        "torch._scaled_mm rowwise": lambda: torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                                             out_dtype=torch.bfloat16, use_fast_accum=True),
        "mslk quantize_fp8_row (op)": lambda: torch.ops.triton.quantize_fp8_row(x),
        "mslk quantize_fp8_row (py)": lambda: quantize_fp8_row(x),
        "mslk dequantize_fp8_row": lambda: torch.ops.mslk.dequantize_fp8_row(xq, xs),
        "torch.empty (reference)": lambda: torch.empty(M, N, device=d, dtype=torch.bfloat16),
        "torch.add (reference)": lambda: torch.add(x, x),
    }
    print(f"device {d}, M N K = {M} {N} {K}")
    for name, fn in cases.items():
        try:
            print(f"host overhead {name:28s} {per_call_us(fn, d):6.1f} us/call")
        except Exception as e:  # noqa: BLE001
            print(f"host overhead {name:28s} failed: {e}")


if __name__ == "__main__":
    main()
