"""The block/group-scaled FP8 GEMM ops pass torch.library.opcheck and run under
torch.compile(fullgraph=True)."""

import torch

from mslk.gemm.triton.fp8_gemm import matmul_fp8_block
from test.gemm.fp8_blockwise_reference import FP8, rand_fp8, rand_grid

ops = torch.ops.mslk
# torch's SchemaCheckMode cannot compare FP8 inputs (see test_fp8_rowwise_compile.py).
NO_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def cases(device):
    M, N, K = 9, 256, 256
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    w3 = rand_fp8((2, N, K), device)
    ms = torch.tensor([4, 3], device=device)
    return [
        (ops.f8f8bf16_groupwise.default, (xq, wq, rand_grid(2, M, device), rand_grid(2, 2, device))),
        (ops.f8f8bf16_blockwise.default, (xq, wq, rand_grid(1, 2, device), rand_grid(2, 2, device))),
        (ops.f8f8bf16_groupwise_grouped.default, (xq, w3, rand_grid(M, 2, device),
                                                  rand_grid(4, 2, device).view(2, 2, 2), ms)),
        (torch.ops.triton.matmul_fp8_block.default, (xq, wq, rand_grid(1, 1, device), rand_grid(1, 1, device))),
        (torch.ops.triton.matmul_fp8_block.default,
         (xq, wq, rand_grid(1, 2, device), rand_grid(2, 2, device), 128, 128, 128, torch.float32)),
    ]


def _bits(t):
    return t.view(torch.uint8) if t.dtype == FP8 else t


def test_opcheck(device):
    for op, args in cases(device):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        before = [a.clone() for a in tensors]
        torch.library.opcheck(op, args, {}, test_utils=NO_SCHEMA)
        assert all(torch.equal(_bits(b), _bits(a)) for b, a in zip(before, tensors)), op


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    (_, gw), (_, bw), (_, gg), (_, tb), (_, t32) = cases(device)

    def f(gw, bw, gg, tb, t32):
        return (ops.f8f8bf16_groupwise(*gw), ops.f8f8bf16_blockwise(*bw), ops.f8f8bf16_groupwise_grouped(*gg),
                matmul_fp8_block(*tb).float() * 2, matmul_fp8_block(*t32) + 1)

    eager = f(gw, bw, gg, tb, t32)
    compiled = torch.compile(f, fullgraph=True)(gw, bw, gg, tb, t32)
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape and e.dtype == c.dtype
        assert torch.equal(e, c)
