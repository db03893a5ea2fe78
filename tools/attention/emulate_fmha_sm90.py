"""CPU emulation of csrc/attention/kernels/fmha_fwd_sm90_kernel.cuh and its work split
(fmha_fwd_sm90_work.h) and tensor maps (fmha_fwd_sm90_launch.cuh); no GPU needed.

What it mirrors from the kernel, line by line:
  * the work split: work_of / block_of / band_of / key_tiles, persistent CTAs walking work tiles
    (few emulated SMs, so every CTA walks several) with the K/V ring position and the Q buffer's
    use count carried across tiles, or one CTA per work tile;
  * the tensor maps of encode_map (4-d [batches][heads][rows][cols], stride-0 modes become extent 1
    with a 0 coordinate multiplier) and TMA box semantics: a [box_rows][64] box at coordinates
    (c0, c1, c2, c3), out-of-bounds elements read as zero, written with the 128-byte swizzle at the
    kernel's smem offsets (cb * rows * 64 (+ stage * BN * D)) -- test/cpp/test_fmha_sm90_layouts.cu
    proves that CuTe's GMMA layouts read exactly these offsets;
  * the mbarrier protocol (full: 1 arrival + transaction bytes; empty: 8 consumer-warp arrivals;
    parity waits; the Q buffer's full / empty pair) and the ping-pong named barriers under random
    interleavings of the producer thread, the asynchronous TMA
    completions and the two consumer warpgroups -- checking no deadlock, that a parity wait is
    never more than one phase behind (parity aliasing), that every arrival lands in the phase of
    the use it means (no warp arrives a use ahead or behind), that at a CTA's exit every barrier
    has completed one phase per use and holds no half-arrived phase, that no stage is overwritten
    while a consumer reads it and that every consumer reads the tile it expects;
  * the per-warpgroup key-tile trim of the rows without ping-pong (TRIM): a warpgroup
    runs the work tile's key tiles up to the last key its rows may see (n_run) and only waits for
    and releases the stages of the rest -- checking that no skipped key tile holds a key any of
    its rows may see; stats count the skipped (warpgroup, key tile) pairs and the warpgroups that
    run none;
  * the consumer math with the fragment ownership the layout checker proves (row = 64*wg +
    16*warp + lane/4 + 8*r, col = 8*nb + 2*(lane%4) + v): scale to log2, need_mask and the
    per-element band test, online softmax with quad max/sum, the V tail zeroing, the epilogue
    (each output element written exactly once, LSE index) -- against a float64 reference.
K/V rows outside every key lane and Q rows outside every query block hold NaN, so any read of
them that leaks into a result shows up.
Run: python3 tools/attention/emulate_fmha_sm90.py   (a few minutes)
"""
import itertools
import math
import sys

import numpy as np

LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453
UNB = 1 << 40
COLB = 64
TILE_CFG = {64: (64, 8), 128: (128, 2), 256: (64, 2)}  # d -> (BN, stages), as kTileCfgs
OVERLAP = {64: True, 128: True, 256: True}  # the kernel's order; main() also models one tile at a time
PINGPONG = {64: False, 128: True, 256: True}  # kTileCfgs' pingpong (only with overlap)
PERSISTENT = {64: True, 128: True, 256: True}  # kTileCfgs' persistent
WGS = {64: 4, 128: 2, 256: 2}  # kTileCfgs' wgs: consumer warpgroups, BM = 64 * wgs query rows a tile
SMS = 3  # emulated SM count: few, so that CTAs walk several work tiles
TRIM = True  # the kernel always trims: rows without ping-pong trim each warpgroup's key tiles
# Protocol faults for the tests to plant in the trim's code (None: the kernel as it is):
# "no_full_wait": the skipped tiles' stages released without waiting for their loads;
# "release_before_full": released first, then their loads waited for; "no_skip_release": the
# skipped tiles' stages never released; "no_release_q": a warpgroup that runs no key tile keeps
# the Q buffer; "short": one key tile fewer than n_run.
TRIM_FAULT = None
# Skewed interleavings: each CTA draws a speed for the producer, every consumer warpgroup and the TMA
# completions (log-normal, sigma SKEW) and picks the next step by speed, so that one warpgroup runs
# far ahead of another more often than under a uniform pick (0: uniform).
SKEW = 0.0
# The kernel's rule that a consumer warp releases a use of a buffer only after that use's load has
# landed (its full barrier's phase completed). Stricter than the protocol needs -- an arrival in the
# right phase is enough -- but what keeps every arrival in the right phase; False leaves the phase
# checks alone to find the interleavings where an early release lands a use ahead.
CHECK_LANDED = True


