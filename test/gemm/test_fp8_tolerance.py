"""The rowwise FP8 GEMM bound of fp8_gemm_reference.check on the CPU: it accepts models of the
Hopper accumulator (13 fraction bits, truncated at each k32 step; with and without float32
promotion every 128 of K) and rejects a result 5% off at K = 4096, or one missing a k32 block."""

import pytest
import torch

from test.gemm.fp8_gemm_reference import check, rand_fp8, rand_scale

M, N, K = 64, 96, 4096


def trunc(x, ulp):
    return torch.sign(x) * torch.floor(x.abs() / ulp) * ulp


def ulp13(x):
    """The unit of the 13th fraction bit of |x| (1 where x is 0)."""
    a = x.abs()
    return torch.exp2(torch.floor(torch.log2(torch.where(a > 0, a, torch.ones_like(a)))) - 13)


def tensor_core_sum(x, w, k0, k1, acc, aligned):
    """acc plus x[:, k0:k1] @ w[:, k0:k1].T in k32 steps, each truncated to 13 fraction bits;
    aligned: also each product and acc truncated at the step's largest exponent before the add."""
    for j in range(k0, k1, 32):
        if aligned:
            prods = x[:, None, j:j + 32] * w[None, :, j:j + 32]
            unit = ulp13(torch.maximum(prods.abs().amax(-1), acc.abs()))
            acc = trunc(acc, unit) + trunc(prods, unit[..., None]).sum(-1)
        else:
            acc = acc + x[:, j:j + 32] @ w[:, j:j + 32].T
        acc = trunc(acc, ulp13(acc))
    return acc


def gpu_model(xq, wq, xs, ws, fast, aligned=False):
    """The kernel's result under the accumulator model: fast keeps K in the tensor core, slow adds
    each 128-long block's tensor-core sum into float32; then the float32 epilogue, one bf16 rounding."""
    x, w = xq.double(), wq.double()
    zero = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float64)
    if fast:
        acc = tensor_core_sum(x, w, 0, x.shape[1], zero, aligned).float()
    else:
        acc = torch.zeros_like(zero, dtype=torch.float32)
        for b in range(0, x.shape[1], 128):
            acc = acc + tensor_core_sum(x, w, b, min(b + 128, x.shape[1]), zero, aligned).float()
    return (xs[:, None] * (ws[None, :] * acc)).to(torch.bfloat16)


@pytest.fixture(scope="module")
def operands():
    torch.manual_seed(0)  # rand_fp8 / rand_scale draw from the global generator
    xq, wq = rand_fp8((M, K), "cpu"), rand_fp8((N, K), "cpu")
    xs, ws = rand_scale(M, "cpu"), rand_scale(N, "cpu")
    exact = (xs.double()[:, None] * ws.double()[None, :]) * (xq.double() @ wq.double().T)
    return xq, wq, xs, ws, exact


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_accepts_the_accumulator_model(operands, fast, aligned):
    xq, wq, xs, ws, _ = operands
    check(gpu_model(xq, wq, xs, ws, fast, aligned), xq, wq, xs, ws, fast=fast)


@pytest.mark.parametrize("fast", [True, False])
def test_rejects_a_uniform_5_percent_error(operands, fast):
    xq, wq, xs, ws, exact = operands
    with pytest.raises(AssertionError, match="max err"):
        check((exact * 1.05).to(torch.bfloat16), xq, wq, xs, ws, fast=fast)


def test_rejects_a_missing_k32_block(operands):
    xq, wq, xs, ws, exact = operands
    part = exact - (xs.double()[:, None] * ws.double()[None, :]) * (xq[:, -32:].double() @ wq[:, -32:].double().T)
    with pytest.raises(AssertionError, match="max err"):
        check(part.to(torch.bfloat16), xq, wq, xs, ws, fast=True)
