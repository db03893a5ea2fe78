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

# Weight-only INT4 (decode-sized M: one new token against an INT4 weight with group-128 scales
# and zeros).
from mslk.quantize.shuffle import int4_row_quantize_zp, pack_int4  # noqa: E402

N4 = K4 = 4096 if dev == "cuda" else 1024
w4 = torch.randn(N4, K4, device=dev, dtype=torch.bfloat16)
q4, s4, z4 = int4_row_quantize_zp(w4, 128)
s4, z4 = s4.bfloat16(), z4.bfloat16()
x4 = torch.randn(1, K4, device=dev, dtype=torch.bfloat16)
out = torch.ops.mslk.bf16i4bf16_rowwise(x4, pack_int4(q4), s4, z4)
wd = q4.double() * s4.double().t().repeat_interleave(128, 1) + z4.double().t().repeat_interleave(128, 1)
print(f"bf16i4bf16_rowwise (INT4 weight, M = 1): rel err vs float64 over the dequantized weight "
      f"{rel_err(out, x4.double() @ wd.t()):.2e}")

# 3. Fused attention (quick start: memory_efficient_attention with a causal mask), and the
#    exact softmax merge of partial attentions over K/V chunks.
from mslk.attention import fmha  # noqa: E402

B, M, H, K = 1, 512, 8, 64
q, k, v = (torch.randn(B, M, H, K, device=dev, dtype=torch.bfloat16) for _ in range(3))
out = fmha.memory_efficient_attention(q, k, v, attn_bias=fmha.LowerTriangularMask())
ref = torch.nn.functional.scaled_dot_product_attention(
    q.transpose(1, 2).double(), k.transpose(1, 2).double(), v.transpose(1, 2).double(), is_causal=True
).transpose(1, 2)
print(f"memory_efficient_attention {tuple(out.shape)}: rel err vs float64 SDPA {rel_err(out, ref):.2e}")
parts = [fmha.memory_efficient_attention_partial(q, kc, vc) for kc, vc in zip(k.chunk(2, 1), v.chunk(2, 1))]
merged, _ = fmha.merge_attentions([p[0] for p in parts], [p[1] for p in parts])
full = fmha.memory_efficient_attention(q, k, v)
print(f"merge_attentions of 2 K/V chunks vs attention over all keys: rel err {rel_err(merged, full):.2e}")
# Training: gradients of memory_efficient_attention against float64 autograd of SDPA.
qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
dout = torch.randn_like(q)
grads = torch.autograd.grad(fmha.memory_efficient_attention(qg, kg, vg, attn_bias=fmha.LowerTriangularMask()),
                            (qg, kg, vg), dout)
q64, k64, v64 = (x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v))
ref64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True)
refs = torch.autograd.grad(ref64, (q64, k64, v64), dout.double().transpose(1, 2))
print("memory_efficient_attention backward: rel err of dq, dk, dv vs float64 SDPA " +
      ", ".join(f"{rel_err(g, r.transpose(1, 2)):.2e}" for g, r in zip(grads, refs)))

# Decode: one new query per sequence against a KV cache, GQA (32 query heads over 8 K/V heads, the
# K/V heads expand()ed), by the split-K decode kernel on the GPU.
from mslk.attention.fmha import triton_splitk  # noqa: E402

B, Mkv, Hkv, R, K = 4, 4096 if dev == "cuda" else 256, 8, 4, 128
q = torch.randn(B, 1, Hkv, R, K, device=dev, dtype=torch.bfloat16)
k, v = (torch.randn(B, Mkv, Hkv, 1, K, device=dev, dtype=torch.bfloat16).expand(B, Mkv, Hkv, R, K) for _ in range(2))
out = fmha.memory_efficient_attention_forward(q, k, v, op=triton_splitk.FwOp if dev == "cuda" else None)
qh, kh, vh = (x.double().flatten(2, 3).transpose(1, 2) for x in (q, k, v))
ref = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2).unflatten(2, (Hkv, R))
print(f"decode attention ({'triton_splitk.FwOp' if dev == 'cuda' else 'CPU reference'}) over {Mkv} cached keys: "
      f"rel err vs float64 SDPA {rel_err(out, ref):.2e}")

# 4. MoE routing pieces: route, gather (scaled by the router score), scatter back.
import mslk.moe  # noqa: E402

T, D, E = 256, 512, 16
x = torch.randn(T, D, device=dev, dtype=torch.bfloat16)
scores = torch.softmax(torch.randn(T, E, device=dev), dim=-1)
counts, experts, tokens = torch.ops.mslk.index_shuffling(scores, top_k=1)
expert_x = mslk.moe.gather_scale_dense_tokens(x, tokens, experts, scores)
y = torch.zeros_like(x)
mslk.moe.scatter_add_dense_tokens(y, expert_x, tokens)
top = scores.max(-1).values[:, None]
print(f"index_shuffling: {int(counts[-1])} tokens over {int((counts[:E] > 0).sum())} experts; "
      f"gather+scatter round trip rel err {rel_err(y, x.double() * top.double()):.2e}")

# 5. Paths of the spec's quick start that are still to come.
pending = ["torch.ops.mslk.f8f8bf16_rowwise"] if not hasattr(torch.ops.mslk, "f8f8bf16_rowwise") else []
if pending:
    print("pending quick-start paths:", "; ".join(pending))
print("demo OK")
