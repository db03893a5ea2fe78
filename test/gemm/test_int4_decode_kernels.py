"""The INT4 decode kernels (M <= 16 on CUDA) forced one by one through MSLK_INT4_DECODE: the
TMA-streaming one (the default where its alignment rules hold), the cp.async tensor-core one and
the FP32 one, over scale types, zero points, groups, K not a multiple of its 256-k stage, FP8
activations and FP8 group scales; forced K splits; and the refusal of a forced kernel that
cannot take the call."""

import pytest
import torch

from test.conftest import requires_cuda
from test.gemm.test_int4_gemm import check, rand_x, ref, weights
from test.gemm.test_int4_gemm_shuffled import fp8_ref_scales, fp8_weights, rand_xq

ops = torch.ops.mslk
pytestmark = requires_cuda
KERNELS = ["tma", "mma", "fp32"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("M", [1, 5, 8, 9, 16])
@pytest.mark.parametrize("N,K,group,sdtype,zp", [
    (1000, 4096, 128, torch.bfloat16, True),
    (272, 640, 128, torch.float32, True),  # K % 256 == 128: the last stage half past K
    (512, 2048, 256, torch.bfloat16, False),
    (128, 1024, 512, torch.float32, False),
])
def test_bf16_and_fp8_activations(monkeypatch, kernel, M, N, K, group, sdtype, zp):
    monkeypatch.setenv("MSLK_INT4_DECODE", kernel)
    q, wq, s, z = weights(N, K, N + K + M, sdtype=sdtype, zp=zp, group=group)
    wq, sc, zc = wq.cuda(), s.cuda(), z.cuda()
    x = rand_x(M, K, M, "cuda")
    check(ops.bf16i4bf16_rowwise(x, wq, sc, zc), ref(x, q, s, z), x, q, s, z, "cuda")
    xq, xs = rand_xq(M, K, M + 1)
    out = ops.f8i4bf16_rowwise(xq.cuda(), wq, xs.cuda(), sc, zc)
    check(out, ref(xq.float(), q, s, z, xs), xq.float() * xs[:, None], q, s, z, "cuda")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("M", [1, 16])
def test_fp8_group_scales(monkeypatch, kernel, M):
    monkeypatch.setenv("MSLK_INT4_DECODE", kernel)
    N, K = 400, 1280  # N % 16 == 0: the TMA kernel takes the [G, 8, N] E4M3 scales
    q, wq, gs8, rs, gs = fp8_weights(N, K, 7)
    xq, xs = rand_xq(M, K, 8)
    out = ops.f8i4bf16_shuffled(xq.cuda(), wq.cuda(), xs.cuda(), rs.cuda(), gs8.cuda())
    s, z = fp8_ref_scales(gs, rs)
    check(out, ref(xq.float(), q, s, z, xs), xq.float() * xs[:, None], q, s, z, "cuda")


@pytest.mark.parametrize("splits", ["1", "3", "7", "4096"])
def test_forced_splits_deterministic(monkeypatch, splits):
    monkeypatch.setenv("MSLK_INT4_DECODE", "tma")
    monkeypatch.setenv("MSLK_INT4_DECODE_SPLITS", splits)
    q, wq, s, z = weights(640, 5888, 3)  # 23 stages: uneven splits
    x = rand_x(16, 5888, 4, "cuda")
    out = ops.bf16i4bf16_rowwise(x, wq.cuda(), s.cuda(), z.cuda())
    check(out, ref(x, q, s, z), x, q, s, z, "cuda")
    assert torch.equal(out, ops.bf16i4bf16_rowwise(x, wq.cuda(), s.cuda(), z.cuda()))


def test_forced_tma_refuses_unaligned_scales(monkeypatch):
    q, wq, s, z = weights(100, 512, 5)  # bf16 scale rows of 200 bytes: not 16-byte aligned
    x = rand_x(4, 512, 6, "cuda")
    args = (x, wq.cuda(), s.cuda(), z.cuda())
    check(ops.bf16i4bf16_rowwise(*args), ref(x, q, s, z), x, q, s, z, "cuda")  # auto: another kernel
    monkeypatch.setenv("MSLK_INT4_DECODE", "tma")
    with pytest.raises(RuntimeError, match=r"MSLK_INT4_DECODE=tma needs .*16-byte aligned rows"):
        ops.bf16i4bf16_rowwise(*args)


def test_forced_tma_refuses_odd_group_multiples(monkeypatch):
    q, wq, s, z = weights(256, 768, 9, group=384)  # 3 tiles a group: a stage's tiles may straddle two
    x = rand_x(2, 768, 10, "cuda")
    args = (x, wq.cuda(), s.cuda(), z.cuda())
    check(ops.bf16i4bf16_rowwise(*args), ref(x, q, s, z), x, q, s, z, "cuda")  # auto: another kernel
    monkeypatch.setenv("MSLK_INT4_DECODE", "tma")
    with pytest.raises(RuntimeError, match=r"MSLK_INT4_DECODE=tma needs a group of 128 or a multiple of 256"):
        ops.bf16i4bf16_rowwise(*args)
