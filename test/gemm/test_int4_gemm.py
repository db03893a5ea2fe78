"""INT4-weight GEMMs (bf16i4bf16_rowwise, _batched, f8i4bf16_rowwise and the
mslk.gemm.triton.int4_gemm wrappers) against a float64 reference of the dequantized weights, on
every device the tests see (the exact CPU reference; the CUDA kernels on Hopper, within a
float32-accumulation tolerance)."""

import pytest
import torch

from mslk.gemm.triton.int4_gemm import matmul_bf16i4_rowwise, matmul_bf16i4_rowwise_batched
from mslk.quantize.shuffle import int4_row_quantize, int4_row_quantize_zp, pack_int4
from test.conftest import requires_cuda

ops = torch.ops.mslk
MS = [1, 2, 7, 16, 64, 1000]
NK = [(136, 128), (264, 256), (136, 1024)]  # N not a multiple of any tile


def weights(N, K, seed, sdtype=torch.bfloat16, zp=True, group=128):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(N, K, generator=g)
    if zp:
        q, s, z = int4_row_quantize_zp(w, group)
    else:
        q, s = int4_row_quantize(w, group)
        z = torch.zeros_like(s)
    return q, pack_int4(q), s.to(sdtype), z.to(sdtype)


def dequant(q, s, z):
    """float32 weights [N, K] as the contract rounds them: fmaf(q, s, z) (exact q * s in float64,
    one rounding of the sum)."""
    gs = q.shape[1] // s.shape[0]
    sk = s.double().t().repeat_interleave(gs, dim=1)
    zk = z.double().t().repeat_interleave(gs, dim=1)
    return (q.double() * sk + zk).float()


def ref(x, q, s, z, x_scale=None):
    acc = (x.double().cpu() @ dequant(q, s, z).double().t()).float()
    if x_scale is not None:
        acc = acc * x_scale.float().cpu().reshape(-1, 1)
    return acc.bfloat16()


def check(out, expect, x, q, s, z, device):
    """Bit-exact on the CPU. On CUDA: the decode path (M <= 16) sums float32 weights in float32
    (error ~1e-6 of sum |x| |w|); the GEMM path (M > 16) rounds each dequantized weight (and a
    scaled FP8 activation) to bf16 for the tensor cores, 2^-9 of each product at most. x: the
    activations with any row scale applied."""
    out = out.cpu()
    if device == "cpu":
        assert torch.equal(out, expect)
        return
    rel = 2e-5 if x.shape[-2] <= 16 else 2.0 ** -8
    mag = x.double().cpu().abs() @ dequant(q, s, z).double().abs().t()
    err = (out.double() - expect.double()).abs()
    # one bf16 ulp (<= 2^-7 |expect|): a float32 sum a hair off the exact one may round to the
    # neighbouring bf16 value
    assert (err <= 2.0 ** -7 * expect.double().abs() + rel * mag.reshape(err.shape) + 1e-30).all()


def rand_x(M, K, seed, device):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).bfloat16().to(device)


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_bf16i4bf16_rowwise(device, M, N, K):
    q, wq, s, z = weights(N, K, N + K)
    x = rand_x(M, K, M, device)
    out = ops.bf16i4bf16_rowwise(x, wq.to(device), s.to(device), z.to(device))
    assert out.shape == (M, N) and out.dtype == torch.bfloat16 and out.device.type == device
    check(out, ref(x, q, s, z), x, q, s, z, device)


