"""Every quantize op passes torch.library.opcheck and runs under torch.compile(fullgraph=True)."""

import pytest
import torch

from mslk.quantize.triton import fp8_quantize as q
from test.quantize.fp8_reference import rand


def op_cases(device):
    x = rand((33, 256), torch.bfloat16, device)
    x3 = rand((2, 5, 128), torch.float16, device)
    ub = torch.tensor([2.0], device=device)
    zs = torch.tensor([3, 5], dtype=torch.int32, device=device)
    ms = torch.tensor([10, 0, 23], dtype=torch.int64, device=device)
    xq, s = q.quantize_fp8_row(x)
    bq, bs = q.quantize_fp8_block(x, 16, 64)
    return [
        (torch.ops.triton.quantize_fp8_row.default, (x,), {}),
        (torch.ops.triton.quantize_fp8_row.default, (x3, ub, zs), {"align_rows_to": 48, "eps_opt": 1e-4}),
        (torch.ops.triton.quantize_fp8_block.default, (x, 16, 64, ub), {"k_major": False}),
        (torch.ops.triton.quantize_fp8_tensor.default, (x3,), {}),
        (torch.ops.mslk.quantize_fp8_group.default, (x, 64), {}),
        (torch.ops.mslk.quantize_fp8_group.default, (x, 128, None, ms, False), {}),
        (torch.ops.mslk.dequantize_fp8_row.default, (xq, s), {}),
        (torch.ops.mslk.dequantize_fp8_block.default, (bq, bs, 16, 64), {}),
    ]


# torch's SchemaCheckMode cannot compare FP8 inputs ("mul_cpu_reduced_float" is missing for
# Float8_e4m3fn), so for ops that take FP8 its mutation check is done here by hand.
NO_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def test_opcheck(device):
    for op, args, kwargs in op_cases(device):
        fp8_in = any(isinstance(a, torch.Tensor) and a.dtype == torch.float8_e4m3fn for a in args)
        if not fp8_in:
            torch.library.opcheck(op, args, kwargs)
            continue
        before = [a.clone() for a in args if isinstance(a, torch.Tensor)]
        torch.library.opcheck(op, args, kwargs, test_utils=NO_SCHEMA)
        after = [a for a in args if isinstance(a, torch.Tensor)]
        assert all(torch.equal(b.view(torch.uint8) if b.dtype == torch.float8_e4m3fn else b,
                               a.view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a)
                   for b, a in zip(before, after))


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    def pipeline(x, ub):
        xq, s = q.quantize_fp8_row(x, scale_ub=ub)
        bq, bs = q.quantize_fp8_block(x, 32, 32)
        gq, gs = q.quantize_fp8_group(x, 64, k_major=False)
        tq, ts = q.quantize_fp8_tensor(x)
        y = q.dequantize_fp8_row(xq, s) + q.dequantize_fp8_block(bq, bs, 32, 32)
        return y, gq, gs, tq, ts

    x = rand((64, 256), torch.bfloat16, device)
    ub = torch.tensor([4.0], device=device)
    eager = pipeline(x, ub)
    compiled = torch.compile(pipeline, fullgraph=True)(x, ub)
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape and e.dtype == c.dtype
        assert torch.equal(e.view(torch.uint8) if e.dtype == torch.float8_e4m3fn else e,
                           c.view(torch.uint8) if c.dtype == torch.float8_e4m3fn else c)


def test_torch_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    f = torch.compile(lambda x: q.quantize_fp8_row(x, align_rows_to=16), fullgraph=True, dynamic=True)
    for m, k in [(3, 40), (17, 64), (5, 100)]:
        x = rand((m, k), torch.bfloat16, device)
        xq, s = f(x)
        assert xq.shape == (m, -(-k // 16) * 16) and s.shape == (m,)
