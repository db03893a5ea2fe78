"""The FP8 rowwise bucket table is data a script regenerates from tuning runs
(tools/gemm/regen_fp8_buckets.py): its choice of tiles, the merge into buckets, the rewrite of
the header between its markers, and that every bucket it can emit names a row of the table."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("regen", ROOT / "tools/gemm/regen_fp8_buckets.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)


def table_rows():
    text = (ROOT / "csrc/gemm/kernels/fp8_rowwise_configs.h").read_text()
    # (id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative, fast_accum, swap)
    return [tuple(map(int, m.groups())) for m in re.finditer(
        r"X\((\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)", text)]


def fake_tuning():
    a, b, c = "64x128x128_c1x1_pp", "128x128x128_c2x1_coop", "128x256x128_c2x1_coop"
    pts = []
    for M, best, sk in [(1, a, 5.0), (16, a, 6.0), (64, a, 50.0), (128, a, 99.0), (512, b, 99.0),
                        (2048, c, 99.0), (8192, c, 99.0)]:
        for N, K in [(8192, 8192), (1280, 8192)]:
            us = {a: 30.0, b: 30.0, c: 30.0, "peer": 40.0}
            us[best] = 10.0
            if M <= 64:
                us["skinny"] = sk
            pts.append({"M": M, "N": N, "K": K, "us": us})
    return {"device": "test", "configs": [a, b, c], "points": pts}


def test_buckets_from_tuning():
    win = regen.winners(fake_tuning())
    assert [w[0] for w in win.values()][:4] == ["64x128x128_c1x1_pp"] * 4
    bk = regen.buckets(win)
    assert bk == [(128, "64x128x128_c1x1_pp"), (512, "128x128x128_c2x1_coop"), (-1, "128x256x128_c2x1_coop")]
    assert regen.skinny_max_m(win) == 16  # skinny wins at M = 1 and 16, loses at 64


def test_rewrite_keeps_the_header_valid():
    text = (ROOT / "csrc/gemm/kernels/fp8_rowwise_buckets.h").read_text()
    win = regen.winners(fake_tuning())
    out = regen.rewrite(text, regen.buckets(win), regen.skinny_max_m(win))
    assert "#define MSLK_FP8_SKINNY_AUTO_MAX_M 16" in out
    assert ("  B(128, 0, 0, 64, 128, 128, 1, 1, 0, 1) \\\n  B(512, 0, 0, 128, 128, 128, 2, 1, 1, 1) \\\n"
            "  B(-1, 0, 0, 128, 256, 128, 2, 1, 1, 1)\n") in out
    assert out.count("MSLK_FP8_ROWWISE_BUCKETS(B)") == 1
    # everything outside the generated block is untouched
    before = text.split("// BEGIN GENERATED BUCKETS")[0]
    assert out.startswith(before) and out.split("// END GENERATED BUCKETS")[1] == \
        re.sub(r"MSLK_FP8_SKINNY_AUTO_MAX_M \d+", "MSLK_FP8_SKINNY_AUTO_MAX_M 16", text.split("// END GENERATED BUCKETS")[1])


def test_every_tile_the_tuner_times_exists_in_both_modes():
    rows = table_rows()
    assert len(rows) == len(re.findall(r"\n\s*X\(", (ROOT / "csrc/gemm/kernels/fp8_rowwise_configs.h").read_text()))
    tiles = {(tm, tn, tk, cm, cn, coop, swap) for _, tm, tn, tk, cm, cn, coop, _, swap in rows}
    for t in tiles:
        assert {r[7] for r in rows if r[1:7] + (r[8],) == t} == {0, 1}, t
    assert any(r[8] for r in rows)  # MSLK_FP8_SWAP_AB_MAX_M > 0 needs a swap-AB row
    # current buckets name existing tiles
    text = (ROOT / "csrc/gemm/kernels/fp8_rowwise_buckets.h").read_text()
    block = text.split("// BEGIN GENERATED BUCKETS")[1].split("// END GENERATED BUCKETS")[0]
    found = list(re.finditer(r"B\((-?\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d), (\d)\)", block))
    assert found
    for m in found:
        assert any(r[1:7] == tuple(map(int, m.groups()[3:9])) and not r[8] for r in rows), m.group(0)  # tile, cluster, schedule
        assert int(m.group(10)) in (1, 2, 4, 8), m.group(0)
