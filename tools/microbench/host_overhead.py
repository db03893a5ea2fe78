"""Host time per eager call on tiny shapes (device work ~ nothing): what a decode step pays before
the GPU does anything. Usage (GPU): python3 tools/microbench/host_overhead.py"""

import time

import torch

import mslk  # noqa: F401


def per_call_us(fn, n=3000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main():
    d = "cuda"
    M, N, K = 1, 256, 256
    xq = torch.randn(M, K, device=d).to(torch.float8_e4m3fn)
    wq = torch.randn(N, K, device=d).to(torch.float8_e4m3fn)
    xs, ws = torch.rand(M, device=d) + 0.5, torch.rand(N, device=d) + 0.5
    x = torch.randn(M, K, device=d, dtype=torch.bfloat16)
    cases = {
        "mslk f8f8bf16_rowwise": lambda: torch.ops.mslk.f8f8bf16_rowwise(xq, wq, xs, ws, None, True),
        "torch._scaled_mm rowwise": lambda: torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                                             out_dtype=torch.bfloat16, use_fast_accum=True),
        "mslk quantize_fp8_row (op)": lambda: torch.ops.triton.quantize_fp8_row(x),
        "torch.empty (reference)": lambda: torch.empty(M, N, device=d, dtype=torch.bfloat16),
        "torch.add (reference)": lambda: torch.add(x, x),
    }
    for name, fn in cases.items():
        try:
            print(f"host overhead {name:28s} {per_call_us(fn):6.1f} us/call")
        except Exception as e:  # noqa: BLE001
            print(f"host overhead {name:28s} failed: {e}")


if __name__ == "__main__":
    main()
