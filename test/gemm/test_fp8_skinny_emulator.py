"""The decode-shape FP8 kernel's index math, on the CPU: tools/gemm/emulate_fp8_skinny.py mirrors
fp8_rowwise_skinny.cu (fragments, loads, stages, splits, epilogue) and is checked here against a
float64 matmul, so CI exercises the mapping without a GPU."""

import importlib.util
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parents[2] / "tools/gemm/emulate_fp8_skinny.py"
_spec = importlib.util.spec_from_file_location("emulate_fp8_skinny", _path)
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)

# (M, N, K, extra): every token tile (MT 1, 2, 4, 8), N and K off the tile, tails, strides, batches.
CASES = [
    (1, 72, 48, {}),
    (3, 20, 16, {"lda_pad": 16}),
    (2, 16, 96, {"bias": False}),
    (7, 100, 272, {"lda_pad": 32}),
    (8, 64, 512, {"ldd_pad": 5}),
    (9, 72, 528, {"L": 2, "broadcast_w": True}),
    (16, 40, 304, {"ldb_pad": 16, "L": 2}),
    (33, 24, 160, {"bias": False, "ldd_pad": 1}),
    (64, 20, 128, {"L": 2, "broadcast_w": True, "lda_pad": 16}),
]


@pytest.mark.parametrize("M,N,K,extra", CASES)
@pytest.mark.parametrize("splits", [1, 2, 3])
def test_emulated_kernel_matches_matmul(M, N, K, extra, splits):
    p = emu.make_problem(M, N, K, seed=M * 1000 + N + K, **extra)
    out, written, used = emu.run(p, splits)
    assert 1 <= used <= splits
    emu.check(p, out, written)


def test_split_path_runs():
    # splits > 1 really takes the workspace + reduce path for these (not collapsed to 1)
    p = emu.make_problem(9, 40, 1040)
    _, _, used = emu.run(p, 3)
    assert used == 3


@pytest.mark.parametrize("order", [(0, 2, 1, 3), (1, 0, 3, 2), (2, 3, 0, 1)])
def test_wrong_fragment_mapping_is_caught(order):
    p = emu.make_problem(9, 40, 96)
    out, written, _ = emu.run(p, 1, a_order=order)
    with pytest.raises(AssertionError, match="max err"):
        emu.check(p, out, written)


def test_split_plan_invariants():
    table = emu.split_table()
    assert table[-1][0] >= 64 and table[-1][1] < 0, "last row must cover every M <= 64 and any size"
    assert emu.auto_max_m() <= emu.MAX_M
    shapes = [(8192, 8192), (28672, 8192), (8192, 28672), (7168, 16384), (1280, 8192), (8192, 1024), (72, 48)]
    for M in (1, 16, 64):
        for N, K in shapes:
            for L in (1, 3):
                s = emu.skinny_splits(M, N, K, L, sms=132, table=table)
                kps = emu.k_per_split(K, s)
                assert 1 <= s <= 64 and kps % emu.CHUNK == 0
                assert (s - 1) * kps < K <= s * kps, (M, N, K, L, s, kps)  # no empty split
                ctas = s * L * emu.div_up(N, emu.ROWS_PER_CTA)
                assert s == 1 or ctas <= max(r[2] for r in table) * 132  # at most one wave
    # small N at decode is split (N=1280: 20 CTAs per split would leave most SMs idle)
    assert emu.skinny_splits(1, 1280, 8192, 1, sms=132, table=table) > 1


def test_mirror_matches_kernel_constants():
    c = emu.kernel_constants()
    assert c["warps"] == emu.WARPS and emu.THREADS == 32 * c["warps"] and emu.ROWS_PER_CTA == 16 * c["warps"]
    assert (c["step"], c["chunk"], c["max_m"]) == (emu.STEP, emu.CHUNK, emu.MAX_M)
    lo_mt, few, many = c["steps"]
    for mt in (1, 2, 4, 8):
        assert emu.tile_steps(mt) == (few if mt >= lo_mt else many)


def test_applies():
    p = emu.make_problem(4, 8, 32)
    assert emu.skinny_applies(p)
    assert not emu.skinny_applies({**p, "K": 40})
    assert not emu.skinny_applies({**p, "M": 65})
    assert not emu.skinny_applies({**p, "lda": 40})
