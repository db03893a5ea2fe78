"""CPU emulation of the fused attention backward (no GPU needed): fmha_bwd.cu (preprocess, convert),
fmha_bwd_kernel.cuh (dK / dV per key tile, atomic dQ sums), fmha_bwd_dq_kernel.cuh (deterministic dQ)
and fmha_bwd_device.cuh (per-element P and dS).

Mirrors the kernels' index math line by line (tile walks over the mask band, cp.async tile loads with
the XOR swizzle, ldmatrix lane addressing incl. .trans, mma.sync m16n8k16 fragments, the dS^T
round trip through shared memory, epilogues) on a flat "shared memory" and flat "global memory" in
float64, and compares dQ, dK, dV against dense float64 attention gradients of the same descriptor
(masks, varlen, bias, dropout). The tile loader, swizzle and the mask block come from
emulate_fmha_fwd.py; ldmatrix and mma are vectorized over the 32 lanes from the same PTX fragment
tables (test_emulate_fmha_bwd.py checks them against the forward emulator's lane loops).
Run: python3 tools/attention/emulate_fmha_bwd.py
"""
import importlib.util
import sys
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("emulate_fmha_fwd", Path(__file__).with_name("emulate_fmha_fwd.py"))
fwd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fwd)
swz, load_tile, allowed_block = fwd.swz, fwd.load_tile, fwd.allowed_block

LOG2E = 1.4426950408889634
UNB = 1 << 40
LANES = np.arange(32)
G, T4 = LANES >> 2, LANES & 3
M32 = np.uint64(0xFFFFFFFF)


# ---- fmha_dropout.h, vectorized
def philox(c0, c1, c2, c3, k0, k1):
    c = [np.asarray(x, np.uint64) & M32 for x in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0) & M32, np.uint64(k1) & M32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & M32, p1 >> np.uint64(32), p1 & M32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return c


def dropout_threshold(p):
    t = float(np.float32(p)) * 4294967296.0  # FmhaDropout::p is a float
    return 0xFFFFFFFF if t >= 4294967295.0 else int(t)


def keep4(d, bh, i, j4):
    w = philox(j4, i, bh, d["offset"], d["seed"], d["seed"] >> 32)
    thr = np.uint64(d["threshold"])
    return sum((w[e] >= thr).astype(np.int64) << e for e in range(4))


def keep(d, bh, i, j):
    j = np.asarray(j, np.int64)
    return ((keep4(d, bh, i, j >> 2) >> (j & 3)) & 1).astype(bool)


def dropout_make(p, seed, offset):
    return dict(p=p, seed=seed, offset=offset, threshold=dropout_threshold(p),
                rescale=1.0 / (1.0 - p) if 0 < p < 1 else 1.0)


# ---- ldmatrix / mma over the 32 lanes at once
def ldsm_x4(smem, addrs, trans):
    """addrs: [32] element offsets (lane 8m + r: row r of matrix m). Returns regs [4][32][2]."""
    mats = smem[np.asarray(addrs).reshape(4, 8)[:, :, None] + np.arange(8)]  # [4][8 rows][8 cols]
    regs = np.empty((4, 32, 2))
    for e in range(2):
        regs[:, :, e] = mats[:, 2 * T4 + e, G] if trans else mats[:, G, 2 * T4 + e]
    return regs


def mma(c, a, b0, b1):
    """c: [32][4] += A B, A 16x16 from a [4][32][2], B 16x8 from b0, b1 [32][2]."""
    A, B = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    for e in range(2):
        A[G, 2 * T4 + e], A[G + 8, 2 * T4 + e] = a[0][:, e], a[1][:, e]
        A[G, 2 * T4 + 8 + e], A[G + 8, 2 * T4 + 8 + e] = a[2][:, e], a[3][:, e]
        B[2 * T4 + e, G], B[2 * T4 + 8 + e, G] = b0[:, e], b1[:, e]
    assert not np.isnan(A).any() and not np.isnan(B).any(), "mma operand from unwritten shared memory"
    Dm = A @ B
    c[:, 0] += Dm[G, 2 * T4]
    c[:, 1] += Dm[G, 2 * T4 + 1]
    c[:, 2] += Dm[G + 8, 2 * T4]
    c[:, 3] += Dm[G + 8, 2 * T4 + 1]