@pytest.mark.parametrize("sdtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("zp,group", [(True, 32), (False, 128), (True, 256)])
def test_scale_dtypes_and_groups(device, sdtype, zp, group):
    q, wq, s, z = weights(72, 512, 3, sdtype, zp, group)
    for M in (1, 5, 40):
        x = rand_x(M, 512, M, device)
        out = matmul_bf16i4_rowwise(x, wq.to(device), s.to(device), z.to(device))
        check(out, ref(x, q, s, z), x, q, s, z, device)


@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("M", [1, 7, 64])
def test_batched(device, B, M):
    N, K = 136, 256
    parts = [weights(N, K, 10 + b) for b in range(B)]
    q, wq, s, z = (torch.stack(t) for t in zip(*parts))
    x = torch.stack([rand_x(M, K, 20 + b, device) for b in range(B)])
    out = ops.bf16i4bf16_rowwise_batched(x, wq.to(device), s.to(device), z.to(device))
    assert out.shape == (B, M, N)
    for b in range(B):
        check(out[b], ref(x[b], q[b], s[b], z[b]), x[b], q[b], s[b], z[b], device)
    assert torch.equal(matmul_bf16i4_rowwise_batched(x, wq.to(device), s.to(device), z.to(device)), out)


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_f8i4bf16_rowwise(device, M, N, K):
    q, wq, s, z = weights(N, K, 7 * N + K)
    g = torch.Generator().manual_seed(M + 1)
    xq = (torch.randn(M, K, generator=g) * 4).to(torch.float8_e4m3fn)
    x_scale = torch.rand(M, generator=g) + 0.5
    out = ops.f8i4bf16_rowwise(xq.to(device), wq.to(device), x_scale.to(device), s.to(device), z.to(device))
    assert out.shape == (M, N) and out.dtype == torch.bfloat16
    check(out, ref(xq.float(), q, s, z, x_scale), xq.float() * x_scale[:, None], q, s, z, device)


def test_strided_operands(device):
    q, wq, s, z = weights(80, 256, 5)
    big = rand_x(12, 384, 6, device)
    x = big[:5, 64:320]  # row stride 384
    wq_big = torch.cat([wq, wq], dim=1).to(device)[:, :128]  # W row stride 256 bytes
    out = ops.bf16i4bf16_rowwise(x, wq_big, s.to(device), z.to(device))
    check(out, ref(x, q, s, z), x, q, s, z, device)
    for M in (5, 40):  # a base that is not 16-byte aligned: copied on CUDA (decode and GEMM paths)
        x2 = rand_x(M, 260, 7, device)[:, 2:258]
        out = ops.bf16i4bf16_rowwise(x2, wq_big, s.to(device), z.to(device))
        check(out, ref(x2, q, s, z), x2, q, s, z, device)


def test_extremes(device):
    # every weight at -8 or 7 with a large scale and zero: the largest products of a group
    N, K = 16, 256
    q = torch.where(torch.arange(N * K).reshape(N, K) % 3 == 0, -8, 7).to(torch.int8)
    s = torch.full((K // 128, N), 3.0, dtype=torch.bfloat16)
    z = torch.full((K // 128, N), -1.5, dtype=torch.bfloat16)
    x = torch.full((2, K), 2.0, dtype=torch.bfloat16, device=device)
    out = ops.bf16i4bf16_rowwise(x, pack_int4(q).to(device), s.to(device), z.to(device))
    check(out, ref(x, q, s, z), x, q, s, z, device)


def test_empty(device):
    _, wq, s, z = weights(8, 128, 1)
    out = ops.bf16i4bf16_rowwise(rand_x(0, 128, 1, device), wq.to(device), s.to(device), z.to(device))
    assert out.shape == (0, 8)
    e = torch.ones(1, 8, dtype=torch.bfloat16, device=device)
    out = ops.bf16i4bf16_rowwise(rand_x(3, 0, 1, device), torch.empty(8, 0, dtype=torch.int8, device=device), e, e)
    assert out.shape == (3, 8) and not out.any()


def _bad(d):
    _, wq, s, z = weights(8, 256, 2)
    x, wq, s, z = rand_x(4, 256, 3, d), wq.to(d), s.to(d), z.to(d)
    return [
        ((x.float(), wq, s, z), TypeError, "'X'"),
        ((x, wq.to(torch.uint8), s, z), TypeError, "'W'"),
        ((x, wq, s.half(), z), TypeError, "'w_scale_group'"),
        ((x, wq, s, z.float()), TypeError, "'w_zero_group'"),
        ((x[None], wq, s, z), ValueError, "'X'"),
        ((x, wq[:, :64], s, z), ValueError, "'W'"),
        ((x, wq, s[:, :4], z), ValueError, "'w_scale_group'"),
        ((x, wq, s, z[:1]), ValueError, "'w_zero_group'"),
        ((x, wq, s.repeat(3, 1), z.repeat(3, 1)), ValueError, "'w_scale_group'"),  # 6 groups do not divide 256
        ((x, wq, s.repeat(4, 1), z.repeat(4, 1)), ValueError, "multiple of 32"),  # group 32 ok, 8 groups
        ((x[:, ::2], wq, s, z), ValueError, "'X'"),
        ((x, wq[:, ::2], s, z), ValueError, "'W'"),
    ]


@pytest.mark.parametrize("i", range(12))
def test_errors(device, i):
    args, exc, match = _bad(device)[i]
    if i == 9:  # group 256 / 8 = 32 is allowed; 16 groups (16 per group) is not
        ops.bf16i4bf16_rowwise(*args)
        s, z = args[2], args[3]
        args = (args[0], args[1], s.repeat(2, 1), z.repeat(2, 1))
    with pytest.raises(exc, match=match):
        ops.bf16i4bf16_rowwise(*args)


def test_batched_and_f8_errors(device):
    _, wq, s, z = weights(8, 256, 4)
    x, wq, s, z = rand_x(4, 256, 3, device), wq.to(device), s.to(device), z.to(device)
    with pytest.raises(ValueError, match="'X'"):
        ops.bf16i4bf16_rowwise_batched(x, wq[None], s[None], z[None])
    with pytest.raises(ValueError, match="batch size"):
        ops.bf16i4bf16_rowwise_batched(x[None].repeat(2, 1, 1), wq[None], s[None], z[None])
    xq = x.to(torch.float8_e4m3fn)
    xs = torch.ones(4, device=device)
    with pytest.raises(TypeError, match="'XQ'"):
        ops.f8i4bf16_rowwise(x, wq, xs, s, z)
    with pytest.raises(TypeError, match="'x_scale'"):
        ops.f8i4bf16_rowwise(xq, wq, xs.double(), s, z)
    with pytest.raises(ValueError, match="'x_scale'"):
        ops.f8i4bf16_rowwise(xq, wq, xs[:3], s, z)
    with pytest.raises(ValueError, match="'WQ'"):
        ops.f8i4bf16_rowwise(xq, wq[:, :64], xs, s, z)


def test_opcheck(device):
    _, wq, s, z = weights(24, 128, 8)
    x, wq, s, z = rand_x(5, 128, 9, device), wq.to(device), s.to(device), z.to(device)
    torch.library.opcheck(ops.bf16i4bf16_rowwise.default, (x, wq, s, z))
    torch.library.opcheck(ops.bf16i4bf16_rowwise_batched.default, (x[None], wq[None], s[None], z[None]))
    # test_schema compares FP8 tensors with a multiply FP8 has no kernel for: every other check runs
    xq = x.to(torch.float8_e4m3fn)
    no_schema = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(ops.f8i4bf16_rowwise.default, (xq, wq, torch.ones(5, device=device), s, z),
                          test_utils=no_schema)


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    _, wq, s, z = weights(24, 128, 10)
    x, wq, s, z = rand_x(5, 128, 11, device), wq.to(device), s.to(device), z.to(device)
    xs = torch.ones(5, device=device)

    def f(x, wq, s, z, xs):
        a = ops.bf16i4bf16_rowwise(x, wq, s, z).float()
        b = ops.bf16i4bf16_rowwise_batched(x[None], wq[None], s[None], z[None])[0].float()
        c = ops.f8i4bf16_rowwise(x.to(torch.float8_e4m3fn), wq, xs, s, z).float()
        return a + b + c

    assert torch.equal(f(x, wq, s, z, xs), torch.compile(f, fullgraph=True)(x, wq, s, z, xs))


@requires_cuda
@pytest.mark.parametrize("M", [1, 3, 8, 9, 16, 17, 32, 33, 64, 65, 128])
@pytest.mark.parametrize("group", [128, 64])  # 128: the tensor-core decode kernel; 64: the FP32 one
def test_cuda_large(M, group):
    # decode-sized and GEMM-sized M over a weight large enough for every split / tile path
    N, K = 1000, 4096
    q, wq, s, z = weights(N, K, 30, group=group)
    x = rand_x(M, K, 31, "cuda")
    out = ops.bf16i4bf16_rowwise(x, wq.cuda(), s.cuda(), z.cuda())
    check(out, ref(x, q, s, z), x, q, s, z, "cuda")
    g = torch.Generator().manual_seed(M)
    xq, xs = (torch.randn(M, K, generator=g) * 4).to(torch.float8_e4m3fn), torch.rand(M, generator=g) + 0.5
    out = ops.f8i4bf16_rowwise(xq.cuda(), wq.cuda(), xs.cuda(), s.cuda(), z.cuda())
    check(out, ref(xq.float(), q, s, z, xs), xq.float() * xs[:, None], q, s, z, "cuda")


@requires_cuda
def test_cuda_no_host_sync():
    q, wq, s, z = weights(256, 1024, 34)
    wq, s, z = wq.cuda(), s.cuda(), z.cuda()
    # inputs made first: the host-to-device copies are syncs of their own
    xs = {M: rand_x(M, 1024, M, "cuda") for M in (1, 16, 40)}
    inputs = {M: (x, x.to(torch.float8_e4m3fn), torch.ones(M, device="cuda")) for M, x in xs.items()}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for x, xq, xs_ in inputs.values():
            ops.bf16i4bf16_rowwise(x, wq, s, z)
            ops.f8i4bf16_rowwise(xq, wq, xs_, s, z)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@requires_cuda
def test_cuda_deterministic():
    q, wq, s, z = weights(512, 8192, 32)
    x = rand_x(3, 8192, 33, "cuda")
    a = ops.bf16i4bf16_rowwise(x, wq.cuda(), s.cuda(), z.cuda())
    for _ in range(3):
        assert torch.equal(ops.bf16i4bf16_rowwise(x, wq.cuda(), s.cuda(), z.cuda()), a)
