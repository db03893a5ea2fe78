"""The CPU emulator of the Hopper attention kernel (tools/attention/emulate_fmha_sm90.py) on a few
cases, in every consumer order (one tile at a time; intra-warpgroup overlap with and without
ping-pong), persistent or one CTA per work tile: the kernel's tile schedule, TMA boxes, mbarrier / named-barrier protocol under random
interleavings and masking, mirrored in Python, against float64. The full sweep: run the script."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "tools" / "attention" / "emulate_fmha_sm90.py"
_spec = importlib.util.spec_from_file_location("emulate_fmha_sm90", _PATH)
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)

CASES = [
    dict(B=2, Mq=200, Mkv=330, H=1, K=64, Kv=64, kind=2, wl=70, wr=-1),
    dict(B=1, Mq=128, Mkv=384, H=1, K=64, Kv=64, kind=0, wl=-1, wr=62),
    dict(B=2, Mq=7, Mkv=7, H=2, K=128, Kv=128, kind=2, wl=-1, wr=-1, kv_bcast_head=True),
    dict(B=1, Mq=100, Mkv=1000, H=1, K=256, Kv=256, kind=2, wl=-1, wr=-1),
    dict(B=1, Mq=300, Mkv=768, H=1, K=64, Kv=64, kind=3, wl=3, wr=6,
         varlen=([0, 150, 151, 300], [0, 256, 512, 768]), seqlen_k=[200, 3, 256], kv_bcast_head=True),
    dict(B=1, Mq=260, Mkv=500, H=1, K=64, Kv=64, kind=0, wl=-1, wr=-1, varlen=([0, 0, 260], [7, 7, 400]),
         seqlen_k=[0, 93]),
]


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("order,wgs", [("tile", 2), ("overlap", 2), ("pingpong", 2), ("tile", 3), ("overlap", 3)])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_emulated_sm90_kernel(monkeypatch, order, wgs, persistent, case):
    """Every consumer order with two or three consumer warpgroups (ping-pong: two only)."""
    for d in emu.OVERLAP:
        monkeypatch.setitem(emu.OVERLAP, d, order != "tile")
        monkeypatch.setitem(emu.PINGPONG, d, order == "pingpong")
        monkeypatch.setitem(emu.PERSISTENT, d, persistent)
        monkeypatch.setitem(emu.WGS, d, wgs)
    err, stats = emu.run_case(np.random.default_rng(case), **CASES[case])
    assert err < 1e-9 and stats["tiles"] > 0


from bench.attention.tune_fmha_sm90 import tile_rows  # noqa: E402


def test_config_rows_parsed():
    rows = tile_rows()
    assert [r[0] for r in rows[:3]] == [64, 128, 256] and len(rows) > 3


def set_row(monkeypatch, row):
    """The emulator runs kTileCfgs row `row` for that row's head dim; returns the head dim."""
    d, bn, stages, pingpong, persistent, wgs = tile_rows()[row]
    monkeypatch.setitem(emu.TILE_CFG, d, (bn, stages))
    monkeypatch.setitem(emu.WGS, d, wgs)
    monkeypatch.setitem(emu.OVERLAP, d, True)  # every kernel row overlaps
    monkeypatch.setitem(emu.PINGPONG, d, bool(pingpong))
    monkeypatch.setitem(emu.PERSISTENT, d, bool(persistent))
    return d


@pytest.mark.parametrize("row", range(len(tile_rows())))
def test_emulated_sm90_kernel_every_tile_config(monkeypatch, row):
    """Each kTileCfgs row's tile schedule and barrier protocol, on the cases of its head dim."""
    d = set_row(monkeypatch, row)
    cases = [c for c in CASES if max(c["K"], c["Kv"]) == d]
    extra = dict(B=1, Mq=333, Mkv=517, H=2, K=d, Kv=d, kind=2, wl=-1, wr=-1)  # tails in both dims
    for i, case in enumerate(cases + [extra]):
        err, stats = emu.run_case(np.random.default_rng(100 + i), **case)
        assert err < 1e-9 and stats["tiles"] > 0, (row, case)


