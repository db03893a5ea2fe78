"""mslk::fmha_fwd forced onto the Hopper kernel (MSLK_FMHA_KERNEL=sm90,
csrc/attention/kernels/fmha_fwd_sm90_kernel.cuh) against the float64 oracle: every CUDA case of
test_fmha_fwd_kernel.py, tensor biases and paged K/V, plus NaN-filled key padding, poisoned outputs,
agreement with the FA2 kernel and the env var's error paths."""

import math

import pytest
import torch

from mslk.attention.fmha import attn_bias as ab
from test.attention import test_fmha_fwd_kernel as base
from test.attention.test_fmha_fwd_kernel import HAS_CUDA_KERNEL, check_cuda, rand, run_op
from test.attention.tolerance import assert_attention_close

IS_SM90 = HAS_CUDA_KERNEL and torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(not IS_SM90, reason="needs an sm_90 GPU and a CUDA build of mslk")
needs_cuda = base.needs_cuda
pytestmark = pytest.mark.skipif(not base.HAS_OP, reason="native library not loaded")

SUPPORTED_DENSE = [i for i, m in enumerate(base.dense_masks(1, 1)) if not isinstance(m, str)]  # no tensor bias


@pytest.fixture
def sm90(monkeypatch):
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "sm90")


def poison_allocator(nbytes):
    """Leaves a NaN-filled block in the CUDA caching allocator, so the op's at::empty outputs start
    as NaN: an output row or LSE entry the kernel fails to write shows up."""
    torch.full((nbytes // 4 + 1024,), math.nan, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()


def check_sm90(q, k, v, bias, scale=None):
    Mq, H, Kv = q.shape[1], q.shape[2], v.shape[-1]
    poison_allocator(q.shape[0] * Mq * H * (Kv * q.element_size() + 4) * 2)
    check_cuda(q, k, v, bias, scale)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("mq,mkv", [(1, 1), (7, 7), (127, 127), (1000, 1000), (1, 1000), (127, 1000), (1000, 7)])
@pytest.mark.parametrize("idx", SUPPORTED_DENSE)
def test_sm90_dense_masks(sm90, dtype, d, mq, mkv, idx):
    g = torch.Generator().manual_seed(idx + d + mq + mkv)
    B, H = 2, 3
    q, k, v = (rand((B, mq, H, d), dtype, "cuda", g), rand((B, mkv, H, d), dtype, "cuda", g),
               rand((B, mkv, H, d), dtype, "cuda", g))
    check_sm90(q, k, v, base.dense_masks(mq, mkv)[idx])


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_long(sm90, dtype, causal, d):
    g = torch.Generator().manual_seed(1)
    q, k, v = (rand((1, 4096, 2, d), dtype, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, ab.LowerTriangularMask() if causal else None)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,Kv", [(64, 128), (128, 64), (256, 64), (32, 256), (96, 160), (192, 192), (40, 24), (3, 5)])
@pytest.mark.parametrize("bias", [None, ab.LowerTriangularFromBottomRightMask()])
def test_sm90_head_dims(sm90, dtype, K, Kv, bias):
    g = torch.Generator().manual_seed(K * 1000 + Kv)
    q, k, v = (rand((2, 130, 2, K), dtype, "cuda", g), rand((2, 200, 2, K), dtype, "cuda", g),
               rand((2, 200, 2, Kv), dtype, "cuda", g))
    check_sm90(q, k, v, bias, scale=0.3)


@needs_sm90
@pytest.mark.parametrize("scale", [-0.2, 0.0, 1e-3])
@pytest.mark.parametrize("bias", [None, ab.LowerTriangularMask()])
@pytest.mark.parametrize("d", [64, 128])
def test_sm90_scale_signs(sm90, scale, bias, d):
    """Unmasked key tiles fold the scale into the exponent (max(scale * S) = scale * min(S) for a
    negative scale); masked tiles scale first (0 * -inf would be NaN). Both, with 300 keys: full
    tiles, a causal diagonal and a ragged last tile."""
    g = torch.Generator().manual_seed(int(scale * 1000) + d)
    q, k, v = (rand((2, 300, 2, d), torch.bfloat16, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, bias, scale=scale)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm90_noncontiguous_and_expanded(sm90, dtype, D):
    g = torch.Generator().manual_seed(3)
    B, M, N, H = 2, 300, 257, 4
    q = rand((B, H, M, D), dtype, "cuda", g).transpose(1, 2)  # [B, M, H, D], strides permuted
    k = rand((B, N, 1, D), dtype, "cuda", g).expand(B, N, H, D)  # MQA: stride 0 over heads
    v = rand((B, N, 1, 2 * D), dtype, "cuda", g)[..., :D].expand(B, N, H, D)  # sliced + expanded
    check_sm90(q, k, v, None)
    check_sm90(q, k, v, ab.LowerTriangularMask())
    # batch broadcast (stride 0 over B) and a single query row
    kb = rand((1, N, H, D), dtype, "cuda", g).expand(B, N, H, D)
    check_sm90(q[:, :1], kb, v, None)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sm90_gqa_through_operator_class(sm90, monkeypatch, dtype):
    """BMGHK with K/V expanded over the heads of a group, through cutlass.FwOp."""
    from mslk.attention import fmha
    from mslk.attention.fmha import cutlass, reference
    g = torch.Generator().manual_seed(5)
    B, M, N, G, H, D = 2, 257, 300, 2, 3, 128  # N > M: no fully masked row under bottom-right causal
    q = rand((B, M, G, H, D), dtype, "cuda", g)
    k = rand((B, N, G, 1, D), dtype, "cuda", g).expand(B, N, G, H, D)
    v = rand((B, N, G, 1, D), dtype, "cuda", g).expand(B, N, G, H, D)
    for bias in (None, ab.LowerTriangularFromBottomRightMask()):
        out = fmha.memory_efficient_attention_forward(q, k, v, bias, op=cutlass.FwOp)
        want = fmha.memory_efficient_attention_forward(q.double(), k.double(), v.double(), bias, op=reference.FwOp)
        assert_attention_close(out, want, dtype)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("idx", range(len(base.varlen_masks())))
@pytest.mark.parametrize("scale_up", [1, 150])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_varlen(sm90, dtype, idx, scale_up, d):
    bias = base.varlen_masks()[idx] if scale_up == 1 else base._scaled(base.varlen_masks()[idx], scale_up)
    g = torch.Generator().manual_seed(idx)
    mq, mkv = bias.q_seqinfo.total, bias._kv_total()
    q, k, v = (rand((1, mq, 2, d), dtype, "cuda", g), rand((1, mkv, 2, d), dtype, "cuda", g),
               rand((1, mkv, 2, d), dtype, "cuda", g))
    check_sm90(q, k, v, bias.to("cuda"))


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sm90_varlen_very_unequal(sm90, dtype):
    ql, kl = [1, 0, 1000, 7, 127, 0, 3], [1000, 5, 1000, 0, 127, 0, 1]
    g = torch.Generator().manual_seed(11)
    for bias in (ab.BlockDiagonalMask.from_seqlens(ql, kl),
                 ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([1, 0, 1000, 0, 127, 3], [1000, 5, 1000, 0, 127, 3]),
                 ab.BlockDiagonalCausalMask.from_seqlens([1, 1000, 7, 0, 127]).make_local_attention(100)):
        mq, mkv = bias.q_seqinfo.total, bias._kv_total()
        q, k, v = (rand((1, mq, 4, 128), dtype, "cuda", g), rand((1, mkv, 4, 128), dtype, "cuda", g),
                   rand((1, mkv, 4, 128), dtype, "cuda", g))
        check_sm90(q, k, v, bias.to("cuda"))


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sm90_nan_in_key_padding(sm90, dtype):
    """Keys past a lane's length are never attended to: NaN there must not reach the output (the
    kernel zeroes the V rows of the last tile that lie past the lane end: P = 0 but 0 * NaN = NaN)."""
    g = torch.Generator().manual_seed(7)
    pad, kl, ql = 300, [1, 150, 299, 0], [3, 200, 1, 2]
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens(ql, pad, kl)
    mq, mkv, H, D = sum(ql), pad * len(kl), 2, 128
    q = rand((1, mq, H, D), dtype, "cuda", g)
    k, v = rand((1, mkv, H, D), dtype, "cuda", g), rand((1, mkv, H, D), dtype, "cuda", g)
    for b, n in enumerate(kl):
        k[0, b * pad + n:(b + 1) * pad] = math.nan
        v[0, b * pad + n:(b + 1) * pad] = math.nan
    out, lse = run_op(q, k, v, bias.to("cuda"), D ** -0.5)
    want_out, want_lse = base.oracle(q, k.nan_to_num(0.0), v.nan_to_num(0.0), bias.to("cuda"), D ** -0.5)
    assert torch.isfinite(out).all()
    assert_attention_close(out, want_out, dtype)
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isneginf(lse), ~fin)
    torch.testing.assert_close(lse.double()[fin], want_lse[fin], atol=2e-3, rtol=1e-3)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_matches_fa2(monkeypatch, dtype, d):
    g = torch.Generator().manual_seed(d)
    q, k, v = (rand((2, 700, 4, d), dtype, "cuda", g) for _ in range(3))
    res = {}
    for kern in ("sm80", "sm90"):
        monkeypatch.setenv("MSLK_FMHA_KERNEL", kern)
        res[kern] = run_op(q, k, v, ab.LowerTriangularMask(), d ** -0.5)
    want, _ = base.oracle(q, k, v, ab.LowerTriangularMask(), d ** -0.5)
    for kern in ("sm80", "sm90"):
        assert_attention_close(res[kern][0], want, dtype, what=kern)
    torch.testing.assert_close(res["sm90"][1], res["sm80"][1], atol=1e-3, rtol=1e-3)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_auto_choice(monkeypatch, dtype):
    """The default (auto): the Hopper kernel where it applies (a tensor bias included)."""
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "auto")
    g = torch.Generator().manual_seed(9)
    q, k, v = (rand((2, 300, 2, 128), dtype, "cuda", g) for _ in range(3))
    check_cuda(q, k, v, ab.LowerTriangularMask())
    check_cuda(q, k, v, rand((1, 2, 300, 300), torch.float32, "cuda", g))


def _bias_of(spec, B, H, mq, mkv, dtype, bias_dtype, strided, g):
    """A tensor bias (float32 or the input dtype; strided: keys not contiguous), alone or under a
    causal mask."""
    shape = (1, H, mq, mkv) if spec == "tensor" else (B, 1, mq, mkv)  # broadcast over B, or over heads
    t = rand(shape[:2] + (mkv, mq) if strided else shape, torch.float32, "cuda", g)
    t = t.transpose(-1, -2) if strided else t
    t = t.to(dtype) if bias_dtype == "same" else t
    return t if spec == "tensor" else ab.LowerTriangularMask().add_bias(t)


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("mq,mkv", [(1, 1), (7, 7), (127, 1000), (1000, 1000), (1000, 7), (300, 300)])
@pytest.mark.parametrize("spec", ["tensor", "causal+tensor"])
@pytest.mark.parametrize("bias_dtype", ["fp32", "same"])
def test_sm90_tensor_bias(sm90, dtype, d, mq, mkv, spec, bias_dtype):
    """The Hopper kernel's bias rows: broadcast over batches or heads, float32 or the input dtype,
    lengths off the tiles, with and without a causal band."""
    g = torch.Generator().manual_seed(d + mq + mkv)
    B, H = 2, 3
    q, k, v = (rand((B, mq, H, d), dtype, "cuda", g), rand((B, mkv, H, d), dtype, "cuda", g),
               rand((B, mkv, H, d), dtype, "cuda", g))
    check_sm90(q, k, v, _bias_of(spec, B, H, mq, mkv, dtype, bias_dtype, False, g))


@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("mq,mkv,layout", [(127, 1000, "heads"), (300, 264, "batches"), (1000, 520, "full"),
                                           (64, 8, "padded"), (513, 1032, "padded")])
@pytest.mark.parametrize("causal", [False, True])
def test_sm90_tensor_bias_tma(sm90, monkeypatch, dtype, d, mq, mkv, layout, causal):
    """16-bit biases that the bias rows load as TMA tiles (keys contiguous, rows 16-byte aligned):
    broadcast over heads or batches, whole (with -inf entries), or a slice of a padded tensor;
    lengths off the tiles. Against the oracle under both routes (MSLK_FMHA_SM90_BIAS_TMA=0: per-thread
    loads), and the routes against each other: the TMA route adds b / scale to Q K^T, the loads route
    b to scale * Q K^T, so they differ by float32 rounding only."""
    g = torch.Generator().manual_seed(d + mq + mkv)
    B, H = 2, 3
    q, k, v = (rand((B, mq, H, d), dtype, "cuda", g), rand((B, mkv, H, d), dtype, "cuda", g),
               rand((B, mkv, H, d), dtype, "cuda", g))
    shape = {"heads": (B, 1, mq, mkv), "batches": (1, H, mq, mkv), "full": (B, H, mq, mkv),
             "padded": (B, H, mq, mkv + 24)}[layout]
    t = rand(shape, dtype, "cuda", g)[..., :mkv]  # "padded": rows mkv + 24 keys apart
    if layout == "full":
        t[:, :, :, 3::5] = -math.inf  # keys masked through the bias; every row keeps others
    bias = ab.LowerTriangularMask().add_bias(t) if causal else t
    check_sm90(q, k, v, bias)
    out, lse = run_op(q, k, v, bias, d ** -0.5)
    monkeypatch.setenv("MSLK_FMHA_SM90_BIAS_TMA", "0")
    check_sm90(q, k, v, bias)
    out_ld, lse_ld = run_op(q, k, v, bias, d ** -0.5)
    assert_attention_close(out, out_ld.double(), dtype, head_dim=d, v_max=v.abs().max())
    fin = torch.isfinite(lse_ld)
    assert torch.equal(torch.isfinite(lse), fin)
    torch.testing.assert_close(lse[fin], lse_ld[fin], atol=1e-4, rtol=1e-5)


@needs_sm90
@pytest.mark.parametrize("d", [64, 128])
def test_sm90_tensor_bias_strided(sm90, d):
    """A bias whose keys are not contiguous (each key read on its own) and one with -inf entries."""
    g = torch.Generator().manual_seed(d)
    B, H, mq, mkv = 2, 2, 200, 333
    q, k, v = (rand((B, n, H, d), torch.bfloat16, "cuda", g) for n in (mq, mkv, mkv))
    check_sm90(q, k, v, _bias_of("tensor", B, H, mq, mkv, torch.bfloat16, "fp32", True, g))
    t = rand((B, H, mq, mkv), torch.float32, "cuda", g)
    t[:, :, :, 5:300:7] = -math.inf  # keys masked through the bias; every row keeps others
    check_sm90(q, k, v, t)


@needs_sm90
@pytest.mark.parametrize("kern", ["auto", "sm90", "sm80"])
def test_tensor_bias_kernel_choice(monkeypatch, kern):
    """A tensor bias runs the Hopper kernel by default (auto) and forced, the FA2 kernel under sm80."""
    monkeypatch.setenv("MSLK_FMHA_KERNEL", kern)
    g = torch.Generator().manual_seed(3)
    q, k, v = (rand((1, 256, 2, 128), torch.bfloat16, "cuda", g) for _ in range(3))
    bias = rand((1, 2, 256, 256), torch.float32, "cuda", g)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run_op(q, k, v, bias, 128 ** -0.5)
        torch.cuda.synchronize()
    assert any("fmha_fwd_sm90_kernel" in e.name for e in prof.events()) == (kern != "sm80")


@needs_cuda
def test_invalid_kernel_choice(monkeypatch):
    q = torch.zeros(1, 8, 2, 64, dtype=torch.half, device="cuda")
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "hopper")
    with pytest.raises(ValueError, match="MSLK_FMHA_KERNEL"):
        run_op(q, q, q, None, 0.125)
    for ok in ("auto", "sm80", ""):
        monkeypatch.setenv("MSLK_FMHA_KERNEL", ok)
        out, lse = run_op(q, q, q, None, 0.125)
        assert torch.isfinite(out).all() and torch.isfinite(lse).all()


@needs_cuda
def test_sm90_forced_refusal_raises(monkeypatch):
    """A problem the forced Hopper kernel declines raises naming the variable: any problem off
    sm_90; on sm_90 one with dropout (only FA2 applies it)."""
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "sm90")
    q = torch.zeros(1, 8, 2, 64, dtype=torch.half, device="cuda")
    drop = dict(dropout_p=0.1, rng_state=torch.tensor([1, 2], dtype=torch.int64)) if IS_SM90 else {}
    with pytest.raises(RuntimeError, match="MSLK_FMHA_KERNEL"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q, None, scale=0.125, **drop)


