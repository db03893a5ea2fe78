"""BF16 grouped ops pass torch.library.opcheck and run under torch.compile(fullgraph=True);
the mslk.gemm.triton.grouped_gemm wrappers match the ops and float64 math."""

import torch

from mslk.gemm.triton.grouped_gemm import grouped_gemm, grouped_gemm_dgrad, grouped_gemm_fp8_rowwise, grouped_gemm_wgrad
from test.gemm.bf16_grouped_reference import BF16, assert_close, rand_bf16, ref_grad, ref_stacked, ref_wgrad

ops = torch.ops.mslk


def op_cases(device):
    x, w, dy = rand_bf16((9, 16), device), rand_bf16((3, 8, 16), device), rand_bf16((9, 8), device)
    ms = torch.tensor([4, 0, 3], dtype=torch.int64, device=device)
    ms32 = ms.int()
    return [
        (ops.bf16bf16bf16_grouped.default, ([x, x[:2]], [w[0], w[1]]), {}),
        (ops.bf16bf16bf16_grouped_cat.default, ([x, x[:2]], [w[0], w[1]]), {}),
        (ops.bf16bf16bf16_grouped_dynamic.default, (rand_bf16((3, 5, 16), device), w, ms32), {}),
        (ops.bf16bf16bf16_grouped_stacked.default, (x, w, ms), {}),
        (ops.bf16bf16bf16_grouped_stacked.default, (x, w, ms32), {"num_sms": 8}),
        (ops.bf16bf16bf16_grouped_grad.default, (dy, w, ms), {}),
        (ops.bf16bf16bf16_grouped_wgrad.default, (dy, x, ms), {}),
    ]


def test_opcheck(device):
    for op, args, kwargs in op_cases(device):
        torch.library.opcheck(op, args, kwargs)


def test_opcheck_with_output(device):
    # With `out` / `output` given, the op writes it and returns it (as the reference does): the
    # schema (spec'd as `-> Tensor`) cannot declare that alias, so test_schema is left out here.
    x, w, dy = rand_bf16((9, 16), device), rand_bf16((3, 8, 16), device), rand_bf16((9, 8), device)
    ms = torch.tensor([4, 0, 3], device=device)
    utils = ("test_autograd_registration", "test_faketensor")
    cases = [
        (ops.bf16bf16bf16_grouped_stacked.default, (x, w, ms, torch.empty(9, 8, dtype=BF16, device=device))),
        (ops.bf16bf16bf16_grouped_grad.default, (dy, w, ms, torch.empty(9, 16, dtype=BF16, device=device))),
        (ops.bf16bf16bf16_grouped_wgrad.default, (dy, x, ms, torch.zeros(3, 8, 16, device=device), True)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=utils)
    # the internal ops the public ones route to declare their mutation: full opcheck there
    internal = [
        (ops._bf16bf16bf16_grouped_stacked_into.default, (x, w, ms, torch.empty(9, 8, dtype=BF16, device=device))),
        (ops._bf16bf16bf16_grouped_grad_into.default, (dy, w, ms, torch.empty(9, 16, dtype=BF16, device=device))),
        (ops._bf16bf16bf16_grouped_wgrad_into.default, (dy, x, ms, torch.zeros(3, 8, 16, device=device), True)),
        (ops._bf16bf16bf16_grouped_stacked_new.default, (x, w, ms)),
        (ops._bf16bf16bf16_grouped_wgrad_new.default, (dy, x, ms)),
    ]
    for op, args in internal:
        torch.library.opcheck(op, args)


# The ops with an optional `out` are routers over alias-free internal ops (csrc/common/out_router.h):
# compiled graphs never see a custom op return an alias of its input (an error in the tests:
# test/conftest.py).
def test_torch_compile_fullgraph(device):
    _compile_and_compare(device)


@torch._inductor.config.patch(enable_auto_functionalized_v2=False)
def test_torch_compile_fullgraph_v1_functionalization(device):
    _compile_and_compare(device)


def test_torch_compile_fullgraph_with_out(device):
    torch._dynamo.reset()

    def f(x, w, dy, ms, out, dx, acc):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms, out)
        ops.bf16bf16bf16_grouped_grad(dy, w, ms, dx)
        ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, acc, True)
        return out * 2, dx + 1, acc * 3

    x, w, dy = rand_bf16((13, 16), device), rand_bf16((3, 8, 16), device), rand_bf16((13, 8), device)
    ms = torch.tensor([5, 0, 6], device=device)

    def bufs():
        return (torch.empty(13, 8, dtype=BF16, device=device), torch.empty(13, 16, dtype=BF16, device=device),
                torch.ones(3, 8, 16, device=device))

    b1, b2 = bufs(), bufs()
    eager = f(x, w, dy, ms, *b1)
    compiled = torch.compile(f, fullgraph=True)(x, w, dy, ms, *b2)
    for e, c in zip(eager + b1, compiled + b2):
        assert torch.equal(e, c)
    # eager returns the very tensor it wrote
    out = torch.empty(13, 8, dtype=BF16, device=device)
    assert ops.bf16bf16bf16_grouped_stacked(x, w, ms, out).data_ptr() == out.data_ptr()