@pytest.mark.parametrize("num_m,lanes,group", [(1, 1, 1), (3, 5, 2), (4, 7, 3), (2, 6, 6), (5, 4, 9), (1, 9, 4)])
def test_work_index_is_a_bijection_longest_first_per_section(num_m, lanes, group):
    """Every (query tile, lane) once; inside a section, query tiles from the last to the first."""
    seen = [emu.work_index(t, num_m, lanes, group) for t in range(num_m * lanes)]
    assert sorted(seen) == [(m, j) for m in range(num_m) for j in range(lanes)]
    for t in range(1, len(seen)):
        (m0, j0), (m1, j1) = seen[t - 1], seen[t]
        if j0 // group == j1 // group:  # same section: tile index never goes back
            assert m1 >= m0
        else:  # sections in order
            assert j1 // group == j0 // group + 1 and m1 == 0


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("case", [
    dict(B=3, Mq=300, Mkv=260, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1),
    dict(B=1, Mq=300, Mkv=768, H=3, K=128, Kv=128, kind=0, wl=-1, wr=-1,
         varlen=([0, 150, 151, 300], [0, 256, 512, 768])),
])
def test_emulated_sm90_kernel_l2_sections(group, case):
    """Lanes in L2 sections smaller than the grid (the kernel's order for long key lanes)."""
    err, stats = emu.run_case(np.random.default_rng(7), group=group, **case)
    assert err < 1e-9 and stats["tiles"] > 0


