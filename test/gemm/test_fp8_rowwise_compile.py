"""Every rowwise GEMM op passes torch.library.opcheck and runs under torch.compile(fullgraph=True)."""

import torch

from mslk.gemm.triton.fp8_gemm import matmul_fp8_row
from test.gemm.fp8_gemm_reference import FP8, rand_fp8, rand_scale

ops = torch.ops.mslk


def op_cases(device):
    xq, wq = rand_fp8((9, 64), device), rand_fp8((24, 64), device)
    xs, ws = rand_scale(9, device), rand_scale(24, device)
    bias = torch.randn(24, device=device).to(torch.bfloat16)
    x3, w3 = rand_fp8((2, 5, 64), device), rand_fp8((2, 24, 64), device)
    xs3, ws3 = rand_scale(10, device), rand_scale(48, device)
    ms = torch.tensor([4, 5], dtype=torch.int64, device=device)
    offs = torch.tensor([4, 9], dtype=torch.int32, device=device)
    out = torch.empty(9, 24, dtype=torch.bfloat16, device=device)
    return [
        (ops.f8f8bf16_rowwise.default, (xq, wq, xs, ws, bias, False), {}),
        (ops.f8f8bf16_rowwise.default, (x3, wq, xs3, ws), {}),
        (ops.f8f8f16_rowwise.default, (xq, wq, xs, ws), {}),
        (ops.f8f8bf16_rowwise_preshuffle.default, (xq, wq, xs, ws, bias, False), {}),
        (ops.f8f8f16_rowwise_preshuffle.default, (xq, wq, xs, ws), {}),
        (ops.f8f8bf16_rowwise_out.default, (xq, wq, xs, ws, out), {}),
        (ops.f8f8bf16_rowwise_batched.default, (x3, w3, xs3, ws3), {}),
        (ops.f8f8bf16_rowwise_grouped.default, ([xq, xq[:3]], [wq, wq], [xs, xs[:3]], [ws, ws]), {}),
        (ops.f8f8bf16_rowwise_grouped_cat.default, ([xq, xq[:3]], [wq, wq], [xs, xs[:3]], [ws, ws]), {}),
        (ops.f8f8bf16_rowwise_grouped_stacked.default, (xq, w3, xs, ws3, ms), {}),
        (ops.f8f8bf16_rowwise_grouped_dynamic.default, (x3, w3, xs3, ws3, ms - 1), {}),
        (ops.f8f8bf16_rowwise_grouped_mm.default, (xq, w3, xs, ws3, offs), {}),
        (ops.f8f8bf16_rowwise_grouped_mm.default, (x3, w3, xs3, ws3), {}),
        (torch.ops.triton.matmul_fp8_row.default, (xq, wq, xs, ws, bias), {}),
        (torch.ops.triton.matmul_fp8_row.default, (xq, wq, xs, ws, bias, torch.float32), {}),
        (torch.ops.triton.matmul_fp8_row.default, (xq, wq, xs, ws, None, torch.float16), {}),
    ]


# torch's SchemaCheckMode cannot compare FP8 inputs ("mul_cpu_reduced_float" is missing for
# Float8_e4m3fn), so the mutation check is done here by hand (as in test/quantize).
NO_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        elif isinstance(a, torch.Tensor):
            yield a


def _bits(t):
    return t.view(torch.uint8) if t.dtype == FP8 else t


def test_opcheck(device):
    for op, args, kwargs in op_cases(device):
        mutates = op is ops.f8f8bf16_rowwise_out.default
        before = [a.clone() for a in _flat(args)]
        torch.library.opcheck(op, args, kwargs, test_utils=NO_SCHEMA)
        after = list(_flat(args))
        unchanged = [torch.equal(_bits(b), _bits(a)) for b, a in zip(before, after)]
        assert all(unchanged[:-1] if mutates else unchanged), op


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(xq, wq, xs, ws, bias, w3, ms):
        y = ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias)
        z = matmul_fp8_row(xq, wq, xs, ws)
        s = ops.f8f8bf16_rowwise_grouped_stacked(xq, w3, xs, ws.repeat(2), ms)
        return y.float() + z.float(), s

    xq, wq = rand_fp8((9, 64), device), rand_fp8((24, 64), device)
    xs, ws = rand_scale(9, device), rand_scale(24, device)
    bias = torch.randn(24, device=device)
    w3 = rand_fp8((2, 24, 64), device)
    ms = torch.tensor([4, 5], device=device)
    eager = f(xq, wq, xs, ws, bias, w3, ms)
    compiled = torch.compile(f, fullgraph=True)(xq, wq, xs, ws, bias, w3, ms)
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape and e.dtype == c.dtype
        assert torch.equal(e, c)


def test_torch_compile_fullgraph_with_output(device):
    # The ops with an optional `output` return it in eager mode; compiled graphs must see only the
    # alias-free internal ops (csrc/common/out_router.h); aliasing is an error (test/conftest.py).
    torch._dynamo.reset()
    x3, w3 = rand_fp8((2, 5, 64), device), rand_fp8((2, 24, 64), device)
    xs3, ws3 = rand_scale(10, device), rand_scale(48, device)
    xq, xs = rand_fp8((9, 64), device), rand_scale(9, device)
    offs = torch.tensor([4, 9], dtype=torch.int32, device=device)

    def f(o1, o2):
        ops.f8f8bf16_rowwise_batched(x3, w3, xs3, ws3, None, True, o1)
        ops.f8f8bf16_rowwise_grouped_mm(xq, w3, xs, ws3, offs, o2)
        return o1.float() * 2, o2 + 1

    outs = [torch.empty(2, 5, 24, dtype=torch.bfloat16, device=device),
            torch.empty(9, 24, dtype=torch.bfloat16, device=device)]
    eager_outs = [torch.empty_like(o) for o in outs]
    eager = f(*eager_outs)
    compiled = torch.compile(f, fullgraph=True)(*outs)
    for e, c in zip(eager, compiled):
        assert torch.equal(e, c)
    for e, c in zip(eager_outs, outs):
        assert torch.equal(e, c)
    # eager returns the very tensor it wrote
    r = ops.f8f8bf16_rowwise_batched(x3, w3, xs3, ws3, output=outs[0])
    assert r.data_ptr() == outs[0].data_ptr() and r.shape == outs[0].shape