def _compile_and_compare(device):
    torch._dynamo.reset()

    def f(x, w, dy, ms):
        y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
        dx = ops.bf16bf16bf16_grouped_grad(dy, w, ms)
        dw = ops.bf16bf16bf16_grouped_wgrad(dy, x, ms)
        return y.float() * 2, dx, dw + 1

    x, w, dy = rand_bf16((13, 16), device), rand_bf16((3, 8, 16), device), rand_bf16((13, 8), device)
    ms = torch.tensor([5, 0, 6], device=device)
    eager = f(x, w, dy, ms)
    compiled = torch.compile(f, fullgraph=True)(x, w, dy, ms)
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape and e.dtype == c.dtype
        assert torch.equal(e, c)


def test_triton_wrappers(device):
    sizes, N, K = [5, 0, 7], 8, 16
    T = sum(sizes) + 1
    x, w, dy = rand_bf16((T, K), device), rand_bf16((3, N, K), device), rand_bf16((T, N), device)
    ms = torch.tensor(sizes, dtype=torch.int32, device=device)
    y = grouped_gemm(x, w.reshape(3 * N, K), ms)  # the reference's flattened [G * N, K]
    assert torch.equal(y, ops.bf16bf16bf16_grouped_stacked(x, w, ms))
    assert_close(y, ref_stacked(x, w, sizes), K)
    assert_close(grouped_gemm_dgrad(dy, w, ms), ref_grad(dy, w, sizes), N)
    assert_close(grouped_gemm_wgrad(dy, x, ms), ref_wgrad(dy, x, sizes), max(sizes))
    acc = torch.ones(3, N, K, device=device)
    grouped_gemm_wgrad(dy, x, ms, acc, True)
    assert torch.allclose(acc.cpu().double(), 1 + ref_wgrad(dy, x, sizes), rtol=1e-5, atol=1e-4)

    # bias [G, N] per expert, token_weights per row; rows past the groups stay zero
    bias = rand_bf16((3, N), device)
    tw = torch.rand(T, device=device)
    yb = grouped_gemm(x, w, ms, bias=bias, token_weights=tw)
    # the bias and router weight apply to the float32 sums, then one rounding (module docstring)
    want = ref_stacked(x, w, sizes)
    want[:sum(sizes)] += torch.repeat_interleave(bias.cpu().double(), torch.tensor(sizes), dim=0)
    want *= tw.cpu().double()[:, None]
    assert_close(yb, want, K)
    assert torch.count_nonzero(yb[sum(sizes):]) == 0

    # scatter-add into a preallocated output
    idx = torch.randperm(T, device=device)
    base = rand_bf16((T, N), device)
    out = base.clone()
    r = grouped_gemm(x, w, ms, _output_tensor=out, _scatter_add_indices=idx)
    assert r is out
    exp = base.clone().index_add_(0, idx, y)
    assert torch.equal(out, exp)


def test_triton_fp8_rowwise(device):
    from test.gemm.fp8_gemm_reference import rand_fp8, rand_scale
    sizes, N, K = [3, 4], 16, 32
    xq, wq = rand_fp8((7, K), device), rand_fp8((2 * N, K), device)
    xs, ws = rand_scale(7, device), rand_scale(2 * N, device)
    ms = torch.tensor(sizes, device=device)
    y = grouped_gemm_fp8_rowwise(xq, wq, ms, xs, ws)
    assert y.shape == (7, N) and y.dtype == BF16
    assert torch.equal(y, ops.f8f8bf16_rowwise_grouped_stacked(xq, wq.view(2, N, K), xs, ws, ms))
