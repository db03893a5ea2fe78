"""Preshuffled INT4-weight GEMMs (preshuffle_i4, bf16i4bf16_shuffled / _batched / _grouped,
f8i4bf16_shuffled / _grouped) and quantize_int4_preshuffle, against a float64 reference of the
dequantized weights, on every device the tests see."""

import pytest
import torch

from mslk.quantize.shuffle import pack_int4, quantize_int4_preshuffle
from test.conftest import requires_cuda
from test.gemm.test_int4_gemm import check, rand_x, ref, weights

ops = torch.ops.mslk


def unpack(wq):
    """[N, K/2] int8 -> [N, K] int8 in -8..7 (the shuffled layout is the packed one)."""
    b = wq.view(torch.uint8).cpu().to(torch.int16)
    lo, hi = b & 0xF, b >> 4
    q = torch.stack([lo, hi], dim=-1).reshape(wq.shape[0], -1)
    return torch.where(q >= 8, q - 16, q).to(torch.int8)


def fp8_weights(N, K, seed, group=128):
    """Symmetric INT4 groups with FP8 group scales and float32 row scales, preshuffled."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-8, 8, (N, K), generator=g, dtype=torch.int8)
    gs = (torch.rand(K // group, N, generator=g) * 2 + 0.1).to(torch.float8_e4m3fn)
    rs = torch.rand(N, generator=g) + 0.5
    wq, gs8 = ops.preshuffle_i4(pack_int4(q), gs)
    return q, wq, gs8, rs, gs


def fp8_ref_scales(gs, rs):
    """The float32 group scales the contract multiplies: float(group scale) * row scale."""
    s = gs.float() * rs.reshape(1, -1)
    return s, torch.zeros_like(s)


def rand_xq(M, K, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(M, K, generator=g) * 4).to(torch.float8_e4m3fn), torch.rand(M, generator=g) + 0.5


@pytest.mark.parametrize("M", [1, 2, 7, 16, 64, 1000])
@pytest.mark.parametrize("N,K", [(136, 128), (264, 1024)])
def test_f8i4bf16_shuffled(device, M, N, K):
    q, wq, gs8, rs, gs = fp8_weights(N, K, N + K)
    assert gs8.shape == (K // 128, 8, N) and gs8.dtype == torch.float8_e4m3fn
    xq, xs = rand_xq(M, K, M)
    out = ops.f8i4bf16_shuffled(xq.to(device), wq.to(device), xs.to(device), rs.to(device), gs8.to(device))
    assert out.shape == (M, N) and out.dtype == torch.bfloat16
    s, z = fp8_ref_scales(gs, rs)
    check(out, ref(xq.float(), q, s, z, xs), xq.float() * xs[:, None], q, s, z, device)


@pytest.mark.parametrize("M", [1, 7, 64])
def test_bf16i4bf16_shuffled(device, M):
    q, wq, s, z = weights(264, 256, 40)
    wqs, s2 = ops.preshuffle_i4(wq, s)
    assert torch.equal(s2, s) and torch.equal(unpack(wqs), q)
    x = rand_x(M, 256, M, device)
    out = ops.bf16i4bf16_shuffled(x, wqs.to(device), s.to(device), z.to(device))
    check(out, ref(x, q, s, z), x, q, s, z, device)
    outb = ops.bf16i4bf16_shuffled_batched(x[None], wqs[None].to(device), s[None].to(device), z[None].to(device))
    assert torch.equal(outb[0], out)


@pytest.mark.parametrize("sizes", [[3, 0, 5], [1, 1, 1], [0, 0, 0], [16, 20, 2]])
def test_grouped(device, sizes):
    E, N, K = len(sizes), 136, 256
    parts = [weights(N, K, 50 + e) for e in range(E)]
    q, wq, s, z = (torch.stack(t) for t in zip(*parts))
    T = sum(sizes) + 2  # two rows past the groups: zero
    x = rand_x(T, K, 7, device)
    ms = torch.tensor(sizes, dtype=torch.int64, device=device)
    out = ops.bf16i4bf16_shuffled_grouped(x, wq.to(device), s.to(device), z.to(device), ms)
    assert out.shape == (T, N)
    f8 = [fp8_weights(N, K, 60 + e) for e in range(E)]
    fq, fwq, fgs8, frs, fgs = (torch.stack(t) for t in zip(*f8))
    xq, xs = rand_xq(T, K, 8)
    out8 = ops.f8i4bf16_shuffled_grouped(xq.to(device), fwq.to(device), xs.to(device), frs.to(device),
                                         fgs8.to(device), ms.int())
    off = 0
    for e, m in enumerate(sizes):
        rows = slice(off, off + m)
        check(out[rows], ref(x[rows], q[e], s[e], z[e]), x[rows], q[e], s[e], z[e], device)
        fs, fz = fp8_ref_scales(fgs[e], frs[e])
        check(out8[rows], ref(xq[rows].float(), fq[e], fs, fz, xs[rows]), xq[rows].float() * xs[rows, None], fq[e],
              fs, fz, device)
        off += m
    assert not out[off:].any() and not out8[off:].any()


@pytest.mark.parametrize("dtype,use_zp", [("fp8", True), ("bf16", True), ("bf16", False)])
def test_quantize_int4_preshuffle(device, dtype, use_zp):
    g = torch.Generator().manual_seed(3)
    w = torch.randn(72, 512, generator=g).to(device)
    wq, (a, b) = quantize_int4_preshuffle(w, 128, dtype, use_zp)
    assert wq.shape == (72, 256) and wq.dtype == torch.int8 and wq.device.type == device
    x = rand_x(5, 512, 4, device)
    exact = x.double().cpu() @ w.double().cpu().t()
    if dtype == "fp8":
        assert a.shape == (4, 8, 72) and a.dtype == torch.float8_e4m3fn and b.shape == (72,)
        xq, xs = x.float().to(torch.float8_e4m3fn), torch.ones(5, device=device)
        out = ops.f8i4bf16_shuffled(xq, wq, xs, b, a)
        exact = xq.double().cpu() @ w.double().cpu().t()
    else:
        assert a.shape == b.shape == (4, 72) and a.dtype == b.dtype == torch.bfloat16
        if not use_zp:
            assert not b.any()
        out = ops.bf16i4bf16_shuffled(x, wq, a, b)
    # INT4 quantization error: about scale / 4 a weight, scale ~ range / 15
    err = (out.double().cpu() - exact).abs().max() / exact.abs().max()
    assert err < 0.15, err


def test_preshuffle_layout(device):
    q, wq, s, z = weights(16, 128, 9)
    w2, s2 = ops.preshuffle_i4(wq.to(device), s.to(device))
    assert torch.equal(unpack(w2), q) and torch.equal(s2.cpu(), s)
    gs = s.float().to(torch.float8_e4m3fn)
    _, g8 = ops.preshuffle_i4(wq.to(device), gs.to(device))
    assert g8.shape == (1, 8, 16) and all(torch.equal(g8[:, i].cpu().view(torch.uint8), gs.view(torch.uint8))
                                          for i in range(8))
    # stacked: [E, N, K/2] with [E, K/group, N]
    _, g83 = ops.preshuffle_i4(wq[None].repeat(2, 1, 1).to(device), gs[None].repeat(2, 1, 1).to(device))
    assert g83.shape == (2, 1, 8, 16)


def test_errors(device):
    q, wq, gs8, rs, gs = fp8_weights(16, 256, 11)
    xq, xs = rand_xq(4, 256, 12)
    xq, xs, wq, gs8, rs = (t.to(device) for t in (xq, xs, wq, gs8, rs))
    with pytest.raises(TypeError, match="'w_scale_group'"):
        ops.f8i4bf16_shuffled(xq, wq, xs, rs, gs8.float())
    with pytest.raises(ValueError, match="'w_scale_group'"):
        ops.f8i4bf16_shuffled(xq, wq, xs, rs, gs8[:, :4])
    with pytest.raises(ValueError, match="'w_scale'"):
        ops.f8i4bf16_shuffled(xq, wq, xs, rs[:8], gs8)
    with pytest.raises(TypeError, match="'w_scale'"):
        ops.f8i4bf16_shuffled(xq, wq, xs, rs.double(), gs8)
    with pytest.raises(ValueError, match="'x_scale'"):
        ops.f8i4bf16_shuffled(xq, wq, xs[:2], rs, gs8)
    with pytest.raises(ValueError, match="'WQ'"):
        ops.f8i4bf16_shuffled(xq, wq[:, :64], xs, rs, gs8)
    _, bwq, s, z = weights(16, 256, 13)
    x, bwq, s, z = rand_x(6, 256, 14, device), bwq.to(device), s.to(device), z.to(device)
    ms = torch.tensor([2, 2], device=device)
    W, S, Z = bwq[None].repeat(2, 1, 1), s[None].repeat(2, 1, 1), z[None].repeat(2, 1, 1)
    with pytest.raises(ValueError, match="'M_sizes'"):
        ops.bf16i4bf16_shuffled_grouped(x, W, S, Z, torch.tensor([4, 4], device=device))
    with pytest.raises(ValueError, match="'M_sizes'"):
        ops.bf16i4bf16_shuffled_grouped(x, W, S, Z, ms[:1])
    with pytest.raises(TypeError, match="'M_sizes'"):
        ops.bf16i4bf16_shuffled_grouped(x, W, S, Z, ms.float())
    with pytest.raises(ValueError, match="'WQ'"):
        ops.bf16i4bf16_shuffled_grouped(x, bwq, S, Z, ms)
    with pytest.raises(ValueError, match="'w_scale_group'"):
        ops.bf16i4bf16_shuffled_grouped(x, W, S[:1], Z, ms)
    with pytest.raises(TypeError, match="'X'"):
        ops.bf16i4bf16_shuffled(x.float(), bwq, s, z)
    with pytest.raises(TypeError, match="'w_scale'"):
        ops.preshuffle_i4(bwq, s.half())
    with pytest.raises(ValueError, match="'w_scale'"):
        ops.preshuffle_i4(bwq, s[:, :8])


def test_opcheck_and_compile(device):
    no_schema = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    q, wq, gs8, rs, gs = fp8_weights(24, 128, 15)
    xq, xs = rand_xq(5, 128, 16)
    xq, xs, wq, gs8, rs = (t.to(device) for t in (xq, xs, wq, gs8, rs))
    torch.library.opcheck(ops.f8i4bf16_shuffled.default, (xq, wq, xs, rs, gs8), test_utils=no_schema)
    ms = torch.tensor([2, 3], device=device)
    torch.library.opcheck(ops.f8i4bf16_shuffled_grouped.default,
                          (xq, wq[None].repeat(2, 1, 1), xs, rs[None].repeat(2, 1), gs8[None].repeat(2, 1, 1, 1), ms),
                          test_utils=no_schema)
    _, bwq, s, z = weights(24, 128, 17)
    x, bwq, s, z = rand_x(5, 128, 18, device), bwq.to(device), s.to(device), z.to(device)
    torch.library.opcheck(ops.bf16i4bf16_shuffled.default, (x, bwq, s, z))
    torch.library.opcheck(ops.bf16i4bf16_shuffled_batched.default, (x[None], bwq[None], s[None], z[None]))
    torch.library.opcheck(ops.bf16i4bf16_shuffled_grouped.default,
                          (x, bwq[None].repeat(2, 1, 1), s[None].repeat(2, 1, 1), z[None].repeat(2, 1, 1), ms))
    torch.library.opcheck(ops.preshuffle_i4.default, (bwq, s))
    torch.library.opcheck(ops.preshuffle_i4.default, (bwq, s.float().to(torch.float8_e4m3fn)), test_utils=no_schema)

    torch._dynamo.reset()

    def f(x, xq, xs):
        a = ops.bf16i4bf16_shuffled(x, bwq, s, z).float()
        b = ops.f8i4bf16_shuffled(xq, wq, xs, rs, gs8).float()
        c = ops.bf16i4bf16_shuffled_grouped(x, bwq[None].repeat(2, 1, 1), s[None].repeat(2, 1, 1),
                                            z[None].repeat(2, 1, 1), ms).float()
        return a + b + c

    assert torch.equal(f(x, xq, xs), torch.compile(f, fullgraph=True)(x, xq, xs))


@requires_cuda
@pytest.mark.parametrize("M", [1, 16, 128])
def test_cuda_f8_shuffled_large(M):
    q, wq, gs8, rs, gs = fp8_weights(1000, 4096, 19)
    xq, xs = rand_xq(M, 4096, 20)
    out = ops.f8i4bf16_shuffled(xq.cuda(), wq.cuda(), xs.cuda(), rs.cuda(), gs8.cuda())
    s, z = fp8_ref_scales(gs, rs)
    check(out, ref(xq.float(), q, s, z, xs), xq.float() * xs[:, None], q, s, z, "cuda")