def acc_to_a(x, kk):
    """The kernels' repack of accumulators x[2kk], x[2kk+1] ([32][4] each) into an A operand."""
    return np.stack([x[2 * kk][:, 0:2], x[2 * kk][:, 2:4], x[2 * kk + 1][:, 0:2], x[2 * kk + 1][:, 2:4]])


# ---- fmha_sm80_device.cuh
def seq_block(p, s, kv_rows):
    if p["seqstart_q"] is not None:
        bq, q0 = 0, p["seqstart_q"][s]
        lq = p["seqstart_q"][s + 1] - q0
        k0 = p["seqstart_k"][s]
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["seqstart_k"][s + 1] - k0
    else:
        bq, q0, lq, k0 = s, 0, p["Mq"], 0
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["Mkv"]
    lq = max(0, min(lq, p["Mq"] - max(q0, 0)))
    lk = max(0, min(lk, kv_rows - max(k0, 0)))
    return (bq, q0, lq, k0, lk) if q0 >= 0 and k0 >= 0 else None


class MaskBand:
    def __init__(self, kind, wl, wr, lq, lk):
        self.shift = lk - lq if kind in (2, 3) else 0
        self.hi = 0 if kind in (1, 2) else UNB
        if 0 <= wr < self.hi:
            self.hi = wr
        self.lo = -wl if wl >= 0 else -UNB

    def keys_of(self, r_first, r_last, lk):
        return min(max(r_first + self.shift + self.lo, 0), lk), min(max(r_last + self.shift + self.hi + 1, 0), lk)

    def queries_of(self, c_first, c_last, lq):
        return min(max(c_first - self.shift - self.hi, 0), lq), min(max(c_last - self.shift - self.lo + 1, 0), lq)

    def inside(self, r_first, r_last, c_first, c_last):
        return c_first - r_last - self.shift >= self.lo and c_last - r_first - self.shift <= self.hi

    def allowed(self, i, j):
        d = j - i - self.shift
        return (d >= self.lo) & (d <= self.hi)


# ---- fmha_bwd_device.cuh
def row_lse2(p, sb, h, i):
    bq, q0, lq, _, _ = sb
    if i >= lq:
        return np.inf
    x = p["lse"][(bq * p["H"] + h) * p["Mq"] + q0 + i]
    return np.inf if x == -np.inf else x * LOG2E


def row_dsum(p, dsum, sb, h, i):
    bq, q0, lq, _, _ = sb
    return dsum[(bq * p["H"] + h) * p["Mq"] + q0 + i] if i < lq else 0.0


def bwd_element(p, sb, h, band, need_mask, i, j, lse2, dsum, s, dp):
    """Vectorized over lanes: i, j, lse2, dsum, s, dp are [32]. Returns (Z, dS)."""
    bq, q0, lq, k0, lk = sb
    x = s * p["scale"]
    if p["bias"] is not None:
        ok = (i < lq) & (j < lk)
        bo = bq * p["bias_sb"] + h * p["bias_sh"] + (q0 + i) * p["bias_sm"] + (k0 + j) * p["bias_sn"]
        x = x + np.where(ok, p["bias"][np.where(ok, bo, 0)], 0.0)
    pr = np.exp2(x * LOG2E - lse2)
    if need_mask:
        pr = np.where((i >= lq) | (j >= lk) | ~band.allowed(i, j), 0.0, pr)
    z, dz = pr, dp
    d = p["dropout"]
    if d["p"] > 0:
        kp = keep(d, bq * p["H"] + h, q0 + i, k0 + j)
        z = np.where(kp, pr * d["rescale"], 0.0)
        dz = np.where(kp, dz * d["rescale"], 0.0)
    return z, pr * (dz - dsum)


