"""Quick-start demo of mslk: runs on the GPU when there is one, else on the CPU backend.

Each section is a quick-start path of the spec; paths whose ops have not landed yet are listed
as pending rather than faked.
"""

import time

import torch

import mslk
from mslk.quantize.triton.fp8_quantize import (
    dequantize_fp8_row,
    quantize_fp8_block,
    quantize_fp8_group,
    quantize_fp8_row,
    quantize_fp8_tensor,
)

dev = "cuda" if torch.cuda.is_available() else "cpu"
name = torch.cuda.get_device_name() if dev == "cuda" else "CPU backend"
print(f"mslk {mslk.__version__} ({mslk.__variant__} build) on {name}")


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


# 1. FP8 quantization at every granularity (quick start: "Quantize, then GEMM").
x = torch.randn(1024, 4096, device=dev, dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
xq, x_scale = quantize_fp8_row(x)
wq, w_scale = quantize_fp8_row(w)
print(f"quantize_fp8_row    xq {tuple(xq.shape)} {xq.dtype}, x_scale {tuple(x_scale.shape)}; "
      f"dequant rel err {rel_err(dequantize_fp8_row(xq, x_scale), x):.2e}")
bq, bs = quantize_fp8_block(x, 128, 128)
gq, gs = quantize_fp8_group(x, 128)
tq, ts = quantize_fp8_tensor(x)
print(f"quantize_fp8_block  scales {tuple(bs.shape)}; group scales {tuple(gs.shape)}; tensor scale {ts.item():.3e}")

# 2. The FP8 linear layer, conceptually dequant(xq) @ dequant(wq).T -> BF16.
t0 = time.perf_counter()
if hasattr(torch.ops.mslk, "f8f8bf16_rowwise"):
    out = torch.ops.mslk.f8f8bf16_rowwise(xq, wq, x_scale, w_scale)
    how = "torch.ops.mslk.f8f8bf16_rowwise"
else:  # the GEMM family has not landed yet: show the contract with the dequantizers
    out = (dequantize_fp8_row(xq, x_scale).float() @ dequantize_fp8_row(wq, w_scale).float().T).bfloat16()
    how = "dequantize_fp8_row + matmul (f8f8bf16_rowwise pending)"
ref = x.double() @ w.double().T
print(f"FP8 linear via {how}: rel err vs float64 {rel_err(out, ref):.2e} "
      f"({(time.perf_counter() - t0) * 1e3:.1f} ms)")

# 3. Paths of the spec's quick start that are still to come.
pending = [p for p, ok in [
    ("mslk.attention.fmha.memory_efficient_attention", False),
    ("merge_attentions_autograd", False),
    ("torch.ops.mslk.index_shuffling (MoE routing)", hasattr(torch.ops.mslk, "index_shuffling")),
] if not ok]
if pending:
    print("pending quick-start paths:", "; ".join(pending))
print("demo OK")
