"""The FA2 kernel's index math on the CPU (tools/attention/emulate_fmha_fwd.py mirrors
fmha_fwd_kernel.cuh line by line): a few dense and varlen cases, and the paged K/V loader
(block-table lookups per key row) on every paged case, against float64 attention."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_path = Path(__file__).resolve().parents[2] / "tools/attention/emulate_fmha_fwd.py"
_spec = importlib.util.spec_from_file_location("emulate_fmha_fwd", _path)
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)


@pytest.mark.parametrize("case", range(len(emu.PAGED_CASES)))
def test_paged_loader(case):
    err, tiles = emu.run_paged_case(np.random.default_rng(case), *emu.PAGED_CASES[case])
    assert tiles > 0 and err < 1e-9


@pytest.mark.parametrize("kind,wl,wr", [(0, -1, -1), (2, 3, -1), (3, 2, 1)])
def test_dense_and_varlen(kind, wl, wr):
    rng = np.random.default_rng(kind)
    err, _ = emu.run_case(rng, B=2, Mq=37, Mkv=53, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr, BM=32, BN=16)
    assert err < 1e-9
    err, _ = emu.run_case(rng, B=1, Mq=45, Mkv=96, H=1, K=16, Kv=8, kind=kind, wl=wl, wr=wr,
                          varlen=([0, 20, 25, 45], [0, 32, 64, 96]), seqlen_k=[30, 0, 17], BM=32, BN=16)
    assert err < 1e-9