from bench.attention.tune_fmha_sm90 import bias_rows, tile_rows  # noqa: E402

ROWS = [r for r in range(len(tile_rows())) if r not in bias_rows()]  # bias rows: test_sm90_tensor_bias


@needs_sm90
@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mq,mkv", [(7, 7), (1000, 1000), (127, 1000), (1000, 7), (4096, 4096)])
@pytest.mark.parametrize("idx", SUPPORTED_DENSE)
def test_sm90_candidate_tile_rows(sm90, monkeypatch, row, dtype, mq, mkv, idx):
    """Every row of kTileCfgs, forced (MSLK_FMHA_SM90_CFG), on every mask: the persistent defaults under
    causal masks too, which dispatch gives to the non-persistent rows."""
    monkeypatch.setenv("MSLK_FMHA_SM90_CFG", str(row))
    d = tile_rows()[row][0]
    g = torch.Generator().manual_seed(row + idx + mq)
    q, k, v = (rand((1, mq, 2, d), dtype, "cuda", g), rand((1, mkv, 2, d), dtype, "cuda", g),
               rand((1, mkv, 2, d), dtype, "cuda", g))
    check_sm90(q, k, v, base.dense_masks(mq, mkv)[idx])


@needs_sm90
@pytest.mark.parametrize("row", [r for r, t in enumerate(tile_rows()) if t[4] == 1])  # the persistent rows
@pytest.mark.parametrize("idx", SUPPORTED_DENSE)
def test_sm90_persistent_several_tiles_a_cta(sm90, monkeypatch, row, idx):
    """The other tests make fewer work tiles than 132 SMs, one a CTA. 70 heads x 1000 queries make
    280-560 tiles, 2-5 a CTA, so the persistent walk carries its K/V ring position and Q buffer
    phase across tiles; keys not a multiple of the tile, and masks whose tiles have different key
    ranges or none (bottom-right causal with more queries than keys: the first tiles have no key,
    and the producer skips them)."""
    monkeypatch.setenv("MSLK_FMHA_SM90_CFG", str(row))
    d = tile_rows()[row][0]
    g = torch.Generator().manual_seed(row + 10 * idx)
    mq, mkv, H = 1000, 777, 70
    q, k, v = (rand((1, mq, H, d), torch.bfloat16, "cuda", g), rand((1, mkv, H, d), torch.bfloat16, "cuda", g),
               rand((1, mkv, H, d), torch.bfloat16, "cuda", g))
    check_sm90(q, k, v, base.dense_masks(mq, mkv)[idx])


