"""The fused backward's index math on the CPU (tools/attention/emulate_fmha_bwd.py mirrors
fmha_bwd_kernel.cuh, fmha_bwd_dq_kernel.cuh and fmha_bwd.cu line by line) against float64 attention
gradients: every mask kind, varlen, bias, dropout, atomic and deterministic dQ, real and small tiles."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_path = Path(__file__).resolve().parents[2] / "tools/attention/emulate_fmha_bwd.py"
_spec = importlib.util.spec_from_file_location("emulate_fmha_bwd", _path)
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)


def test_philox_matches_header():
    # fmha_dropout_keep4(fmha_dropout_make(0.3, seed, offset), bh, i, j4) from kernels/fmha_dropout.h,
    # compiled on the host
    d = emu.dropout_make(0.3, 0x123456789ABCDEF, 0xFEDCBA987)
    assert d["threshold"] == 1288490240
    for (bh, i, j4), want in [((0, 0, 0), 14), ((1, 2, 3), 14), ((7, 100, 41), 14), ((5, 77777, 12345), 11),
                              ((3, 9, 1), 14)]:
        assert int(emu.keep4(d, bh, i, j4)) == want


def test_keep2_pairs():
    # fmha_sm80_device.cuh dropout_keep2 (the forward's pairs j, j + 1) against per-element keep
    d = emu.dropout_make(0.5, 42, 7)
    for j in range(0, 24):
        bits = int(emu.keep4(d, 3, 11, j >> 2)) >> (j & 3)
        if (j & 3) == 3:
            bits |= int(emu.keep4(d, 3, 11, (j >> 2) + 1)) << 1
        assert bits & 1 == emu.keep(d, 3, 11, j) and (bits >> 1) & 1 == emu.keep(d, 3, 11, j + 1)


def test_fragments_match_forward_emulator():
    rng = np.random.default_rng(1)
    smem = rng.standard_normal(64 * 64)
    addrs = emu.swz(64, emu.LANES & 15, (emu.LANES >> 4) * 8)
    for trans in (False, True):
        assert np.array_equal(emu.ldsm_x4(smem, addrs, trans), emu.fwd.ldsm_x4(smem, addrs, trans))
    a, b = rng.standard_normal((4, 32, 2)), rng.standard_normal((2, 32, 2))
    c1, c2 = np.zeros((32, 4)), np.zeros((32, 4))
    emu.mma(c1, a, b[0], b[1])
    emu.fwd.mma(c2, a, b[0], b[1])
    assert np.allclose(c1, c2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", range(len(emu.cases())))
def test_case(case):
    err, tiles = emu.run_case(np.random.default_rng(case), **emu.cases()[case])
    assert tiles > 0 and err < 1e-9