# ---- fmha_bwd_kernel.cuh
def main_cta(p, w, D, BN, BM, WN, bx, h, s):
    NWARPS = BN // 16 * WN
    THREADS = NWARPS * 32
    QB, OBW, RB = BM // 8 // WN, D // 8 // WN, BM // 16
    CG = NWARPS // RB
    DQB = D // 8 // CG
    sK, sV = 0, BN * D
    sQ, sdO = 2 * BN * D, 2 * BN * D + 2 * BM * D  # [2][BM][D] each: tile it in buffer it & 1
    sZ = sdO + 2 * BM * D
    sdS = sZ + BN * BM
    smem = np.full(2 * BN * D + 4 * BM * D + 2 * BN * BM, np.nan)
    sL, sDs = np.full(BM, np.nan), np.full(BM, np.nan)
    n0 = bx * BN
    sb = seq_block(p, s, p["Mkv"])
    if sb is None or n0 >= sb[4]:
        return 0
    bq, q0, lq, k0, lk = sb
    band = MaskBand(p["mask_kind"], p["wl"], p["wr"], lq, lk)
    nlast = min(n0 + BN, lk) - 1
    ib, ie = band.queries_of(n0, nlast, lq)
    m_begin = ib // BM * BM
    m_tiles = (ie - m_begin + BM - 1) // BM if ie > ib else 0
    q_off = bq * p["q_sb"] + q0 * p["q_sm"] + h * p["q_sh"]
    do_off = bq * p["do_sb"] + q0 * p["do_sm"] + h * p["do_sh"]
    k_off = bq * p["k_sb"] + (k0 + n0) * p["k_sm"] + h * p["k_sh"]
    v_off = bq * p["v_sb"] + (k0 + n0) * p["v_sm"] + h * p["v_sh"]
    load_tile(smem, sK, p["k"], D, BN, THREADS, k_off, p["k_sm"], lk - n0, p["K"])
    load_tile(smem, sV, p["v"], D, BN, THREADS, v_off, p["v_sm"], lk - n0, p["Kv"])
    dk = np.zeros((NWARPS, OBW, 32, 4))
    dv = np.zeros((NWARPS, OBW, 32, 4))
    k_steps, v_steps = (p["K"] + 15) // 16, (p["Kv"] + 15) // 16
    for it in range(m_tiles):
        m0 = m_begin + it * BM
        sQc, sdOc = sQ + (it & 1) * BM * D, sdO + (it & 1) * BM * D
        # the kernel prefetches tile it + 1 during tile it; the other buffer holds tile it - 1 here
        load_tile(smem, sQc, p["q"], D, BM, THREADS, q_off + m0 * p["q_sm"], p["q_sm"], lq - m0, p["K"])
        load_tile(smem, sdOc, p["dout"], D, BM, THREADS, do_off + m0 * p["do_sm"], p["do_sm"], lq - m0, p["Kv"])
        for r in range(BM):
            sL[r] = row_lse2(p, sb, h, m0 + r)
            sDs[r] = row_dsum(p, w["dsum"], sb, h, m0 + r)
        need_mask = n0 + BN > lk or m0 + BM > lq or not band.inside(m0, m0 + BM - 1, n0, n0 + BN - 1)
        smem[sZ:sZ + 2 * BN * BM] = np.nan  # what the previous tile left must not be read
        for warp in range(NWARPS):  # scores of the warp's query columns, Z^T / dS^T to shared memory
            kb, cpart = warp // WN, warp % WN
            krow, cq0 = kb * 16, cpart * (BM // WN)
            st, dpt = np.zeros((QB, 32, 4)), np.zeros((QB, 32, 4))
            for kk in range(D // 16):
                qr_cols = kk * 16 + ((LANES >> 3) & 1) * 8
                if kk < k_steps:
                    a = ldsm_x4(smem, sK + swz(D, krow + (LANES & 15), kk * 16 + (LANES >> 4) * 8), False)
                    for nb2 in range(QB // 2):
                        qr = nb2 * 16 + (LANES & 7) + ((LANES >> 4) << 3)
                        b = ldsm_x4(smem, sQc + cq0 * D + swz(D, qr, qr_cols), False)
                        mma(st[2 * nb2], a, b[0], b[1])
                        mma(st[2 * nb2 + 1], a, b[2], b[3])
                if kk < v_steps:
                    a = ldsm_x4(smem, sV + swz(D, krow + (LANES & 15), kk * 16 + (LANES >> 4) * 8), False)
                    for nb2 in range(QB // 2):
                        qr = nb2 * 16 + (LANES & 7) + ((LANES >> 4) << 3)
                        b = ldsm_x4(smem, sdOc + cq0 * D + swz(D, qr, qr_cols), False)
                        mma(dpt[2 * nb2], a, b[0], b[1])
                        mma(dpt[2 * nb2 + 1], a, b[2], b[3])
            for nb in range(QB):
                for e in range(4):
                    r = cq0 + nb * 8 + 2 * T4 + (e & 1)
                    st[nb][:, e], dpt[nb][:, e] = bwd_element(p, sb, h, band, need_mask, m0 + r,
                                                              n0 + krow + G + (e >> 1) * 8, sL[r], sDs[r],
                                                              st[nb][:, e], dpt[nb][:, e])
                for rr in range(2):
                    o = swz(BM, krow + G + rr * 8, cq0 + nb * 8 + 2 * T4)
                    smem[sZ + o], smem[sZ + o + 1] = st[nb][:, 2 * rr], st[nb][:, 2 * rr + 1]
                    smem[sdS + o], smem[sdS + o + 1] = dpt[nb][:, 2 * rr], dpt[nb][:, 2 * rr + 1]
        for warp in range(NWARPS):  # after the barrier: dV, dK over all BM queries
            kb, cpart = warp // WN, warp % WN
            krow, col0 = kb * 16, cpart * (D // WN)
            for kk in range(BM // 16):
                ao = swz(BM, krow + (LANES & 15), kk * 16 + (LANES >> 4) * 8)
                az, ad = ldsm_x4(smem, sZ + ao, False), ldsm_x4(smem, sdS + ao, False)
                qr = kk * 16 + (LANES & 7) + ((LANES >> 3) & 1) * 8
                for ob2 in range(OBW // 2):
                    c = col0 + ob2 * 16
                    if c < p["Kv"]:
                        b = ldsm_x4(smem, sdOc + swz(D, qr, c + (LANES >> 4) * 8), True)
                        mma(dv[warp, 2 * ob2], az, b[0], b[1])
                        mma(dv[warp, 2 * ob2 + 1], az, b[2], b[3])
                    if c < p["K"]:
                        b = ldsm_x4(smem, sQc + swz(D, qr, c + (LANES >> 4) * 8), True)
                        mma(dk[warp, 2 * ob2], ad, b[0], b[1])
                        mma(dk[warp, 2 * ob2 + 1], ad, b[2], b[3])
        if w["dq_accum"] is not None:
            for warp in range(NWARPS):
                rb, qc0 = warp % RB, (warp // RB) * (D // CG)
                dq = np.zeros((DQB, 32, 4))
                for kk in range(BN // 16):
                    a = ldsm_x4(smem, sdS + swz(BM, kk * 16 + (LANES & 7) + (LANES >> 4) * 8,
                                                rb * 16 + ((LANES >> 3) & 1) * 8), True)
                    key = kk * 16 + (LANES & 7) + ((LANES >> 3) & 1) * 8
                    for ob2 in range(DQB // 2):
                        c = qc0 + ob2 * 16
                        if c < p["K"]:
                            b = ldsm_x4(smem, sK + swz(D, key, c + (LANES >> 4) * 8), True)
                            mma(dq[2 * ob2], a, b[0], b[1])
                            mma(dq[2 * ob2 + 1], a, b[2], b[3])
                for rr in range(2):
                    i = m0 + rb * 16 + G + rr * 8
                    for ob in range(DQB):
                        c = qc0 + ob * 8 + 2 * T4
                        ok = (i < lq) & (c < p["K"])
                        base = ((bq * p["Mq"] + q0 + i) * p["H"] + h) * p["K"]
                        np.add.at(w["dq_accum"], (base + c)[ok], dq[ob][ok, 2 * rr])
                        np.add.at(w["dq_accum"], (base + c + 1)[ok], dq[ob][ok, 2 * rr + 1])
    for warp in range(NWARPS):
        kb, cpart = warp // WN, warp % WN
        krow, col0 = kb * 16, cpart * (D // WN)
        for rr in range(2):
            for lane in range(32):
                j = n0 + krow + G[lane] + rr * 8
                if j >= lk:
                    continue
                dkr = bq * p["dk_sb"] + (k0 + j) * p["dk_sm"] + h * p["dk_sh"]
                dvr = bq * p["dv_sb"] + (k0 + j) * p["dv_sm"] + h * p["dv_sh"]
                for ob in range(OBW):
                    c = col0 + ob * 8 + 2 * T4[lane]
                    if c < p["K"]:
                        p["dk"][dkr + c:dkr + c + 2] = dk[warp, ob][lane, 2 * rr:2 * rr + 2] * p["scale"]
                        p["dk_written"][dkr + c:dkr + c + 2] += 1
                    if c < p["Kv"]:
                        p["dv"][dvr + c:dvr + c + 2] = dv[warp, ob][lane, 2 * rr:2 * rr + 2]
                        p["dv_written"][dvr + c:dvr + c + 2] += 1
    return m_tiles


# ---- fmha_bwd_dq_kernel.cuh
def dq_cta(p, w, D, BM, BN, bx, h, s):
    NW = BM // 16
    THREADS = NW * 32
    NB, OB = BN // 8, D // 8
    sQ, sdO, sK, sV = 0, BM * D, 2 * BM * D, 2 * BM * D + 2 * BN * D  # sK, sV [2][BN][D]
    smem = np.full(2 * BM * D + 4 * BN * D, np.nan)
    r0 = bx * BM
    sb = seq_block(p, s, p["Mkv"])
    if sb is None or r0 >= sb[2]:
        return 0
    bq, q0, lq, k0, lk = sb
    band = MaskBand(p["mask_kind"], p["wl"], p["wr"], lq, lk)
    rlast = min(r0 + BM, lq) - 1
    jb, je = band.keys_of(r0, rlast, lk)
    n_begin = jb // BN * BN
    n_tiles = (je - n_begin + BN - 1) // BN if je > jb else 0
    q_off = bq * p["q_sb"] + (q0 + r0) * p["q_sm"] + h * p["q_sh"]
    do_off = bq * p["do_sb"] + (q0 + r0) * p["do_sm"] + h * p["do_sh"]
    k_off = bq * p["k_sb"] + k0 * p["k_sm"] + h * p["k_sh"]
    v_off = bq * p["v_sb"] + k0 * p["v_sm"] + h * p["v_sh"]
    load_tile(smem, sQ, p["q"], D, BM, THREADS, q_off, p["q_sm"], lq - r0, p["K"])
    load_tile(smem, sdO, p["dout"], D, BM, THREADS, do_off, p["do_sm"], lq - r0, p["Kv"])
    k_steps, v_steps = (p["K"] + 15) // 16, (p["Kv"] + 15) // 16
    dq = np.zeros((NW, OB, 32, 4))
    for it in range(n_tiles):
        n0 = n_begin + it * BN
        sKc, sVc = sK + (it & 1) * BN * D, sV + (it & 1) * BN * D
        load_tile(smem, sKc, p["k"], D, BN, THREADS, k_off + n0 * p["k_sm"], p["k_sm"], lk - n0, p["K"])
        load_tile(smem, sVc, p["v"], D, BN, THREADS, v_off + n0 * p["v_sm"], p["v_sm"], lk - n0, p["Kv"])
        need_mask = n0 + BN > lk or r0 + BM > lq or not band.inside(r0, r0 + BM - 1, n0, n0 + BN - 1)
        for warp in range(NW):
            wrow = warp * 16
            rows = [r0 + wrow + G + rr * 8 for rr in range(2)]
            lse2 = [np.array([row_lse2(p, sb, h, int(i)) for i in rows[rr]]) for rr in range(2)]
            dsum = [np.array([row_dsum(p, w["dsum"], sb, h, int(i)) for i in rows[rr]]) for rr in range(2)]
            sc, dp = np.zeros((NB, 32, 4)), np.zeros((NB, 32, 4))
            for kk in range(D // 16):
                key_lo, col = (LANES & 7) + ((LANES >> 4) << 3), kk * 16 + ((LANES >> 3) & 1) * 8
                if kk < k_steps:
                    a = ldsm_x4(smem, sQ + swz(D, wrow + (LANES & 15), kk * 16 + (LANES >> 4) * 8), False)
                    for nb2 in range(NB // 2):
                        b = ldsm_x4(smem, sKc + swz(D, nb2 * 16 + key_lo, col), False)
                        mma(sc[2 * nb2], a, b[0], b[1])
                        mma(sc[2 * nb2 + 1], a, b[2], b[3])
                if kk < v_steps:
                    a = ldsm_x4(smem, sdO + swz(D, wrow + (LANES & 15), kk * 16 + (LANES >> 4) * 8), False)
                    for nb2 in range(NB // 2):
                        b = ldsm_x4(smem, sVc + swz(D, nb2 * 16 + key_lo, col), False)
                        mma(dp[2 * nb2], a, b[0], b[1])
                        mma(dp[2 * nb2 + 1], a, b[2], b[3])
            for nb in range(NB):
                for e in range(4):
                    sc[nb][:, e], dp[nb][:, e] = bwd_element(p, sb, h, band, need_mask, r0 + wrow + G + (e >> 1) * 8,
                                                             n0 + nb * 8 + 2 * T4 + (e & 1), lse2[e >> 1],
                                                             dsum[e >> 1], sc[nb][:, e], dp[nb][:, e])
            for kk in range(BN // 16):
                a = acc_to_a(dp, kk)
                key = kk * 16 + (LANES & 7) + ((LANES >> 3) & 1) * 8
                for ob2 in range(OB // 2):
                    if ob2 < k_steps:
                        b = ldsm_x4(smem, sKc + swz(D, key, ob2 * 16 + (LANES >> 4) * 8), True)
                        mma(dq[warp, 2 * ob2], a, b[0], b[1])
                        mma(dq[warp, 2 * ob2 + 1], a, b[2], b[3])
    for warp in range(NW):
        for rr in range(2):
            for lane in range(32):
                i = r0 + warp * 16 + G[lane] + rr * 8
                if i >= lq:
                    continue
                row = bq * p["dq_sb"] + (q0 + i) * p["dq_sm"] + h * p["dq_sh"]
                for ob in range(OB):
                    c = ob * 8 + 2 * T4[lane]
                    if c < p["K"]:
                        p["dq"][row + c:row + c + 2] = dq[warp, ob][lane, 2 * rr:2 * rr + 2] * p["scale"]
                        p["dq_written"][row + c:row + c + 2] += 1
    return n_tiles


# ---- fmha_bwd.cu and the problem set-up
def preprocess(p):
    out = p["out"].reshape(p["B"], p["Mq"], p["H"], p["Kv"])
    do = p["dout"][:p["B"] * p["do_sb"]].reshape(p["B"], p["Mq"], p["H"], -1)[..., :p["Kv"]]
    return np.ascontiguousarray((out * do).sum(-1).transpose(0, 2, 1)).ravel()  # [B, H, Mq]


def reference(q, k, v, do, dense, bias_t, d, scale):
    """Dense float64 forward and gradients; dense: additive 0 / -inf mask [B, Mq, Mkv]."""
    B, Mq, H, _ = q.shape
    Mkv = k.shape[1]
    out, lse = np.zeros(do.shape), np.full((B, H, Mq), -np.inf)
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            s = q[b, :, h] @ k[b, :, h].T * scale + dense[b]
            if bias_t is not None:
                s = s + bias_t[0, h]
            mx = s.max(1, keepdims=True)
            fin = np.isfinite(mx[:, 0])
            e = np.where(fin[:, None], np.exp(s - np.where(fin[:, None], mx, 0)), 0.0)
            l = e.sum(1)
            P = np.where(fin[:, None], e / np.where(fin, l, 1)[:, None], 0.0)
            lse[b, h] = np.where(fin, mx[:, 0] + np.log(np.where(fin, l, 1)), -np.inf)
            M = np.ones((Mq, Mkv))
            if d["p"] > 0:
                M = keep(d, b * H + h, np.arange(Mq)[:, None], np.arange(Mkv)[None, :]) * d["rescale"]
            Z = P * M
            out[b, :, h] = Z @ v[b, :, h]
            Dr = (do[b, :, h] * out[b, :, h]).sum(1)
            dP = (do[b, :, h] @ v[b, :, h].T) * M
            dS = P * (dP - Dr[:, None])
            dv[b, :, h] = Z.T @ do[b, :, h]
            dq[b, :, h] = scale * dS @ k[b, :, h]
            dk[b, :, h] = scale * dS.T @ q[b, :, h]
    return out, lse, dq, dk, dv


def run_case(rng, B, Mq, Mkv, H, K, Kv, kind, wl, wr, varlen=None, seqlen_k=None, bias=False, dropout=0.0,
             deterministic=False, D=None, BN=None, BM=64, WN=None, BN_DQ=None):
    d_ = max(K, Kv)
    D = D or (64 if d_ <= 64 else 128 if d_ <= 128 else 256)
    cfg = {64: (128, 1, 64), 128: (64, 2, 64), 256: (64, 2, 32)}[D]  # fmha_bwd_launch.cuh Cfg
    BN, WN, BN_DQ = BN or cfg[0], WN or cfg[1], BN_DQ or cfg[2]
    scale = 0.37
    q = rng.standard_normal((B, Mq, H, K))
    k = rng.standard_normal((B, Mkv, H, K))
    v = rng.standard_normal((B, Mkv, H, Kv))
    do = rng.standard_normal((B, Mq, H, Kv))
    dense = np.full((B, Mq, Mkv), -np.inf)
    if varlen is not None:
        sq, sk = varlen
        nseq = len(sq) - 1
        for s_ in range(nseq):
            lq = sq[s_ + 1] - sq[s_]
            lk = seqlen_k[s_] if seqlen_k is not None else sk[s_ + 1] - sk[s_]
            dense[0, sq[s_]:sq[s_] + lq, sk[s_]:sk[s_] + lk][allowed_block(lq, lk, kind, wl, wr)] = 0.0
        maxq = max(sq[s_ + 1] - sq[s_] for s_ in range(nseq))
        maxk = max((seqlen_k[s_] if seqlen_k is not None else sk[s_ + 1] - sk[s_]) for s_ in range(nseq))
    else:
        nseq, maxq, maxk = B, Mq, Mkv
        for b in range(B):
            lk = seqlen_k[b] if seqlen_k is not None else Mkv
            dense[b, :, :lk][allowed_block(Mq, lk, kind, wl, wr)] = 0.0
    bias_t = rng.standard_normal((1, H, Mq, Mkv)) if bias else None
    drop = dropout_make(dropout, 0x123456789ABCDEF, 0xFEDCBA987)
    out, lse, rdq, rdk, rdv = reference(q, k, v, do, dense, bias_t, drop, scale)
    qs = np.ascontiguousarray(q.transpose(0, 2, 1, 3))  # head-major q (a strided view)
    dkpad = 8  # dk rows padded: a row stride that is not H * K
    p = dict(q=qs.ravel(), k=k.ravel(), v=v.ravel(), dout=do.ravel(), out=out.ravel(), lse=lse.ravel(),
             B=B, Mq=Mq, Mkv=Mkv, H=H, K=K, Kv=Kv, q_sb=H * Mq * K, q_sm=K, q_sh=Mq * K,
             k_sb=Mkv * H * K, k_sm=H * K, k_sh=K, v_sb=Mkv * H * Kv, v_sm=H * Kv, v_sh=Kv,
             do_sb=Mq * H * Kv, do_sm=H * Kv, do_sh=Kv, dq_sb=Mq * H * K, dq_sm=H * K, dq_sh=K,
             dk_sb=Mkv * (H * K + dkpad), dk_sm=H * K + dkpad, dk_sh=K, dv_sb=Mkv * H * Kv, dv_sm=H * Kv, dv_sh=Kv,
             mask_kind=kind, wl=wl, wr=wr, scale=scale, dropout=drop,
             seqstart_q=varlen[0] if varlen else None, seqstart_k=varlen[1] if varlen else None, seqlen_k=seqlen_k)
    if bias:
        p.update(bias=bias_t.ravel(), bias_sb=0, bias_sh=Mq * Mkv, bias_sm=Mkv, bias_sn=1)
    else:
        p["bias"] = None
    p["dq"], p["dq_written"] = np.zeros(B * Mq * H * K), np.zeros(B * Mq * H * K)
    p["dk"], p["dk_written"] = np.zeros(B * p["dk_sb"]), np.zeros(B * p["dk_sb"])
    p["dv"], p["dv_written"] = np.zeros(B * Mkv * H * Kv), np.zeros(B * Mkv * H * Kv)
    w = dict(dsum=preprocess(p), dq_accum=None if deterministic else np.zeros(B * Mq * H * K))
    tiles = 0
    # fmha_bwd_launch.cuh: dense problems take Mkv / Mq for the grid
    gk, gq = (maxk, maxq) if varlen is not None else (Mkv, Mq)
    for s_ in range(nseq):
        for h in range(H):
            for bx in range((gk + BN - 1) // BN):
                tiles += main_cta(p, w, D, BN, BM, WN, bx, h, s_)
            if deterministic:
                for bx in range((gq + BM - 1) // BM):
                    tiles += dq_cta(p, w, D, BM, BN_DQ, bx, h, s_)
    if not deterministic:  # fmha_bwd_convert_dq
        p["dq"][:] = w["dq_accum"] * scale
        p["dq_written"][:] = 1
    got_dk = p["dk"].reshape(B, Mkv, H * K + dkpad)[:, :, :H * K].reshape(B, Mkv, H, K)
    dkw = p["dk_written"].reshape(B, Mkv, H * K + dkpad)
    assert (dkw[:, :, H * K:] == 0).all(), "dk row padding written"
    dkw = dkw[:, :, :H * K].reshape(B, Mkv, H, K)
    lane_keys = np.zeros((B, Mkv), bool)  # keys some lane holds: written exactly once, others never
    rows = np.zeros((B, Mq), bool)
    if varlen is not None:
        for s_ in range(nseq):
            lk = seqlen_k[s_] if seqlen_k is not None else varlen[1][s_ + 1] - varlen[1][s_]
            lane_keys[0, varlen[1][s_]:varlen[1][s_] + lk] = True
            rows[0, varlen[0][s_]:varlen[0][s_ + 1]] = True
    else:
        for b in range(B):
            lane_keys[b, :seqlen_k[b] if seqlen_k is not None else Mkv] = True
        rows[:] = True
    assert (dkw[lane_keys] == 1).all() and (dkw[~lane_keys] == 0).all(), "dk written once per lane key"
    dvw = p["dv_written"].reshape(B, Mkv, H, Kv)
    assert (dvw[lane_keys] == 1).all() and (dvw[~lane_keys] == 0).all(), "dv written once per lane key"
    dqw = p["dq_written"].reshape(B, Mq, H, K)
    assert (dqw[rows] == 1).all(), "dq written once per block row"
    err = max(np.abs(got_dk - rdk).max(), np.abs(p["dv"].reshape(rdv.shape) - rdv).max(),
              np.abs(p["dq"].reshape(rdq.shape)[rows] - rdq[rows]).max())
    return err, tiles


def cases():
    small = dict(BN=32, BM=64, WN=2, BN_DQ=16)  # several tiles per CTA with short sequences
    out = []
    for kind, (wl, wr) in [(0, (-1, -1)), (1, (-1, -1)), (2, (-1, -1)), (3, (5, 2)), (1, (7, -1)), (0, (0, 0))]:
        out.append(dict(B=2, Mq=70, Mkv=53, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr, **small))
        out.append(dict(B=1, Mq=45, Mkv=100, H=2, K=32, Kv=48, kind=kind, wl=wl, wr=wr, deterministic=True, **small))
    out += [
        dict(B=1, Mq=70, Mkv=60, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1, dropout=0.3, bias=True, **small),
        dict(B=1, Mq=70, Mkv=60, H=1, K=64, Kv=64, kind=1, wl=-1, wr=-1, dropout=0.2, deterministic=True, **small),
        dict(B=1, Mq=45, Mkv=96, H=1, K=16, Kv=8, kind=1, wl=4, wr=-1, varlen=([0, 20, 25, 45], [0, 32, 64, 96]),
             seqlen_k=[30, 0, 17], **small),
        dict(B=1, Mq=133, Mkv=96, H=1, K=64, Kv=64, kind=3, wl=3, wr=6, varlen=([0, 20, 25, 133], [0, 32, 63, 96]),
             seqlen_k=[30, 3, 32], bias=True, dropout=0.25, deterministic=True, **small),
        dict(B=2, Mq=40, Mkv=70, H=1, K=64, Kv=40, kind=0, wl=-1, wr=-1, seqlen_k=[33, 70], **small),
        dict(B=1, Mq=150, Mkv=140, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1, BN=64, BM=64, WN=1, BN_DQ=32),
        dict(B=1, Mq=90, Mkv=70, H=1, K=64, Kv=56, kind=3, wl=9, wr=4, dropout=0.2, BN=32, BM=64, WN=4, BN_DQ=16),
        # the real tile shapes
        dict(B=1, Mq=70, Mkv=150, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1, dropout=0.1),
        dict(B=1, Mq=70, Mkv=75, H=1, K=96, Kv=128, kind=0, wl=-1, wr=-1, deterministic=True),
        dict(B=1, Mq=66, Mkv=40, H=1, K=256, Kv=32, kind=1, wl=-1, wr=-1),
        dict(B=1, Mq=66, Mkv=40, H=1, K=32, Kv=256, kind=3, wl=2, wr=1, deterministic=True),
    ]
    return out


def main():
    rng = np.random.default_rng(0)
    worst = 0.0
    for c in cases():
        err, tiles = run_case(rng, **c)
        worst = max(worst, err)
        print(f"err {err:.2e} tiles {tiles:4d}  {c}", flush=True)
        assert err < 1e-9, c
    print("OK, worst", worst)


if __name__ == "__main__":
    sys.exit(main())