# O store paths (fmha_fwd_sm90_kernel.cuh's epilogue) -> the environment that selects each
STORE_PATHS = {"tma": {}, "vec": {"MSLK_FMHA_SM90_OTMA": "0"}, "pairs": {"MSLK_FMHA_SM90_OVEC": "0"}}


@needs_sm90
@pytest.mark.parametrize("path", list(STORE_PATHS))
@pytest.mark.parametrize("d", [40, 64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_sm90_o_store_paths(sm90, monkeypatch, path, d, causal):
    """The epilogue's three ways out for O: stmatrix into shared memory and TMA stores of [64][64]
    boxes (rows with room for the buffer: d64, d128; the map clips rows past Mq and columns past
    Kv, here a ragged last query tile and head dims 40 / 96 padded to 64 / 128), 16-byte stores after
    a quad transpose (MSLK_FMHA_SM90_OTMA=0; d256's default) and the accumulator pairs' 4-byte stores
    (MSLK_FMHA_SM90_OVEC=0); each against the oracle."""
    for key, val in STORE_PATHS[path].items():
        monkeypatch.setenv(key, val)
    g = torch.Generator().manual_seed(d + causal)
    q, k, v = (rand((2, 1000, 3, d), torch.bfloat16, "cuda", g), rand((2, 777, 3, d), torch.bfloat16, "cuda", g),
               rand((2, 777, 3, d), torch.bfloat16, "cuda", g))
    check_sm90(q, k, v, ab.LowerTriangularFromBottomRightMask() if causal else None)


@needs_sm90
@pytest.mark.parametrize("row", [r for r, t in enumerate(tile_rows()) if t[3] == 0])  # rows without ping-pong
@pytest.mark.parametrize("idx", SUPPORTED_DENSE)
@pytest.mark.parametrize("mq,mkv", [(1000, 777), (300, 1000), (256, 256)])
def test_sm90_warpgroup_key_trim(sm90, monkeypatch, row, idx, mq, mkv):
    """Rows without ping-pong let each consumer warpgroup stop at the last key its own rows may
    see (under a causal band the upper warpgroups of a 192 / 256-row tile skip up to 3 key tiles,
    and may run none: bottom-right causal with more queries than keys) and only release the
    skipped stages."""
    monkeypatch.setenv("MSLK_FMHA_SM90_CFG", str(row))
    d = tile_rows()[row][0]
    g = torch.Generator().manual_seed(row + 10 * idx + mq)
    q, k, v = (rand((1, mq, 3, d), torch.bfloat16, "cuda", g), rand((1, mkv, 3, d), torch.bfloat16, "cuda", g),
               rand((1, mkv, 3, d), torch.bfloat16, "cuda", g))
    check_sm90(q, k, v, base.dense_masks(mq, mkv)[idx])


@needs_cuda
def test_sm90_cfg_env_errors(monkeypatch):
    q = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16)
    for bad in ("x", "-1", "999"):
        monkeypatch.setenv("MSLK_FMHA_SM90_CFG", bad)
        with pytest.raises(ValueError, match=f"MSLK_FMHA_SM90_CFG must be a whole number from 0 to .*got '{bad}'"):
            torch.ops.mslk.fmha_fused_fwd(q, q, q)


@needs_cuda
@pytest.mark.parametrize("var,bad", [("MSLK_FMHA_SM90_L2_MIB", "x"), ("MSLK_FMHA_SM90_L2_MIB", "-1"),
                                     ("MSLK_FMHA_SM90_STREAMK", "2"), ("MSLK_FMHA_SM90_OTMA", "off"),
                                     ("MSLK_FMHA_SM90_OVEC", "yes"), ("MSLK_FMHA_SM90_BIAS_TMA", "on")])
def test_sm90_tuning_env_errors(monkeypatch, var, bad):
    """Every tuning variable is read by the glue (env.h): a malformed value is a ValueError naming it."""
    q = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16)
    monkeypatch.setenv(var, bad)
    with pytest.raises(ValueError, match=f"{var} must be .*got '{bad}'"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q)