def tma_offset(row, col, rows):
    cb, c = col // 64, col % 64
    return cb * rows * 64 + row * 64 + ((c // 8) ^ (row % 8)) * 8 + c % 8


# ---- tensor maps and TMA ------------------------------------------------------------------------
def encode_map(gmem, cols, rows, heads, batches, s_row, s_head, s_batch, box_rows):
    st = [s_row, s_head, s_batch]
    ext = [rows, heads, batches]
    dims = [cols] + [ext[i] if st[i] != 0 else 1 for i in range(3)]
    strides = [1] + [st[i] if st[i] != 0 else 0 for i in range(3)]  # element strides (extent-1: never used)
    return dict(g=gmem, dims=dims, strides=strides, box=(COLB, box_rows), hm=int(s_head != 0), bm=int(s_batch != 0))


def tma_load(m, smem, dst, c0, c1, c2, c3):
    """One box: smem[dst + swizzled(r, c)] = tensor[c3][c2][c1 + r][c0 + c] or 0 out of bounds."""
    bc, br = m["box"]
    d, s = m["dims"], m["strides"]
    r = np.arange(br)[:, None]
    c = np.arange(bc)[None, :]
    ok = ((0 <= c1 + r) & (c1 + r < d[1]) & (0 <= c0 + c) & (c0 + c < d[0])
          & (0 <= c2 < d[2]) & (0 <= c3 < d[3]))
    src = (c1 + r) * s[1] + c2 * s[2] + c3 * s[3] + c0 + c
    vals = np.where(ok, m["g"][np.where(ok, src, 0)], 0.0)
    smem[dst + r * 64 + ((c // 8) ^ (r % 8)) * 8 + c % 8] = vals
    return bc * br * 2  # bytes (out-of-bounds elements count too)


def read_tile(smem, base, rows, D):
    """The (rows x D) tile at smem[base:] as the wgmma sees it (offsets proven by the layout checker)."""
    r = np.arange(rows)[:, None]
    c = np.arange(D)[None, :]
    return smem[base + (c // 64) * rows * 64 + r * 64 + (((c % 64) // 8) ^ (r % 8)) * 8 + c % 8]


# ---- mbarrier ----------------------------------------------------------------------------------
class MBar:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_flip(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx=0, use=None):
        """use: the phase (use of the buffer) the arriving thread means; it must be the current one:
        an arrival a use ahead would complete the phase before the others are done with it."""
        assert self.pending > 0
        assert use is None or use == self.phase, f"arrival for use {use} on a barrier at phase {self.phase}"
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_flip()

    def complete_tx(self, b):
        self.tx -= b
        assert self.tx >= 0 or self.pending > 0
        self._maybe_flip()

    def ready(self, parity, waiter_phase):
        """try_wait.parity: true iff the phase with this parity has completed. waiter_phase is the
        phase number the waiter means (-1: the one before the first); parity aliasing would occur
        if the barrier were not exactly 0 or 1 phases past it."""
        assert (waiter_phase & 1) == parity, "kernel parity != parity of the phase it means"
        assert self.phase - waiter_phase in (0, 1), \
            f"parity aliasing: barrier at phase {self.phase}, waiter means phase {waiter_phase}"
        return (self.phase & 1) != parity


class NamedBar:
    """bar.sync / bar.arrive with a thread count, at warpgroup granularity (128 threads a call).
    A generation completes when `count` threads have arrived; bar.sync waits for its generation."""

    def __init__(self, count):
        self.count, self.arrived, self.gen = count, 0, 0

    def arrive(self):
        self.arrived += 128
        assert self.arrived <= self.count
        g = self.gen
        if self.arrived == self.count:
            self.arrived, self.gen = 0, self.gen + 1
        return g

    def sync(self):  # generator: arrive, then wait for the generation to complete
        g = self.arrive()
        while self.gen == g:
            yield


def allowed_block(lq, lk, kind, wl, wr):
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    shift = lk - lq if kind in (2, 3) else 0
    d = j - i - shift
    a = np.ones((lq, lk), bool)
    if kind in (1, 2):
        a &= d <= 0
    if wl >= 0:
        a &= d >= -wl
    if wr >= 0:
        a &= d <= wr
    return a


# ---- the kernel's work split --------------------------------------------------------------------
def block_of(p, s):
    if p["seqstart_q"] is not None:
        bq, q0 = 0, p["seqstart_q"][s]
        lq = p["seqstart_q"][s + 1] - q0
        k0 = p["seqstart_k"][s]
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["seqstart_k"][s + 1] - k0
    else:
        bq, q0, lq, k0 = s, 0, p["Mq"], 0
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["Mkv"]
    ok = q0 >= 0 and k0 >= 0
    lq = max(0, min(lq, p["Mq"] - max(q0, 0)))
    extent = p["bt_cols"] * p["page_size"] if p.get("block_table") is not None else p["Mkv"]  # paged: logical keys
    lk = max(0, min(lk, extent - max(k0, 0)))
    return bq, q0, lq, k0, lk, ok


def band_of(p, lq, lk):
    kind = p["mask_kind"]
    causal, br = kind in (1, 2), kind in (2, 3)
    shift = lk - lq if br else 0
    hi = 0 if causal else UNB
    if p["wr"] >= 0 and p["wr"] < hi:
        hi = p["wr"]
    lo = -p["wl"] if p["wl"] >= 0 else -UNB
    return shift, lo, hi


def key_tiles(band, r0, r1, lk, bn):
    shift, lo, hi = band
    jb, je = r0 + shift + lo, r1 + shift + hi + 1
    jb = min(max(jb, 0), lk)
    je = min(max(je, 0), lk)
    n_begin = jb // bn * bn
    n_tiles = (je - n_begin + bn - 1) // bn if je > jb else 0
    return n_begin, n_tiles


MAX_DRIFT = 8.0  # kMaxDrift: log2 units a row max may pass its softmax reference before it moves


def fast_exp2(x):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.exp2(x)


def work_index(t, num_m, lanes, group):
    """The kernel's work_index: work tile t -> (query tile index from the end, lane), in sections
    of `group` lanes, the last section possibly smaller."""
    per = num_m * group
    sec, local = divmod(t, per)
    gs = min(group, lanes - sec * group)
    return local // gs, sec * group + local % gs


PACKED_SEQS = 128  # kPackedSeqs: varlen problems of at most this many sequences walk a packed tile list


def packed_tiles(p, persistent):
    """Args::packed: varlen, at most PACKED_SEQS sequences, a one-CTA-per-tile row (kPackedList)."""
    return not persistent and p["seqstart_q"] is not None and p["num_seqs"] <= PACKED_SEQS


def count_tiles(p, bm):
    """The kernel's count_tiles: cum[s] = query tiles (of live blocks) of sequences 0..s-1."""
    cum = [0]
    for s in range(p["num_seqs"]):
        _, _, lq, _, _, ok = block_of(p, s)
        cum.append(cum[-1] + ((lq + bm - 1) // bm if ok else 0))
    return cum


def packed_index(t, cum, num_seqs, H):
    """The kernel's packed_index: packed tile t -> (sequence, head, query tile index from the end)."""
    u = t // H
    lo, hi = 0, num_seqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cum[mid] <= u:
            lo = mid
        else:
            hi = mid - 1
    n, local = cum[lo + 1] - cum[lo], t - cum[lo] * H
    return lo, local // n, local % n


def work_of(p, t, num_m, bm, bn, cum=None):
    BM = bm
    if cum is not None:
        s, h, m_from_end = packed_index(t, cum, p["num_seqs"], p["H"])
        bq, q0, lq, k0, lk, ok = block_of(p, s)
        r0 = ((lq + BM - 1) // BM - 1 - m_from_end) * BM
    else:
        m_from_end, lane = work_index(t, num_m, p["H"] * p["num_seqs"], p["group"])
        r0 = (num_m - 1 - m_from_end) * BM
        h, s = lane % p["H"], lane // p["H"]
        bq, q0, lq, k0, lk, ok = block_of(p, s)
    live = ok and r0 < lq
    band = band_of(p, lq, lk)
    n_begin, n_tiles = key_tiles(band, r0, min(r0 + BM, lq) - 1, lk, bn) if live else (0, 0)
    return dict(h=h, s=s, r0=r0, bq=bq, q0=q0, lq=lq, k0=k0, lk=lk, live=live, band=band,
                n_begin=n_begin, n_tiles=n_tiles)


def num_work_of(p, num_m, bm, persistent):
    """Work tiles the kernel walks, and the cum table when it walks a packed list."""
    if packed_tiles(p, persistent):
        cum = count_tiles(p, bm)
        return p["H"] * cum[-1], cum
    return num_m * p["H"] * p["num_seqs"], None


def launch_grid(p, num_m, bm, persistent):
    """The host's grid: every rectangle tile, or the packed list's usual bound; persistent: <= SMs."""
    n = num_m * p["H"] * p["num_seqs"]
    if packed_tiles(p, persistent):
        n = min(n, (p["Mq"] // bm + p["num_seqs"]) * p["H"])
    return min(n, SMS) if persistent else n


STREAMK_MIN_GAIN = 0.05  # kStreamKMinGain
STREAMK_MIN_KEY_TILES = 16  # kStreamKMinKeyTiles
# The emulated launches split every tail they can (MSLK_FMHA_SM90_STREAMK=1): the small cases here
# have short key lanes, which the default policy would run whole.
EMU_STREAMK = dict(min_gain=0.0, min_key_tiles=2, cap_parts=False)


def stream_k_max_parts(n_kt):
    """The kernel's stream_k_max_parts: about sqrt(2 n_kt), at least 2."""
    k = 2
    while (k + 1) ** 2 <= 2 * n_kt:
        k += 1
    return k


def stream_k_plan(p, num_work, sms, bn, min_gain=STREAMK_MIN_GAIN, min_key_tiles=STREAMK_MIN_KEY_TILES,
                  cap_parts=True):
    """The kernel's stream_k_plan: (n_dp, n_sk, n_kt, grid); n_sk = 0 when every tile runs whole."""
    whole = (num_work, 0, 0, min(num_work, sms))
    uniform = (p["seqstart_q"] is None and p["seqlen_k"] is None and p["mask_kind"] == 0
               and p["wl"] < 0 and p["wr"] < 0)
    n_kt = (p["Mkv"] + bn - 1) // bn
    if not uniform or min_gain < 0 or sms <= 0 or num_work <= 0 or n_kt < max(2, min_key_tiles):
        return whole
    n_sk, grid = num_work, sms
    if num_work > sms:  # the last round part-filled
        rounds = -(-num_work // sms)
        if num_work % sms == 0 or rounds - num_work / sms < min_gain * rounds:
            return whole
        n_sk = sms + num_work % sms if num_work >= 2 * sms else num_work
    else:  # one round: every tile split over as many SMs as there are units
        units = num_work * min(n_kt, stream_k_max_parts(n_kt)) if cap_parts else num_work * n_kt
        grid = min(units, sms)
        if grid <= num_work or 1.0 - num_work / grid < min_gain:
            return whole
    return num_work - n_sk, n_sk, n_kt, grid


def stream_k_item(sk, b, grid, i):
    """The kernel's stream_k_item: (t, kb_lo, kb_hi) of CTA b's item i, or None past the last."""
    n_dp, n_sk, n_kt = sk[:3]
    nd = (n_dp - b + grid - 1) // grid if n_dp > b else 0
    if i < nd:
        return b + i * grid, 0, 2**31 - 1
    if n_sk == 0:
        return None
    units = n_sk * n_kt
    u0, u1 = units * b // grid, units * (b + 1) // grid
    tile = u0 // n_kt + (i - nd)
    first = tile * n_kt
    if first >= u1:
        return None
    return n_dp + tile, max(u0 - first, 0), min(u1 - first, n_kt)


def kernel_cta(p, a, D, num_m, grid, bx, rng, stats):
    """One CTA: work tiles bx, bx + grid, ... with the K/V ring position g and the Q use count qn
    carried across them, as in the kernel."""
    BN, S = TILE_CFG[D]
    NW = WGS[D]
    BM = 64 * NW
    num_work, cum = num_work_of(p, num_m, BM, PERSISTENT[D])
    if PERSISTENT[D]:  # whole tiles, then the stream-K tail (stream_k_item)
        items = []
        while (it := stream_k_item(p["sk"], bx, grid, len(items))) is not None:
            items.append(it)
    else:
        items = [(t, 0, 2**31 - 1) for t in range(bx, num_work, grid)]
    tiles = [t for t, _, _ in items]
    works = []
    for t, kb_lo, kb_hi in items:
        w = work_of(p, t, num_m, BM, BN, cum)
        w["n_begin"] += kb_lo * BN
        w["n_tiles"] = min(w["n_tiles"], kb_hi) - kb_lo
        w["kb_lo"], w["kb_hi"] = kb_lo, kb_hi
        works.append(w)
    stats["tiles"] += sum(w["n_tiles"] for w in works)
    stats["max_cta_tiles"] = max(stats["max_cta_tiles"], sum(w["n_tiles"] > 0 for w in works))

    sq = np.full(BM * D, np.nan)
    sk = np.full(S * BN * D, np.nan)
    sv = np.full(S * BN * D, np.nan)
    full_q, empty_q = MBar(1), MBar(4 * NW)  # one arrival per consumer warp
    full_k, full_v = [MBar(1) for _ in range(S)], [MBar(1) for _ in range(S)]
    empty_k, empty_v = [MBar(4 * NW) for _ in range(S)], [MBar(4 * NW) for _ in range(S)]
    stage_tile = {"q": [None], "k": [None] * S, "v": [None] * S}  # what a buffer holds (None: in flight)
    readers = {(kd, st): 0 for kd in "kv" for st in range(S)} | {("q", 0): 0}
    turn = [NamedBar(256), NamedBar(256)]  # kBarTurn + warpgroup
    pingpong = PINGPONG[D] and OVERLAP[D]
    assert NW == 2 or not pingpong, "ping-pong takes turns between two warpgroups"
    issuing = []  # warpgroups inside a turn region (ping-pong: at most one)

    # ---- producer as a generator: yields while blocked; TMA completions are queued as events
    pending_tx = []

    def issue(bar, kind, st, tag, loads):
        tot = 0
        assert readers[(kind, st)] == 0, f"TMA overwrites {kind} stage {st} while a consumer reads it"
        for (m, buf, dst, c) in loads:
            tot += tma_load(m, buf, dst, *c)
        stage_tile[kind][st] = None
        pending_tx.append((bar, tot, kind, st, tag))

    def producer():
        g = qn = 0
        for t, w in zip(tiles, works):
            if w["n_tiles"] == 0:
                continue
            h, bq = w["h"], w["bq"]
            while not empty_q.ready((qn & 1) ^ 1, qn - 1):
                yield
            full_q.arrive(BM * D * 2, use=qn)
            issue(full_q, "q", 0, t, [(a["tq"], sq, cb * BM * 64,
                                       (cb * 64, w["q0"] + w["r0"], h * a["tq"]["hm"], bq * a["tq"]["bm"]))
                                      for cb in range(D // 64)])
            qn += 1
            for it in range(w["n_tiles"]):
                st, ph = g % S, (g // S) & 1
                row = w["k0"] + w["n_begin"] + it * BN
                for kind, full, empty, m, buf in (("k", full_k, empty_k, a["tk"], sk), ("v", full_v, empty_v, a["tv"], sv)):
                    while not empty[st].ready(ph ^ 1, g // S - 1):
                        yield
                    full[st].arrive(BN * D * 2, use=g // S)
                    issue(full[st], kind, st, g, [(m, buf, st * BN * D + cb * BN * 64,
                                                   (cb * 64, row, h * m["hm"], bq * m["bm"])) for cb in range(D // 64)])
                g += 1

    out, lse, written = p["out"], p["lse"], p["written"]
    scale_log2 = p["scale"] * LOG2E
    results = {}

    def consumer(wg):
        rows = np.arange(64) + 64 * wg          # tile rows of this warpgroup
        cols = np.arange(BN)
        quad = (cols % 8) // 2                  # lane % 4 owning a column
        ctr = dict(g=0, qn=0)
        for t, w in zip(tiles, works):
            if not w["live"]:
                continue
            r0, lq, lk, h, n_begin, n_tiles = w["r0"], w["lq"], w["lk"], w["h"], w["n_begin"], w["n_tiles"]
            lo, hi, shift = w["band"][1], w["band"][2], w["band"][0]
            dlo, dhi = max(lo + shift, -2**31), min(hi + shift, 2**31 - 1)  # the kernel's int32 clamp
            wr0 = r0 + 64 * wg
            clamp32 = lambda x: max(min(x, 2**31 - 1), -2**31)  # noqa: E731
            n0_lo, n0_hi = clamp32(dlo + wr0 + 63), clamp32(dhi + wr0 - BN + 1)  # the kernel's per-tile bounds
            c = dict(m_i=np.full(64, -np.inf), l_part=np.zeros((64, 4)))  # l: per row, per quad lane
            g = ctr["g"]
            # The kernel's trim (rows without ping-pong; used by the overlapped order only): the key
            # tiles up to the last key any of this warpgroup's rows may see.
            n_run = n_tiles
            if not PINGPONG[D]:
                last_row = min(wr0 + 63, lq - 1)
                last_key = min(last_row + dhi, lk - 1)
                span = -1 if last_row < wr0 else last_key - n_begin
                if TRIM:
                    n_run = 0 if span < 0 else min(n_tiles, span // BN + 1)
            if OVERLAP[D] and n_tiles > 0:
                if TRIM_FAULT == "short" and n_run > 0:
                    n_run -= 1
                # a skipped key tile must hold no key any of this warpgroup's (live) rows may see
                qi = (wr0 + np.arange(64))[:, None]
                for it in range(n_run, n_tiles):
                    kj = (n_begin + it * BN + cols)[None, :]
                    d = kj - qi
                    seen = (qi < lq) & (kj < lk) & (d >= dlo) & (d <= dhi)
                    assert not seen.any(), f"warpgroup {wg} skips key tile {it} (n_run {n_run}) with keys it sees"
                stats["skipped"] += n_tiles - n_run
                stats["idle_wgs"] += n_run == 0
                stats["runs"].setdefault((t, w["kb_lo"]), {})[wg] = (n_run, n_tiles)

            def wait_full(bar, it):
                gi = g + it
                while not bar.ready((gi // S) & 1, gi // S):
                    yield

            def issue_qk(it):  # the wgmma reads K some time before its wait: hold the stage until then
                st = (g + it) % S
                assert stage_tile["k"][st] == g + it, f"K stage {st} holds {stage_tile['k'][st]}, expected {g + it}"
                readers[("k", st)] += 1
                return read_tile(sk, st * BN * D, BN, D)

            def release(empty, full, use):  # one arrival per warp of this warpgroup
                # the kernel's rule: a consumer releases a use only once that use's load has landed
                assert not CHECK_LANDED or full.phase > use, \
                    f"use {use} released before its load landed (full at phase {full.phase})"
                for _ in range(4):
                    empty.arrive(use=use)

            def finish_qk(it, K):  # after wgmma.wait: release the stage (4 warps of this warpgroup)
                st = (g + it) % S
                readers[("k", st)] -= 1
                release(empty_k[st], full_k[st], (g + it) // S)
                with np.errstate(invalid="ignore"):
                    return Q @ K.T

            def issue_pv(it):
                st, n0 = (g + it) % S, n_begin + it * BN
                assert stage_tile["v"][st] == g + it, f"V stage {st} holds {stage_tile['v'][st]}, expected {g + it}"
                if n0 + BN > lk:  # the tail zeroing, then fence + warpgroup barrier
                    for idx in range((lk - n0) * D, BN * D):
                        sv[st * BN * D + tma_offset(idx // D, idx % D, BN)] = 0.0
                readers[("v", st)] += 1
                return read_tile(sv, st * BN * D, BN, D)

            def finish_pv(it):
                st = (g + it) % S
                readers[("v", st)] -= 1
                release(empty_v[st], full_v[st], (g + it) // S)

            def release_q():
                readers[("q", 0)] -= 1
                release(empty_q, full_q, ctr["qn"])

            def softmax(Sm, n0):  # returns (exp2(scale * S - m), alpha); advances m_i, l_part
                need_mask = n0 > lk - BN or n0 < n0_lo or n0 > n0_hi
                d = (n0 + cols)[None, :] - (r0 + rows)[:, None]  # kj - qi
                assert np.abs(d).max() < 2**31, "kj - qi overflows int32"
                if need_mask:  # scaled first, then masked; f = 1
                    kj = (n0 + cols)[None, :]
                    x = np.where((kj >= lk) | (d < dlo) | (d > dhi), -np.inf, Sm * scale_log2)
                    f = 1.0
                else:  # the skip must be exact: every element of the warpgroup's 64 rows allowed
                    stats["unmasked"] += 1
                    dd = d - shift
                    assert n0 + BN <= lk and (dd >= lo).all() and (dd <= hi).all(), "need_mask skipped a masked element"
                    x, f = Sm, scale_log2  # raw S; the scale folds into the exponent
                # quad max = row max over the 4 lanes' columns; max(f * x) = f * min(x) for f < 0
                mx = (np.max(x, axis=1) if f >= 0 else np.min(x, axis=1)) * f
                move = mx > c["m_i"] + MAX_DRIFT  # the lazy reference max (kMaxDrift)
                m_ref = np.where(move, mx, c["m_i"])
                m_use = np.where(m_ref == -np.inf, 0.0, m_ref)
                alpha = np.where(move, fast_exp2(c["m_i"] - m_use), 1.0)
                c["m_i"] = m_ref
                with np.errstate(invalid="ignore"):
                    e = fast_exp2(x * f - m_use[:, None])
                for tt in range(4):
                    c["l_part"][:, tt] = c["l_part"][:, tt] * alpha + e[:, quad == tt].sum(1)
                return e, alpha

            def turn_wait():
                if pingpong:
                    yield from turn[wg].sync()
                    assert not issuing, "both warpgroups inside a turn region"
                    issuing.append(wg)

            def turn_pass(last):
                if pingpong:
                    issuing.remove(wg)
                    if not (last and wg == 1):
                        turn[wg ^ 1].arrive()

            o = np.zeros((64, D))
            if n_tiles > 0:
                while not full_q.ready(ctr["qn"] & 1, ctr["qn"]):
                    yield
                assert stage_tile["q"][0] == t, f"Q holds work tile {stage_tile['q'][0]}, expected {t}"
                readers[("q", 0)] += 1
                Q = read_tile(sq, 0, BM, D)[rows]
            if n_tiles > 0 and not OVERLAP[D]:
                for it in range(n_tiles):
                    n0 = n_begin + it * BN
                    yield from wait_full(full_k[(g + it) % S], it)
                    K = issue_qk(it)
                    yield  # the wgmma runs while others proceed
                    e, alpha = softmax(finish_qk(it, K), n0)
                    o = o * alpha[:, None]
                    yield from wait_full(full_v[(g + it) % S], it)
                    V = issue_pv(it)
                    yield
                    o = o + e @ V
                    finish_pv(it)
                release_q()
            elif n_tiles > 0:
                if n_run > 0:
                    if pingpong and wg == 1:
                        turn[0].arrive()
                    yield from wait_full(full_k[g % S], 0)
                    yield from turn_wait()
                    K = issue_qk(0)
                    yield
                    turn_pass(False)
                    yield
                    P, _ = softmax(finish_qk(0, K), n_begin)  # O is still 0
                    for it in range(1, n_run):
                        yield from wait_full(full_k[(g + it) % S], it)
                        yield from wait_full(full_v[(g + it - 1) % S], it - 1)
                        yield from turn_wait()
                        K = issue_qk(it)
                        yield
                        V = issue_pv(it - 1)
                        yield
                        turn_pass(False)
                        yield
                        e, alpha = softmax(finish_qk(it, K), n_begin + it * BN)  # wgmma.wait_group 1
                        yield
                        o = o + P @ V  # wgmma.wait_group 0
                        finish_pv(it - 1)
                        o = o * alpha[:, None]
                        P = e
                    release_q()
                    last = n_run - 1
                    yield from wait_full(full_v[(g + last) % S], last)
                    yield from turn_wait()
                    V = issue_pv(last)
                    yield
                    turn_pass(True)
                    yield
                    o = o + P @ V
                    finish_pv(last)
                elif TRIM_FAULT != "no_release_q":
                    release_q()
                # key tiles past this warpgroup's band: each stage released once its load has landed
                for it in range(n_run, n_tiles):
                    st, use = (g + it) % S, (g + it) // S
                    for full, empty in ((full_k, empty_k), (full_v, empty_v)):
                        if TRIM_FAULT in ("release_before_full", "no_full_wait"):
                            release(empty[st], full[st], use)
                            yield
                        if TRIM_FAULT != "no_full_wait":
                            yield from wait_full(full[st], it)
                        if TRIM_FAULT not in ("release_before_full", "no_full_wait", "no_skip_release"):
                            release(empty[st], full[st], use)
                        yield
            if n_tiles > 0:
                ctr["g"] += n_tiles
                ctr["qn"] += 1
            # stream-K: a tile's later keys leave a partial in slot bx, flagged with whether the tile
            # goes on in slot bx + 1; its first keys merge slots bx + 1, ... until a flag says it ends
            if w["kb_lo"] > 0:
                assert (bx, wg) not in p["sk_ws"], "a slot written twice"
                more = w["kb_hi"] < p["sk"][2]
                p["sk_ws"][(bx, wg)] = (t, o.copy(), c["m_i"].copy(), c["l_part"].copy(), more)
                stats["partials"] += 1
                continue
            slot, more = bx, w["kb_hi"] < p["sk"][2]
            while more:
                slot += 1
                assert (slot, wg) in p["sk_ws"], "merge before the partial was written"
                tb, ob, mb, lb, more = p["sk_ws"].pop((slot, wg))
                assert tb == t, f"slot {slot} holds tile {tb}, merging tile {t}"
                ma = c["m_i"]
                mn = np.maximum(ma, mb)
                fa = np.where(ma == -np.inf, 0.0, fast_exp2(ma - np.where(mn == -np.inf, 0.0, mn)))
                fb = np.where(mb == -np.inf, 0.0, fast_exp2(mb - np.where(mn == -np.inf, 0.0, mn)))
                c["l_part"] = c["l_part"] * fa[:, None] + lb * fb[:, None]
                c["m_i"] = mn
                o = o * fa[:, None] + ob * fb[:, None]
                stats["merges"] = stats.get("merges", 0) + 1
            # epilogue
            m_i, l_part = c["m_i"], c["l_part"]
            l = l_part.sum(1)
            inv = np.where(l > 0, 1.0 / np.where(l > 0, l, 1), 0.0)
            for rr in range(64):
                i = r0 + rows[rr]
                if i < lq:
                    base = w["bq"] * p["o_sb"] + (w["q0"] + i) * p["o_sm"] + h * p["o_sh"]
                    for col in range(0, D, 2):
                        if col < p["Kv"]:
                            out[base + col:base + col + 2] = o[rr, col:col + 2] * inv[rr]
                            written[base + col:base + col + 2] += 1
                    li = (w["bq"] * p["H"] + h) * p["Mq"] + w["q0"] + i
                    lse[li] = (m_i[rr] + math.log2(l[rr])) * LN2 if l[rr] > 0 else -np.inf
        results[wg] = True

    actors = [producer()] + [consumer(wg) for wg in range(NW)]
    alive = [True] * len(actors)
    stuck = 0
    speed = np.exp(SKEW * rng.standard_normal(len(actors) + 1)) if SKEW > 0 else None
    while any(alive) or pending_tx:
        choices = [i for i in range(len(actors)) if alive[i]] + (["tx"] if pending_tx else [])
        if speed is None:
            ch = choices[rng.integers(len(choices))]
        else:
            wt = np.array([speed[-1 if c == "tx" else c] for c in choices])
            ch = choices[rng.choice(len(choices), p=wt / wt.sum())]
        if ch == "tx":
            bar, tot, kind, st, tag = pending_tx.pop(rng.integers(len(pending_tx)))
            stage_tile[kind][st] = tag
            bar.complete_tx(tot)
            stuck = 0
            continue
        try:
            next(actors[ch])
            stuck += 1
        except StopIteration:
            alive[ch] = False
            stuck = 0
        assert stuck < 100000, "deadlock"
    assert results == {wg: True for wg in range(NW)}
    assert all(b.arrived == 0 for b in turn), "a named barrier generation left half-arrived at exit"
    # every use of every buffer filled once and released by every consumer warp, nothing more
    uses_g = sum(w["n_tiles"] for w in works)
    uses_q = sum(w["n_tiles"] > 0 for w in works)
    for st in range(S):
        uses = (uses_g - st + S - 1) // S
        for name, bar in (("full_k", full_k[st]), ("full_v", full_v[st]), ("empty_k", empty_k[st]),
                          ("empty_v", empty_v[st])):
            assert bar.phase == uses and bar.pending == bar.count and bar.tx == 0, \
                f"{name}[{st}] at exit: phase {bar.phase} of {uses} uses, {bar.count - bar.pending} arrivals pending"
    for name, bar in (("full_q", full_q), ("empty_q", empty_q)):
        assert bar.phase == uses_q and bar.pending == bar.count and bar.tx == 0, \
            f"{name} at exit: phase {bar.phase} of {uses_q} uses, {bar.count - bar.pending} arrivals pending"


def run_case(rng, B, Mq, Mkv, H, K, Kv, kind, wl, wr, varlen=None, seqlen_k=None, kv_bcast_head=False,
             group=None):
    """group: lanes per L2 section (None: every lane in one section, as the kernel does when the
    K/V of all lanes fit kL2SectionMiB: the small cases here)."""
    d = max(K, Kv)
    D = 64 if d <= 64 else 128 if d <= 128 else 256
    BN, S = TILE_CFG[D]
    BM = 64 * WGS[D]
    q = rng.standard_normal((B, Mq, H, K))
    Hk = 1 if kv_bcast_head else H
    k = rng.standard_normal((B, Mkv, Hk, K))
    v = rng.standard_normal((B, Mkv, Hk, Kv))
    # Poison: Q rows outside every query block, K/V rows outside every key lane.
    dense = np.full((B, Mq, Mkv), -np.inf)
    qrows = np.zeros((B, Mq), bool)
    krows = np.zeros((B, Mkv), bool)
    if varlen is not None:
        sqs, sks = varlen
        nseq = len(sqs) - 1
        for s_ in range(nseq):
            lq = sqs[s_ + 1] - sqs[s_]
            lk = seqlen_k[s_] if seqlen_k is not None else sks[s_ + 1] - sks[s_]
            dense[0, sqs[s_]:sqs[s_] + lq, sks[s_]:sks[s_] + lk][allowed_block(lq, lk, kind, wl, wr)] = 0.0
            qrows[0, sqs[s_]:sqs[s_] + lq] = True
            krows[0, sks[s_]:sks[s_] + lk] = True
        maxq = max(sqs[s_ + 1] - sqs[s_] for s_ in range(nseq))
    else:
        nseq = B
        for b in range(B):
            lk = seqlen_k[b] if seqlen_k is not None else Mkv
            dense[b, :, :lk][allowed_block(Mq, lk, kind, wl, wr)] = 0.0
            krows[b, :lk] = True
        qrows[:] = True
        maxq = Mq
    q[~qrows] = np.nan
    k[~krows] = np.nan
    v[~krows] = np.nan
    # strided storage: q head-major ([B, H, Mq, K]), k/v [B, Mkv, Hk, *]
    qs = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
    st0 = lambda n, s: 0 if n == 1 else s  # noqa: E731  the glue's st(): size-1 dims get stride 0
    p = dict(Mq=Mq, Mkv=Mkv, H=H, K=K, Kv=Kv, mask_kind=kind, wl=wl, wr=wr, scale=0.37,
             q_sb=st0(B, H * Mq * K), q_sm=st0(Mq, K), q_sh=st0(H, Mq * K),
             k_sb=st0(B, Mkv * Hk * K), k_sm=st0(Mkv, Hk * K), k_sh=0 if kv_bcast_head else st0(H, K),
             v_sb=st0(B, Mkv * Hk * Kv), v_sm=st0(Mkv, Hk * Kv), v_sh=0 if kv_bcast_head else st0(H, Kv),
             o_sb=Mq * H * Kv, o_sm=H * Kv, o_sh=Kv)
    p["seqstart_q"], p["seqstart_k"] = (varlen if varlen is not None else (None, None))
    p["seqlen_k"] = seqlen_k
    p["out"] = np.zeros(B * Mq * H * Kv)
    p["written"] = np.zeros(B * Mq * H * Kv)
    p["lse"] = np.full(B * H * Mq, -np.inf)
    a = dict(tq=encode_map(qs.ravel(), K, Mq, H, B, p["q_sm"], p["q_sh"], p["q_sb"], BM),
             tk=encode_map(k.ravel(), K, Mkv, H, B, p["k_sm"], p["k_sh"], p["k_sb"], BN),
             tv=encode_map(v.ravel(), Kv, Mkv, H, B, p["v_sm"], p["v_sh"], p["v_sb"], BN))
    stats = {"tiles": 0, "unmasked": 0, "skipped": 0, "idle_wgs": 0, "max_cta_tiles": 0,
             "runs": {}}  # runs[(work tile, first key tile)][warpgroup] = (n_run, n_tiles): the overlapped order
    p["num_seqs"] = nseq
    p["group"] = group or H * nseq
    num_m = (maxq + BM - 1) // BM
    grid = launch_grid(p, num_m, BM, PERSISTENT[D])
    num_work, _ = num_work_of(p, num_m, BM, PERSISTENT[D])
    p["sk"] = stream_k_plan(p, num_work, SMS, BN, **EMU_STREAMK) if PERSISTENT[D] else (num_work, 0, 0, grid)
    if PERSISTENT[D] and p["sk"][1] > 0:  # the launch takes the plan's grid (more CTAs than tiles)
        grid = p["sk"][3]
    p["sk_ws"] = {}
    stats["partials"] = 0
    # CTAs one after another: each leaves its partial at the start of its tail and merges its right
    # neighbour's at the end, so run them right to left (on the GPU they run at once).
    for bx in reversed(range(grid)):
        kernel_cta(p, a, D, num_m, grid, bx, rng, stats)
    assert not p["sk_ws"], "a partial nobody merged"
    out = p["out"].reshape(B, Mq, H, Kv)
    lse = p["lse"].reshape(B, H, Mq)
    wr_all = p["written"].reshape(B, Mq, H, Kv)
    err = 0.0
    for b in range(B):
        for hh in range(H):
            hk = 0 if kv_bcast_head else hh
            rows = qrows[b]
            kk = np.nan_to_num(k[b, :, hk], nan=0.0)
            vv = np.nan_to_num(v[b, :, hk], nan=0.0)
            qq = np.nan_to_num(q[b, :, hh], nan=0.0)
            sres = qq @ kk.T * 0.37 + dense[b]
            mx = sres.max(1, keepdims=True)
            fin = np.isfinite(mx[:, 0])
            e = np.where(fin[:, None], np.exp(sres - np.where(fin[:, None], mx, 0)), 0.0)
            l = e.sum(1)
            want = np.where(fin[:, None], e @ vv / np.where(fin, l, 1)[:, None], 0.0)
            want_lse = np.where(fin, mx[:, 0] + np.log(np.where(fin, l, 1)), -np.inf)
            got = out[b, rows, hh]
            assert np.isfinite(got).all(), "NaN/Inf leaked into the output"
            err = max(err, np.abs(got - want[rows]).max(initial=0))
            assert (wr_all[b, rows, hh] == 1).all() and (wr_all[b, ~rows, hh] == 0).all(), "each output written once"
            got_l, want_l = lse[b, hh, rows], want_lse[rows]
            assert np.array_equal(np.isneginf(got_l), np.isneginf(want_l)), (b, hh, got_l, want_l)
            f = np.isfinite(want_l)
            err = max(err, np.abs(got_l[f] - want_l[f]).max(initial=0))
    return err, stats


def main():
    rng = np.random.default_rng(0)
    cases = []
    for kind, (wl, wr) in itertools.product([0, 1, 2, 3], [(-1, -1), (70, -1), (3, 2), (0, 0)]):
        cases.append(dict(B=1, Mq=200, Mkv=330, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr))
        cases.append(dict(B=2, Mq=300, Mkv=90, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr))
    cases += [
        dict(B=1, Mq=1, Mkv=1, H=1, K=64, Kv=64, kind=1, wl=-1, wr=-1),
        # windows whose edge falls on the last row / column of a tile (need_mask boundaries)
        dict(B=1, Mq=128, Mkv=256, H=1, K=64, Kv=64, kind=0, wl=62, wr=-1),
        dict(B=1, Mq=128, Mkv=256, H=1, K=64, Kv=64, kind=0, wl=63, wr=-1),
        dict(B=1, Mq=128, Mkv=384, H=1, K=64, Kv=64, kind=0, wl=-1, wr=64),
        dict(B=1, Mq=128, Mkv=384, H=1, K=64, Kv=64, kind=0, wl=-1, wr=63),
        dict(B=1, Mq=128, Mkv=384, H=1, K=64, Kv=64, kind=0, wl=-1, wr=62),
        # key lanes ending one short of a tile boundary (need_mask's lane-end test)
        dict(B=2, Mq=130, Mkv=255, H=1, K=64, Kv=64, kind=0, wl=-1, wr=-1),
        dict(B=1, Mq=70, Mkv=127, H=1, K=256, Kv=256, kind=0, wl=-1, wr=-1),
        # long key lanes: many trips around the stage ring (parities wrap)
        dict(B=1, Mq=130, Mkv=2100, H=1, K=64, Kv=64, kind=0, wl=-1, wr=-1),
        dict(B=1, Mq=100, Mkv=1000, H=1, K=256, Kv=256, kind=2, wl=-1, wr=-1),
        dict(B=1, Mq=1000, Mkv=1000, H=1, K=128, Kv=128, kind=1, wl=-1, wr=-1),
        dict(B=2, Mq=7, Mkv=7, H=2, K=128, Kv=128, kind=2, wl=-1, wr=-1, kv_bcast_head=True),
        dict(B=1, Mq=1, Mkv=300, H=1, K=256, Kv=256, kind=2, wl=-1, wr=-1),
        dict(B=1, Mq=150, Mkv=140, H=1, K=256, Kv=64, kind=3, wl=40, wr=10),
        dict(B=1, Mq=130, Mkv=200, H=1, K=24, Kv=128, kind=0, wl=-1, wr=-1),
        dict(B=2, Mq=140, Mkv=300, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1, seqlen_k=[290, 0]),
        # stream-K tails (more work tiles than the 3 emulated SMs, not a multiple): split tiles
        dict(B=1, Mq=200, Mkv=700, H=7, K=64, Kv=64, kind=0, wl=-1, wr=-1),
        dict(B=1, Mq=130, Mkv=1000, H=5, K=128, Kv=128, kind=0, wl=-1, wr=-1),
        dict(B=2, Mq=250, Mkv=300, H=1, K=256, Kv=256, kind=0, wl=-1, wr=-1, kv_bcast_head=True),
        dict(B=2, Mq=129, Mkv=129, H=2, K=96, Kv=80, kind=0, wl=-1, wr=-1),
        # varlen: empty and very unequal blocks, padded / gappy key lanes
        dict(B=1, Mq=400, Mkv=600, H=2, K=64, Kv=64, kind=2, wl=-1, wr=-1,
             varlen=([0, 13, 13, 400], [0, 40, 50, 600])),
        dict(B=1, Mq=300, Mkv=768, H=1, K=128, Kv=128, kind=1, wl=100, wr=-1,
             varlen=([0, 20, 25, 300], [0, 256, 512, 768]), seqlen_k=[30, 0, 250]),
        dict(B=1, Mq=300, Mkv=768, H=1, K=64, Kv=64, kind=3, wl=3, wr=6,
             varlen=([0, 150, 151, 300], [0, 256, 512, 768]), seqlen_k=[200, 3, 256], kv_bcast_head=True),
        dict(B=1, Mq=260, Mkv=500, H=1, K=64, Kv=64, kind=0, wl=-1, wr=-1,
             varlen=([0, 0, 260], [7, 7, 400]), seqlen_k=[0, 93]),
    ]
    worst = 0.0
    configured = (dict(OVERLAP), dict(PINGPONG), dict(PERSISTENT))
    global TRIM
    for order in ("as configured", "flipped", "overlap without ping-pong", "overlap without ping-pong, no trim"):
        OVERLAP.update(configured[0])
        PINGPONG.update(configured[1])
        PERSISTENT.update(configured[2])
        TRIM = not order.endswith("no trim")
        for d in OVERLAP:
            if order == "flipped":
                OVERLAP[d], PINGPONG[d], PERSISTENT[d] = not OVERLAP[d], not PINGPONG[d], not PERSISTENT[d]
            elif order.startswith("overlap without ping-pong"):
                OVERLAP[d], PINGPONG[d] = True, False
        print(f"-- consumer order {order}: overlap {OVERLAP} pingpong {PINGPONG} persistent {PERSISTENT} trim {TRIM}")
        for c in cases:
            err, stats = run_case(rng, **c)
            worst = max(worst, err)
            print(f"err {err:.2e} tiles {stats['tiles']:4d} unmasked {stats['unmasked']:4d} "
                  f"split {stats['partials']:2d} skipped {stats['skipped']:3d}  {c}", flush=True)
            assert err < 1e-9, c
    print("OK, worst", worst)


if __name__ == "__main__":
    sys.exit(main())