@pytest.mark.parametrize("seed", range(6))
def test_packed_index_is_a_bijection_by_lane_longest_first(seed):
    """The packed tile list (varlen): every (sequence, head, query tile) of a non-empty sequence
    once, a lane's tiles together and from the last; the host's grid bound covers the list."""
    rng = np.random.default_rng(seed)
    nseq, H, bm = int(rng.integers(1, 9)), int(rng.integers(1, 4)), 64
    lens = [int(x) for x in rng.integers(0, 300, nseq)]
    lens[int(rng.integers(nseq))] = 0  # an empty sequence somewhere
    starts = np.concatenate([[0], np.cumsum(lens)]).tolist()
    p = dict(seqstart_q=starts, seqstart_k=starts, seqlen_k=None, Mq=starts[-1], Mkv=starts[-1], H=H,
             num_seqs=nseq)
    cum = emu.count_tiles(p, bm)
    seen = [emu.packed_index(t, cum, nseq, H) for t in range(H * cum[-1])]
    want = [(s, h, m) for s in range(nseq) for h in range(H) for m in range((lens[s] + bm - 1) // bm)]
    assert seen == want
    assert emu.launch_grid(p, max(1, (max(lens) + bm - 1) // bm), bm, persistent=False) >= H * cum[-1]


@pytest.mark.parametrize("persistent", [False, True])
def test_emulated_sm90_kernel_varlen_rectangle(monkeypatch, persistent):
    """Varlen problems of more than kPackedSeqs sequences walk the num_m x lanes rectangle."""
    monkeypatch.setattr(emu, "PACKED_SEQS", 1)
    for d in emu.PERSISTENT:
        monkeypatch.setitem(emu.PERSISTENT, d, persistent)
    for i in (4, 5):
        err, stats = emu.run_case(np.random.default_rng(i), **CASES[i])
        assert err < 1e-9 and stats["tiles"] > 0


@pytest.mark.parametrize("num_work,sms,n_kt", [(4, 3, 2), (7, 3, 11), (10, 3, 8), (140, 132, 16), (300, 132, 32),
                                               (2048, 132, 32), (512, 132, 32), (1024, 132, 64), (133, 132, 2),
                                               # fewer tiles than SMs: a tile over several CTAs
                                               (4, 132, 16), (2, 132, 40), (32, 132, 32), (1, 132, 200), (5, 132, 3),
                                               (100, 132, 2)])
def test_stream_k_items_cover_every_key_tile_once(num_work, sms, n_kt):
    """The stream-K walk: every (work tile, key tile) unit once; a split tile's parts lie on
    consecutive CTAs b0 < b1 < ...: the first keys as the last item of b0's tail (the merge), every
    later part as the first item of its CTA's tail (a partial), the parts in between whole ranges;
    the tail's units shared within one unit across the CTAs. With a round of tiles or more a split
    tile has two parts."""
    p = dict(seqstart_q=None, seqlen_k=None, mask_kind=0, wl=-1, wr=-1, Mkv=n_kt * 64 - 5)
    sk = emu.stream_k_plan(p, num_work, sms, 64, **emu.EMU_STREAMK)  # as MSLK_FMHA_SM90_STREAMK=1
    n_dp, n_sk, _, grid = sk
    assert n_sk > 0 and n_dp % grid == 0 and n_dp + n_sk == num_work
    assert grid == (min(sms, num_work * n_kt) if num_work < sms else sms)
    seen, parts, tail_units = {}, {}, []
    for b in range(grid):
        items, i = [], 0
        while (it := emu.stream_k_item(sk, b, grid, i)) is not None:
            items.append(it)
            i += 1
        whole = [it for it in items if it[2] == 2**31 - 1]
        assert [t for t, _, _ in whole] == list(range(b, n_dp, grid)) and items[:len(whole)] == whole
        tail = items[len(whole):]
        assert tail, "every CTA has a tail item (grid <= units)"
        tail_units.append(sum(hi - lo for _, lo, hi in tail))
        for j, (t, lo, hi) in enumerate(tail):
            assert 0 <= lo < hi <= n_kt
            if lo > 0:
                assert j == 0, "a partial is the first item of the tail"
            if lo == 0 and hi < n_kt:
                assert j == len(tail) - 1, "a merge is the last item of the tail"
            if lo > 0 and hi < n_kt:
                assert len(tail) == 1, "a part inside a tile is its CTA's whole tail"
            parts.setdefault(t, []).append((b, lo, hi))
        for t, lo, hi in items:
            for kt in range(lo, min(hi, n_kt)):
                assert (t, kt) not in seen
                seen[(t, kt)] = b
    assert len(seen) == num_work * n_kt
    assert max(tail_units) - min(tail_units) <= 1
    for t, ps in parts.items():
        ps.sort()
        assert [b for b, _, _ in ps] == list(range(ps[0][0], ps[0][0] + len(ps))), "consecutive CTAs"
        assert ps[0][1] == 0 and ps[-1][2] == n_kt
        assert all(ps[k][2] == ps[k + 1][1] for k in range(len(ps) - 1)), "contiguous key ranges"
        if num_work >= sms:
            assert len(ps) <= 2


def test_stream_k_plan_only_where_the_tail_wastes():
    """Split where the idle SMs of the last round waste more than kStreamKMinGain of the run and
    the tiles hold kStreamKMinKeyTiles (any idle SMs when forced), never when the tiles fill whole
    rounds, nor for masks, varlen or per-batch key lengths."""
    dense = dict(seqstart_q=None, seqlen_k=None, mask_kind=0, wl=-1, wr=-1, Mkv=4096)
    assert emu.stream_k_plan(dense, 160, 132, 128)[1] == 160  # 1.2 rounds: every tile split
    assert emu.stream_k_plan(dense, 300, 132, 128)[:2] == (132, 168)
    assert emu.stream_k_plan(dense, 2048, 132, 128)[1] == 0  # 15.5 rounds: 3% waste
    assert emu.stream_k_plan(dense, 2048, 132, 128, min_gain=0.0)[1] == 200
    assert emu.stream_k_plan(dense, 2112, 132, 128, min_gain=0.0)[1] == 0  # 16 whole rounds
    assert emu.stream_k_plan(dense, 160, 132, 128, min_gain=-1.0)[1] == 0  # MSLK_FMHA_SM90_STREAMK=0
    assert emu.stream_k_plan(dense | dict(Mkv=1920), 160, 132, 128)[1] == 0  # 15 key tiles: whole
    assert emu.stream_k_plan(dense | dict(Mkv=1920), 160, 132, 128, min_gain=0.0, min_key_tiles=2)[1] == 160
    # fewer tiles than SMs: split over min(units, SMs) CTAs where the idle SMs count for 5% or more
    assert emu.stream_k_plan(dense, 32, 132, 128) == (0, 32, 32, 132)
    assert emu.stream_k_plan(dense, 130, 132, 128)[1] == 0  # 2 of 132 SMs idle
    assert emu.stream_k_plan(dense, 120, 132, 128) == (0, 120, 32, 132)
    assert emu.stream_k_plan(dense | dict(Mkv=256), 4, 132, 128, **emu.EMU_STREAMK) == (0, 4, 2, 8)
    # by default a tile takes at most about sqrt(2 n_kt) parts (a chain merge reads one partial a part)
    assert [emu.stream_k_max_parts(n) for n in (2, 8, 16, 32, 64, 128)] == [2, 4, 5, 8, 11, 16]
    assert emu.stream_k_plan(dense | dict(Mkv=128 * 128), 1, 132, 128) == (0, 1, 128, 16)
    assert emu.stream_k_plan(dense | dict(Mkv=128 * 128), 1, 132, 128, **emu.EMU_STREAMK) == (0, 1, 128, 128)
    assert emu.stream_k_plan(dense | dict(Mkv=128 * 128), 20, 132, 128) == (0, 20, 128, 132)
    assert emu.stream_k_plan(dense, 32, 132, 128, min_gain=-1.0) == (32, 0, 0, 32)
    for change in (dict(mask_kind=1), dict(wl=100), dict(seqlen_k=[1]), dict(seqstart_q=[0, 1]), dict(Mkv=128)):
        assert emu.stream_k_plan(dense | change, 160, 132, 128)[1] == 0, change


@pytest.mark.parametrize("order", ["tile", "overlap", "pingpong"])
@pytest.mark.parametrize("case", [
    dict(B=1, Mq=200, Mkv=700, H=7, K=64, Kv=64, kind=0, wl=-1, wr=-1),
    dict(B=1, Mq=130, Mkv=1000, H=5, K=128, Kv=128, kind=0, wl=-1, wr=-1),
    dict(B=2, Mq=250, Mkv=300, H=1, K=256, Kv=256, kind=0, wl=-1, wr=-1, kv_bcast_head=True),
    # fewer work tiles than the 3 emulated SMs: one tile over three CTAs (two merges), two over three
    dict(B=1, Mq=100, Mkv=1000, H=1, K=64, Kv=64, kind=0, wl=-1, wr=-1),
    dict(B=1, Mq=130, Mkv=600, H=1, K=128, Kv=128, kind=0, wl=-1, wr=-1),
])
def test_emulated_sm90_kernel_stream_k(monkeypatch, order, case):
    """Persistent CTAs that split the tail's tiles by keys: partials and merges against float64."""
    for d in emu.OVERLAP:
        monkeypatch.setitem(emu.OVERLAP, d, order != "tile")
        monkeypatch.setitem(emu.PINGPONG, d, order == "pingpong")
        monkeypatch.setitem(emu.PERSISTENT, d, True)
        monkeypatch.setitem(emu.WGS, d, 2)
    err, stats = emu.run_case(np.random.default_rng(3), **case)
    assert err < 1e-9 and stats["partials"] > 0 and stats["merges"] == stats["partials"]
    if case["Mq"] == 100:
        assert stats["partials"] == 2 * 2  # two later parts, in each of the two consumer warpgroups


# ---- the per-warpgroup key-tile trim (args.trim) of the rows without ping-pong ---------------------
NO_PINGPONG_ROWS = [i for i, r in enumerate(tile_rows()) if r[3] == 0]

TRIM_CASES = {
    # BM 256 / 192 tiles on the diagonal: the upper warpgroups end 1-3 key tiles before the tile's last
    "causal_top_left": dict(B=1, Mq=600, Mkv=600, H=1, K=64, Kv=64, kind=1, wl=-1, wr=-1),
    # rows below lq - lk see no key: a warpgroup with n_run = 0 beside one that runs
    "causal_bottom_right_more_queries": dict(B=1, Mq=520, Mkv=150, H=2, K=64, Kv=64, kind=2, wl=-1, wr=-1),
    "local_window": dict(B=1, Mq=500, Mkv=700, H=2, K=64, Kv=64, kind=0, wl=90, wr=20),
    # every warpgroup of every tile holds rows (Mq a multiple of both BM): nothing to trim
    "dense": dict(B=1, Mq=768, Mkv=300, H=2, K=64, Kv=64, kind=0, wl=-1, wr=-1),
    "varlen_causal": dict(B=1, Mq=700, Mkv=690, H=2, K=64, Kv=64, kind=2, wl=-1, wr=-1,
                          varlen=([0, 300, 301, 700], [0, 280, 290, 690])),
}


def _use_row(monkeypatch, row, trim):
    """kTileCfgs row `row` for its head dim, the emulator's TRIM = trim, skewed interleavings, and 2 emulated
    SMs: the persistent rows' CTAs walk several work tiles (the ring position carried across)."""
    d = set_row(monkeypatch, row)
    monkeypatch.setattr(emu, "TRIM", trim)
    monkeypatch.setattr(emu, "SKEW", 2.0)
    monkeypatch.setattr(emu, "SMS", 2)
    return tile_rows()[row]


def test_no_pingpong_rows_are_the_d64_rows():
    rows = tile_rows()
    assert NO_PINGPONG_ROWS and all(rows[i][0] == 64 for i in NO_PINGPONG_ROWS)
    assert {rows[i][4] for i in NO_PINGPONG_ROWS} == {0, 1}  # persistent and one CTA per tile


@pytest.mark.parametrize("trim", [True, False])
@pytest.mark.parametrize("name", list(TRIM_CASES))
@pytest.mark.parametrize("row", NO_PINGPONG_ROWS)
def test_emulated_sm90_kernel_trim(monkeypatch, row, name, trim):
    """Each warpgroup runs the key tiles up to its rows' last key and only waits for and releases
    the stages of the rest (the emulator checks that no skipped tile holds a key its rows see, the
    barrier phases, stage overwrites, every use released at exit, and the outputs)."""
    persistent = _use_row(monkeypatch, row, trim)[4]
    err, stats = emu.run_case(np.random.default_rng(row), **TRIM_CASES[name])
    assert err < 1e-9 and stats["tiles"] > 0
    if persistent:
        assert stats["max_cta_tiles"] > 1, "a persistent CTA walks several work tiles"
    runs = stats["runs"].values()
    if not trim or name == "dense":
        assert stats["skipped"] == 0 and stats["idle_wgs"] == 0
        assert all(n == nt for r in runs for n, nt in r.values())
        return
    assert stats["skipped"] > 0
    last = max(max(r) for r in runs)
    if name == "causal_top_left":  # the first warpgroup trimmed where the last runs the whole tile
        assert any(r[0][0] < r[0][1] and r[last][0] == r[last][1] for r in runs)
    if name == "causal_bottom_right_more_queries":
        assert any(min(n for n, _ in r.values()) == 0 < max(n for n, _ in r.values()) for r in runs)
    # trimmed only from the end, never past the tile
    assert all(0 <= n <= nt for r in runs for n, nt in r.values())


@pytest.mark.parametrize("trim", [True, False])
def test_emulated_sm90_kernel_trim_stream_k(monkeypatch, trim):
    """Dense, persistent BM 256 with 130 query rows: the warpgroup of rows 192..255 (all past lq)
    runs no key tile, also in the stream-K parts that leave partials and merge them."""
    _use_row(monkeypatch, 0, trim)
    monkeypatch.setattr(emu, "SMS", 3)
    err, stats = emu.run_case(np.random.default_rng(5), B=1, Mq=130, Mkv=700, H=5, K=64, Kv=64, kind=0, wl=-1, wr=-1)
    assert err < 1e-9 and stats["partials"] > 0 and stats["merges"] == stats["partials"]
    assert stats["max_cta_tiles"] > 1
    if trim:
        assert stats["idle_wgs"] > 0 and all(r[3][0] == 0 and r[2][0] == r[2][1] for r in stats["runs"].values())
    else:
        assert stats["skipped"] == 0


def test_trim_off_on_pingpong_rows(monkeypatch):
    """Rows with ping-pong never trim (their warpgroups take turns: equal GEMM counts)."""
    row = next(i for i, r in enumerate(tile_rows()) if r[3] == 1)
    d = _use_row(monkeypatch, row, True)[0]
    err, stats = emu.run_case(np.random.default_rng(1), B=1, Mq=300, Mkv=300, H=1, K=d, Kv=d, kind=1, wl=-1, wr=-1)
    assert err < 1e-9 and stats["skipped"] == 0 and stats["runs"]


# A warpgroup with n_run = 0 in tiles of more key tiles than stages (the skip loop wraps the ring).
FAULT_CASE = dict(B=1, Mq=700, Mkv=1100, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1,
                  varlen=([0, 70, 700], [0, 1000, 1100]))


@pytest.mark.parametrize("fault", ["no_full_wait", "release_before_full", "no_skip_release", "no_release_q", "short"])
@pytest.mark.parametrize("row", NO_PINGPONG_ROWS)
def test_emulator_catches_trim_faults(monkeypatch, row, fault):
    """Protocol faults planted in the trim's code: the emulator must fail on every seed (a release
    before the load landed, a deadlock, barriers left mid-phase at exit, a skipped tile with keys)."""
    _use_row(monkeypatch, row, True)
    err, stats = emu.run_case(np.random.default_rng(0), **FAULT_CASE)
    assert err < 1e-9 and stats["idle_wgs"] > 0  # the case as the kernel runs it
    monkeypatch.setattr(emu, "TRIM_FAULT", fault)
    caught = []
    for seed in range(3):
        try:
            emu.run_case(np.random.default_rng(seed), **FAULT_CASE)
            caught.append(False)
        except AssertionError:
            caught.append(True)
    assert all(caught), caught


@pytest.mark.parametrize("fault", ["no_full_wait", "release_before_full"])
@pytest.mark.parametrize("row", NO_PINGPONG_ROWS)
def test_early_release_lands_a_use_ahead(monkeypatch, row, fault):
    """Without the released-after-landed rule check, the phase checks alone still catch an early
    release of a skipped stage: in some interleavings a warpgroup arrives a use ahead (an arrival
    for use u + 1 while the others still hold use u, or a waiter two phases behind) -- a race, so
    any of six seeds."""
    _use_row(monkeypatch, row, True)
    monkeypatch.setattr(emu, "CHECK_LANDED", False)
    monkeypatch.setattr(emu, "TRIM_FAULT", fault)
    msgs = []
    for seed in range(6):
        try:
            emu.run_case(np.random.default_rng(seed), **FAULT_CASE)
        except AssertionError as e:
            msgs.append(str(e))
    assert any("arrival for use" in m or "parity aliasing" in m for m in msgs), msgs
