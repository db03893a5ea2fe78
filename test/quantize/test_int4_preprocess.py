"""INT4 preprocessing (mslk.quantize.shuffle): pack_int4, int4_row_quantize, int4_row_quantize_zp
against float64 references of their conventions, on every device the tests see."""

import pytest
import torch

from mslk.quantize.shuffle import int4_row_quantize, int4_row_quantize_zp, pack_int4


def rand(shape, device, seed, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype).to(device)


def unpack(p):
    b = p.view(torch.uint8).long()
    lo, hi = b & 0xF, b >> 4
    lo, hi = torch.where(lo > 7, lo - 16, lo), torch.where(hi > 7, hi - 16, hi)
    return torch.stack([lo, hi], -1).flatten(-2).to(torch.int8)


def groups(x, g):
    N, K = x.shape
    return [x[:, i:i + g].double().cpu() for i in range(0, K, g)]


@pytest.mark.parametrize("shape", [(4, 16), (3, 2, 10), (1, 2)])
def test_pack_int4(device, shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-8, 8, shape, generator=g, dtype=torch.int8).to(device)
    p = pack_int4(x)
    assert p.dtype == torch.int8 and p.shape == (*shape[:-1], shape[-1] // 2) and p.device.type == device
    assert torch.equal(unpack(p), x)
    b = p.view(torch.uint8).long()
    assert torch.equal(b & 0xF, x[..., 0::2].long() & 0xF)  # even k in the low nibble
    assert torch.equal(b >> 4, x[..., 1::2].long() & 0xF)


def test_pack_int4_errors():
    with pytest.raises(ValueError, match="'x'"):
        pack_int4(torch.zeros(4, 3, dtype=torch.int8))
    with pytest.raises(TypeError, match="'x'"):
        pack_int4(torch.zeros(4, 4))


@pytest.mark.parametrize("N,K,g", [(8, 256, 128), (5, 200, 64), (3, 32, 128)])  # 200: a short last group
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_int4_row_quantize(device, N, K, g, dtype):
    x = rand((N, K), device, N + K, dtype)
    q, s = int4_row_quantize(x, g)
    G = -(-K // g)
    assert q.shape == (N, K) and q.dtype == torch.int8 and s.shape == (G, N) and s.dtype == torch.float32
    assert s.is_contiguous() and int(q.min()) >= -8 and int(q.max()) <= 7
    for j, xg in enumerate(groups(x, g)):
        scale = xg.abs().amax(-1).clamp(min=1e-6) / 8
        torch.testing.assert_close(s[j].cpu().double(), scale, rtol=1e-6, atol=0)
        qg = q[:, j * g:(j + 1) * g].cpu().double()
        # q is x / scale rounded and clamped: within half a step, and the dequantized value within one
        assert torch.all((qg - (xg / s[j].cpu().double()[:, None]).clamp(-8, 7)).abs() <= 0.5 + 1e-6)


@pytest.mark.parametrize("N,K,g", [(8, 256, 128), (5, 200, 64)])
def test_int4_row_quantize_zp(device, N, K, g):
    x = rand((N, K), device, N * K, torch.float32)
    q, s, z = int4_row_quantize_zp(x, g)
    G = -(-K // g)
    assert q.shape == (N, K) and q.dtype == torch.int8 and s.shape == z.shape == (G, N)
    assert int(q.min()) >= -8 and int(q.max()) <= 7
    for j, xg in enumerate(groups(x, g)):
        lo, hi = xg.amin(-1), xg.amax(-1)
        scale = (hi - lo).clamp(min=1e-6) / 15
        torch.testing.assert_close(s[j].cpu().double(), scale, rtol=1e-6, atol=0)
        torch.testing.assert_close(z[j].cpu().double(), lo + 8 * scale, rtol=1e-5, atol=1e-6)
        deq = q[:, j * g:(j + 1) * g].cpu().double() * s[j].cpu().double()[:, None] + z[j].cpu().double()[:, None]
        assert torch.all((deq - xg).abs() <= scale[:, None] * (0.5 + 1e-4))  # half a step
        # the group's min maps to -8 and its max to 7
        assert torch.all(q[:, j * g:(j + 1) * g].cpu().amin(-1) == -8)
        assert torch.all(q[:, j * g:(j + 1) * g].cpu().amax(-1) == 7)


def test_constant_groups(device):
    x = torch.zeros(2, 128, device=device)
    q, s = int4_row_quantize(x)
    assert not q.any() and torch.all(s == 1e-6 / 8)
    q, s, z = int4_row_quantize_zp(x + 1)
    torch.testing.assert_close(q.cpu().double() * s.cpu().double().t() + z.cpu().double().t(),
                               torch.ones(2, 128, dtype=torch.float64), rtol=0, atol=1e-5)


def test_quantize_then_pack(device):
    x = rand((16, 256), device, 1)
    q, _ = int4_row_quantize(x)
    p = pack_int4(q)
    assert p.shape == (16, 128) and torch.equal(unpack(p), q)


@pytest.mark.parametrize("fn", [int4_row_quantize, int4_row_quantize_zp])
def test_errors(fn):
    with pytest.raises(TypeError, match="'x'"):
        fn(torch.zeros(4, 128, dtype=torch.int8))
    with pytest.raises(ValueError, match="'x'"):
        fn(torch.zeros(2, 4, 128))
    with pytest.raises(ValueError, match="'group_size'"):
        fn(torch.zeros(4, 128), 0)


@pytest.mark.parametrize("dtype,use_zp", [("fp8", True), ("bf16", True), ("bf16", False)])
def test_quantize_int4_preshuffle_batched(dtype, use_zp):
    from mslk.quantize.shuffle import quantize_int4_preshuffle

    w = rand((2, 3, 128, 256), "cpu", 7)
    wq, (a, b) = quantize_int4_preshuffle(w, 128, dtype=dtype, use_zp=use_zp)
    for i in range(2):
        for j in range(3):
            ewq, (ea, eb) = quantize_int4_preshuffle(w[i, j], 128, dtype=dtype, use_zp=use_zp)
            assert torch.equal(wq[i, j], ewq) and torch.equal(b[i, j], eb)
            assert torch.equal(a[i, j].view(torch.uint8), ea.view(torch.uint8))
    assert wq.shape == (2, 3, 128, 128) and a.shape[:2] == (2, 3) and b.shape[:2] == (2, 3)