@needs_sm90
@pytest.mark.parametrize("mib", [1, 3])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_sm90_l2_sections(sm90, monkeypatch, mib, d, causal):
    """Work tiles in L2 sections of a few (head, sequence) lanes, the last section shorter (the
    default section, 24 MiB of K/V, spans every lane of these small problems)."""
    monkeypatch.setenv("MSLK_FMHA_SM90_L2_MIB", str(mib))
    g = torch.Generator().manual_seed(mib + d)
    B, H, M = 3, 5, 1000  # 15 lanes of 0.25-1 MiB K/V: sections of 1-12 lanes
    q, k, v = (rand((B, M, H, d), torch.bfloat16, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, ab.LowerTriangularMask() if causal else None)
    ql = [1000, 7, 640, 0, 333]
    bias = ab.BlockDiagonalCausalMask.from_seqlens(ql) if causal else ab.BlockDiagonalMask.from_seqlens(ql)
    q, k, v = (rand((1, sum(ql), H, d), torch.bfloat16, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, bias.to("cuda"))


@needs_sm90
@pytest.mark.parametrize("nseq", [3, 128, 129])
@pytest.mark.parametrize("causal", [False, True])
def test_sm90_varlen_tile_walks(sm90, monkeypatch, nseq, causal):
    """Varlen problems of up to kPackedSeqs (128) sequences walk a packed list of the query tiles
    that hold rows; more sequences walk the num_m x lanes rectangle. Both against the oracle, with
    empty, one-row and long sequences among short ones."""
    g = torch.Generator().manual_seed(nseq + causal)
    ql = torch.randint(0, 200, (nseq,), generator=g).tolist()
    ql[0], ql[-1], ql[nseq // 2] = 0, 1, 700
    bias = ab.BlockDiagonalCausalMask.from_seqlens(ql) if causal else ab.BlockDiagonalMask.from_seqlens(ql)
    q, k, v = (rand((1, sum(ql), 2, 128), torch.bfloat16, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, bias.to("cuda"))


def _sm90_rows_run(fn):
    """The kTileCfgs row (the kernel's third template argument) of every sm90 kernel fn launches."""
    import re

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return [int(m.group(1)) for n in names if (m := re.search(r"fmha_fwd_sm90_kernel<[^<>]*, \d+, (\d+)>", n))]


@needs_sm90
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_causal_runs_the_non_persistent_row(sm90, d):
    """Dispatch: causal masks and varlen blocks go to the head dim's non-persistent row (banded_cfg),
    dense non-causal problems to its default."""
    rows = tile_rows()
    default = next(i for i, r in enumerate(rows) if r[0] == d)
    banded = next((i for i, r in enumerate(rows) if r[0] == d and r[4] == 0), default)
    q = torch.randn(1, 300, 2, d, device="cuda", dtype=torch.bfloat16)
    dense = 6 if d == 64 else default  # kDenseAlts: one round either way, and d64's BM 192 row costs less
    assert _sm90_rows_run(lambda: run_op(q, q, q, None, 0.1)) == [dense]
    assert _sm90_rows_run(lambda: run_op(q, q, q, ab.LowerTriangularMask(), 0.1)) == [banded]
    varlen = ab.BlockDiagonalMask.from_seqlens([100, 200]).to("cuda")
    assert _sm90_rows_run(lambda: run_op(q, q, q, varlen, 0.1)) == [banded]
    assert rows[banded][4] == 0, "every head dim has a non-persistent row for causal masks"


@needs_sm90
@pytest.mark.skipif(IS_SM90 and torch.cuda.get_device_properties(0).multi_processor_count != 132,
                    reason="the expected rows are worked out for 132 SMs (H100 SXM / H200)")
@pytest.mark.parametrize("B,H,S,streamk,row", [
    (4, 16, 2048, None, 6),  # BM 256: 512 tiles, 4 whole rounds; BM 192: 704 tiles, 5.33 rounds (split tail)
    (4, 16, 2048, "0", 0),   # no split: BM 192's sixth round counts whole
    (8, 16, 1024, None, 0),  # 8 key tiles of 128: no split; 4 vs 6 rounds
    (1, 40, 1024, None, 6),  # BM 256 splits its tail (1.21 rounds + 3/16), BM 192 cannot (2 rounds)
    (1, 16, 8192, None, 6),  # 4 rounds vs 5.21 split
    (2, 32, 4096, None, 6),  # 8 vs 11 whole rounds (3% of each last round idle)
])
def test_sm90_d64_dense_row_choice(sm90, monkeypatch, B, H, S, streamk, row):
    """Dense d64 problems take the kDenseAlts row of least modelled time (rounds x BM x cost)."""
    if streamk is not None:
        monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", streamk)
    q = torch.randn(B, S, H, 64, device="cuda", dtype=torch.bfloat16)
    assert _sm90_rows_run(lambda: run_op(q, q, q, None, 0.125)) == [row]


def _peak_bytes(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base_bytes = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base_bytes


@needs_sm90
@pytest.mark.parametrize("streamk", ["on", "off"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d,B,H,mq,mkv,cfg", [
    (64, 1, 70, 512, 1000, 0),   # BM 256: 140 work tiles on 132 SMs, every one split by keys (16 key tiles)
    (64, 1, 140, 192, 300, 6),   # BM 192: 140 tiles split, 3 key tiles of 128
    (128, 1, 150, 256, 777, 1),  # 300 tiles: 132 whole, 168 split; 7 key tiles, the last one short
    (256, 2, 40, 200, 300, 2),   # 160 tiles, every one split; 5 key tiles of 64
    # fewer tiles than SMs: each tile over several CTAs, merged along a chain of flags
    (64, 1, 2, 256, 2048, 0),    # 2 tiles x 32 key tiles over 64 CTAs
    (128, 1, 3, 128, 1500, 1),   # 3 tiles x 12 key tiles (the last short) over 36 CTAs
    (256, 1, 1, 100, 3000, 2),   # one tile x 47 key tiles over 47 CTAs
])
def test_sm90_stream_k_tail(sm90, monkeypatch, streamk, dtype, d, B, H, mq, mkv, cfg):
    """Dense problems whose work tiles do not fill whole rounds of the SMs split the tail's tiles by
    keys (stream_k_plan): float32 partials in a workspace the glue allocates, merged by the CTA that
    runs the first keys. Against the oracle with MSLK_FMHA_SM90_STREAMK on and off; the workspace
    (a slot a CTA of the grid) is the difference of the op's peak memory."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the shapes are sized for 132 SMs (H200)")
    # "on": MSLK_FMHA_SM90_STREAMK=1, so that tiles of fewer than kStreamKMinKeyTiles key tiles split too
    monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", "0" if streamk == "off" else "1")
    monkeypatch.setenv("MSLK_FMHA_SM90_CFG", str(cfg))
    g = torch.Generator().manual_seed(d + mq)
    q, k, v = (rand((B, m, H, d), dtype, "cuda", g) for m in (mq, mkv, mkv))
    check_sm90(q, k, v, None)
    if streamk == "on":
        _, bn, _, _, _, wgs = tile_rows()[cfg]
        num_work, n_kt = -(-mq // (64 * wgs)) * H * B, -(-mkv // bn)
        grid = min(num_work * n_kt, 132) if num_work < 132 else 132
        ws = grid * ((d // 8 + 1) * 128 * wgs * 16 + wgs * 8)  # stream_k_workspace_bytes
        on = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
        monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", "0")
        off = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
        assert ws <= on - off < ws + (1 << 21), (on, off, ws)


@needs_sm90
@pytest.mark.parametrize("H,mkv,parts", [(1, 8192, 11), (2, 16384, 16)])
def test_sm90_stream_k_default_parts(sm90, monkeypatch, H, mkv, parts):
    """By default a tile splits into at most about sqrt(2 * key tiles) parts (stream_k_max_parts):
    one 128-row tile a head, 64 / 128 key tiles -> 11 / 16 parts; against the oracle, and the
    workspace holds a slot for each of those CTAs only."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the shapes are sized for 132 SMs (H200)")
    monkeypatch.delenv("MSLK_FMHA_SM90_STREAMK", raising=False)
    g = torch.Generator().manual_seed(mkv)
    q, k, v = (rand((1, m, H, 128), torch.bfloat16, "cuda", g) for m in (128, mkv, mkv))
    check_sm90(q, k, v, None)
    ws = H * parts * ((128 // 8 + 1) * 128 * 2 * 16 + 2 * 8)  # stream_k_workspace_bytes, grid = tiles x parts
    on = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
    monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", "0")
    off = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
    assert ws <= on - off < ws + (1 << 21), (on, off, ws)


@needs_sm90
@pytest.mark.parametrize("d,splits", [(128, True), (256, False)])
def test_sm90_stream_k_default_waste_by_head_dim(sm90, monkeypatch, d, splits):
    """By default the tail splits where its idle SMs waste stream_k_min_gain(d) of the run: 2% at
    d128, 5% elsewhere. 16 heads x 2048 queries make 256 tiles of 128 rows, 1.94 rounds of 132 SMs
    (3% counted waste): d128 splits (a workspace slot a CTA), d256 runs whole tiles (none)."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the shapes are sized for 132 SMs (H200)")
    monkeypatch.delenv("MSLK_FMHA_SM90_STREAMK", raising=False)
    monkeypatch.delenv("MSLK_FMHA_SM90_CFG", raising=False)
    g = torch.Generator().manual_seed(d)
    q, k, v = (rand((1, 2048, 16, d), torch.bfloat16, "cuda", g) for _ in range(3))
    check_sm90(q, k, v, None)
    ws = 132 * ((d // 8 + 1) * 128 * 2 * 16 + 2 * 8)  # stream_k_workspace_bytes: 2 consumer warpgroups
    on = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
    monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", "0")
    off = _peak_bytes(lambda: run_op(q, k, v, None, 0.1))
    if splits:
        assert ws <= on - off < ws + (1 << 21), (on, off, ws)
    else:
        assert on - off < (1 << 21), (on, off)


@needs_sm90
@pytest.mark.parametrize("mq,mkv,H", [(256, 256, 150), (128, 1500, 3)])  # 300 tiles, 168 split; 3 tiles over 36 CTAs
def test_sm90_stream_k_replays_in_a_cuda_graph(sm90, monkeypatch, mq, mkv, H):
    """A captured stream-K launch replays with the token it was captured with: the merging CTAs
    clear the flags, so each replay waits for that replay's partials (new inputs every replay,
    bitwise equal to eager calls)."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the shape is sized for 132 SMs (H200)")
    monkeypatch.setenv("MSLK_FMHA_SM90_STREAMK", "1")  # short key lanes: split only when forced
    g = torch.Generator().manual_seed(5)
    q, k, v = (rand((1, m, H, 128), torch.bfloat16, "cuda", g) for m in (mq, mkv, mkv))

    def f():
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, scale=0.1)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = f()
    for _ in range(3):
        for x in (q, k, v):
            x.copy_(rand(tuple(x.shape), torch.bfloat16, "cuda", g))
        graph.replay()
        want_out, want_lse = f()
        torch.cuda.synchronize()
        assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


# ---- paged K/V on the Hopper kernel

@needs_sm90
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("page_size", [16, 64, 256])
@pytest.mark.parametrize("idx", range(5))
def test_sm90_paged_masks(sm90, dtype, d, page_size, idx):
    """Pages smaller than a key tile (every tile read a row at a time), equal to or larger than one,
    gappy lanes whose keys start off a page (tiles across pages), unused and shuffled pages."""
    bias = base.paged_masks("cuda", page_size)[idx]
    g = torch.Generator().manual_seed(idx + d + page_size)
    mq, phys = bias.q_seqinfo.total, 14 * page_size
    q, k, v = (rand((1, mq, 4, d), dtype, "cuda", g), rand((1, phys, 4, d), dtype, "cuda", g),
               rand((1, phys, 4, d), dtype, "cuda", g))
    check_sm90(q, k, v, bias)


@needs_sm90
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("gappy", [False, True])
def test_sm90_paged_long_lanes(sm90, d, gappy):
    """Lanes of hundreds to thousands of keys over 256-key pages: whole tiles inside pages, and (gappy,
    starts 100 and 300) tiles that cross them."""
    page, per_lane = 256, 12
    g = torch.Generator().manual_seed(d + gappy)
    bt = torch.randperm(2 * per_lane + 5, generator=g)[:2 * per_lane].reshape(2, per_lane).to(torch.int32)
    ql, kl = [300, 5], [2000, 777]
    if gappy:
        bias = ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens(ql, [100, 300, 0], kl, bt, page,
                                                                               device="cuda")
    else:
        bias = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(ql, kl, bt, page, device="cuda")
    phys = (2 * per_lane + 5) * page
    q = rand((1, sum(ql), 4, d), torch.bfloat16, "cuda", g)
    k, v = (rand((1, phys, 4, d), torch.bfloat16, "cuda", g) for _ in range(2))
    check_sm90(q, k, v, bias)


@needs_sm90
@pytest.mark.parametrize("kern", ["auto", "sm90", "sm80"])
def test_paged_kernel_choice(monkeypatch, kern):
    """Paged K/V runs the Hopper kernel by default (auto) and forced, the FA2 kernel under sm80."""
    monkeypatch.setenv("MSLK_FMHA_KERNEL", kern)
    bias = base.paged_masks("cuda", 64)[0]
    g = torch.Generator().manual_seed(5)
    q = rand((1, bias.q_seqinfo.total, 2, 128), torch.bfloat16, "cuda", g)
    k, v = (rand((1, 14 * 64, 2, 128), torch.bfloat16, "cuda", g) for _ in range(2))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run_op(q, k, v, bias, 128 ** -0.5)
        torch.cuda.synchronize()
    assert any("fmha_fwd_sm90_kernel" in e.name for e in prof.events()) == (kern != "sm80")
