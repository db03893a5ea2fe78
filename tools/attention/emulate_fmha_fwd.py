"""CPU emulation of csrc/attention/kernels/fmha_fwd_kernel.cuh (no GPU needed).

Mirrors the kernel's index math line by line (tile bounds, cp.async tile loads with the XOR
swizzle, ldmatrix lane addressing incl. .trans, mma.sync m16n8k16 fragments, online softmax with
quad shuffles, masks, epilogue, LSE) on a flat "shared memory" and flat "global memory", and
compares against a dense float64 reference of the mask descriptor. The ldmatrix / mma semantics
below are written from the PTX ISA fragment tables, independently of the kernel's formulas:
  ldmatrix .x4: lane 8*m + r gives the address of row r of matrix m; register m of lane l holds
    (row l//4, cols 2*(l%4), 2*(l%4)+1) of matrix m; with .trans it holds
    (rows 2*(l%4), 2*(l%4)+1; col l//4).
  mma m16n8k16 (f16/bf16, g = lane//4, t = lane%4):
    A regs: 0 -> (g, 2t..2t+1), 1 -> (g+8, 2t..), 2 -> (g, 2t+8..), 3 -> (g+8, 2t+8..)
    B regs: 0 -> (k = 2t..2t+1, n = g), 1 -> (k = 2t+8.., n = g)
    C/D:    c0,c1 -> (g, 2t..2t+1), c2,c3 -> (g+8, 2t..2t+1)
Run: python3 tools/attention/emulate_fmha_fwd.py  (a few minutes; small tiles are also emulated so that
several key tiles per CTA occur with small sequences).
"""
import itertools
import math
import sys

import numpy as np

LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453
UNB = 1 << 40
LANES = np.arange(32)
G, T4 = LANES >> 2, LANES & 3


def swz(D, row, col):
    return row * D + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)


def load_tile(smem, sbase, gmem, D, ROWS, THREADS, off, row_stride, rows_valid, cols_valid):
    CPR = D // 8
    assert ROWS * CPR % THREADS == 0
    for tid in range(THREADS):
        for n in range(ROWS * CPR // THREADS):
            i = tid + n * THREADS
            r, c = i // CPR, (i % CPR) * 8
            ok = r < rows_valid and c < cols_valid
            dst = sbase + swz(D, r, c)
            if ok:
                src = off + r * row_stride + c
                assert 0 <= src and src + 8 <= gmem.size, "global OOB read"
                smem[dst:dst + 8] = gmem[src:src + 8]
            else:
                smem[dst:dst + 8] = 0.0


def load_rows(smem, sbase, gmem, D, ROWS, THREADS, rows, rows_valid, cols_valid):
    """The kernel's load_rows: tile row r at element offset rows(r) (-1: zeros)."""
    CPR = D // 8
    assert ROWS * CPR % THREADS == 0
    for tid in range(THREADS):
        for n in range(ROWS * CPR // THREADS):
            i = tid + n * THREADS
            r, c = i // CPR, (i % CPR) * 8
            ro = rows(r) if (r < rows_valid and c < cols_valid) else -1
            dst = sbase + swz(D, r, c)
            if ro >= 0:
                src = ro + c
                assert 0 <= src and src + 8 <= gmem.size, "global OOB read"
                smem[dst:dst + 8] = gmem[src:src + 8]
            else:
                smem[dst:dst + 8] = 0.0


def paged_rows(bt_row, first, head_off, row_stride, kv_rows, page_size):
    """The kernel's PagedRows functor."""
    def f(r):
        x = first + r
        page = int(bt_row[x // page_size])
        row = page * page_size + x % page_size
        return -1 if page < 0 or row >= kv_rows else head_off + row * row_stride
    return f


def ldsm_x4(smem, addrs, trans):
    """addrs: [32] element offsets. Returns regs [4][32][2]."""
    regs = np.zeros((4, 32, 2))
    for m in range(4):
        mat = np.stack([smem[addrs[8 * m + r]:addrs[8 * m + r] + 8] for r in range(8)])  # [8 rows][8 cols]
        for l in range(32):
            if not trans:
                regs[m, l] = mat[l // 4, 2 * (l % 4):2 * (l % 4) + 2]
            else:
                regs[m, l] = mat[2 * (l % 4):2 * (l % 4) + 2, l // 4]
    return regs


def mma(c, a, b0, b1):
    """c: [32][4]; a: [4][32][2]; b0, b1: [32][2]. D = A B + C."""
    A = np.full((16, 16), np.nan)
    B = np.full((16, 8), np.nan)
    for l in range(32):
        g, t = l // 4, l % 4
        for e in range(2):
            A[g, 2 * t + e] = a[0][l][e]
            A[g + 8, 2 * t + e] = a[1][l][e]
            A[g, 2 * t + 8 + e] = a[2][l][e]
            A[g + 8, 2 * t + 8 + e] = a[3][l][e]
            B[2 * t + e, g] = b0[l][e]
            B[2 * t + 8 + e, g] = b1[l][e]
    assert not np.isnan(A).any() and not np.isnan(B).any()
    Dm = A @ B
    for l in range(32):
        g, t = l // 4, l % 4
        c[l, 0] += Dm[g, 2 * t]
        c[l, 1] += Dm[g, 2 * t + 1]
        c[l, 2] += Dm[g + 8, 2 * t]
        c[l, 3] += Dm[g + 8, 2 * t + 1]


def quad_max(x):  # shfl_xor 1 then 2
    x = np.maximum(x, x[LANES ^ 1])
    return np.maximum(x, x[LANES ^ 2])


def quad_sum(x):
    x = x + x[LANES ^ 1]
    return x + x[LANES ^ 2]


def kernel_cta(p, D, BM, BN, gridx, bx, h, s, stats):
    NW = BM // 16
    THREADS = NW * 32
    NB, OB = BN // 8, D // 8
    tile = gridx - 1 - bx
    if p["seqstart_q"] is not None:
        bq, q0 = 0, p["seqstart_q"][s]
        lq = p["seqstart_q"][s + 1] - q0
        k0 = p["seqstart_k"][s]
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["seqstart_k"][s + 1] - k0
    else:
        bq, q0, lq, k0 = s, 0, p["Mq"], 0
        lk = p["seqlen_k"][s] if p["seqlen_k"] is not None else p["Mkv"]
    paged = p.get("block_table") is not None
    lq = max(0, min(lq, p["Mq"] - max(q0, 0)))
    lk = max(0, min(lk, (p["bt_cols"] * p["page_size"] if paged else p["Mkv"]) - max(k0, 0)))
    if q0 < 0 or k0 < 0:
        return
    r0 = tile * BM
    if r0 >= lq:
        return
    kind = p["mask_kind"]
    causal = kind in (1, 2)
    br = kind in (2, 3)
    shift = lk - lq if br else 0
    hi = 0 if causal else UNB
    if p["wr"] >= 0 and p["wr"] < hi:
        hi = p["wr"]
    lo = -p["wl"] if p["wl"] >= 0 else -UNB
    rlast = min(r0 + BM, lq) - 1
    jb, je = r0 + shift + lo, rlast + shift + hi + 1
    jb = min(max(jb, 0), lk)
    je = min(max(je, 0), lk)
    n_begin = jb // BN * BN
    n_tiles = (je - n_begin + BN - 1) // BN if je > jb else 0
    stats["tiles"] += n_tiles
    q_off = bq * p["q_sb"] + (q0 + r0) * p["q_sm"] + h * p["q_sh"]
    k_off = bq * p["k_sb"] + k0 * p["k_sm"] + h * p["k_sh"]
    v_off = bq * p["v_sb"] + k0 * p["v_sm"] + h * p["v_sh"]

    def load_kv(which, dst, n):  # the kernel's load_k / load_v lambdas
        g, sm, sh, off, cols = ((p["k"], p["k_sm"], p["k_sh"], k_off, p["K"]) if which == "k" else
                                (p["v"], p["v_sm"], p["v_sh"], v_off, p["Kv"]))
        if paged:
            bt_row = p["block_table"][s * p["bt_stride"]:(s + 1) * p["bt_stride"]]
            rows = paged_rows(bt_row, k0 + n, h * sh, sm, p["kv_rows"], p["page_size"])
        else:
            rows = lambda r: off + (n + r) * sm  # noqa: E731
        load_rows(smem, dst, g, D, BN, THREADS, rows, lk - n, cols)

    sQ, sK, sV = 0, BM * D, BM * D + 2 * BN * D
    smem = np.full((BM + 4 * BN) * D, np.nan)
    k_steps, v_steps = (p["K"] + 15) // 16, (p["Kv"] + 15) // 16
    scale = p["scale"]
    o = np.zeros((NW, OB, 32, 4))
    m_i = np.full((NW, 2, 32), -np.inf)
    l_i = np.zeros((NW, 2, 32))
    if n_tiles > 0:
        load_tile(smem, sQ, p["q"], D, BM, THREADS, q_off, p["q_sm"], lq - r0, p["K"])
        load_kv("k", sK, n_begin)
        load_kv("v", sV, n_begin)
    for it in range(n_tiles):
        n0 = n_begin + it * BN
        cur, nxt = it & 1, (it & 1) ^ 1
        sKc, sVc = sK + cur * BN * D, sV + cur * BN * D
        # the kernel's next-tile prefetch goes to buffer nxt; emulated before the reads of cur to
        # prove that the reads never touch the buffer being filled
        if it + 1 < n_tiles:
            n1 = n0 + BN
            load_kv("k", sK + nxt * BN * D, n1)
        dmin, dmax = n0 - (r0 + BM - 1) - shift, n0 + BN - 1 - r0 - shift
        need_mask = n0 + BN > lk or dmin < lo or dmax > hi
        sc_all = []
        for w in range(NW):
            wrow = w * 16
            sc = np.zeros((NB, 32, 4))
            for kk in range(D // 16):
                if kk < k_steps:
                    a = ldsm_x4(smem, sQ + swz(D, wrow + (LANES & 15), kk * 16 + (LANES >> 4) * 8), False)
                    for nb2 in range(NB // 2):
                        key = nb2 * 16 + (LANES & 7) + ((LANES >> 4) << 3)
                        b = ldsm_x4(smem, sKc + swz(D, key, kk * 16 + ((LANES >> 3) & 1) * 8), False)
                        mma(sc[2 * nb2], a, b[0], b[1])
                        mma(sc[2 * nb2 + 1], a, b[2], b[3])
            for nb in range(NB):
                for e in range(4):
                    i = r0 + wrow + G + (e >> 1) * 8
                    j = n0 + nb * 8 + 2 * T4 + (e & 1)
                    x = sc[nb][:, e] * scale
                    if p["bias"] is not None:
                        okb = (i < lq) & (j < lk)
                        bo = bq * p["bias_sb"] + h * p["bias_sh"] + (q0 + i) * p["bias_sm"] + (k0 + j) * p["bias_sn"]
                        x = x + np.where(okb, p["bias"][np.where(okb, bo, 0)], 0.0)
                    x = x * LOG2E
                    if need_mask:
                        d = j - i - shift
                        x = np.where((j >= lk) | (d < lo) | (d > hi), -np.inf, x)
                    sc[nb][:, e] = x
            for rr in range(2):
                mx = np.full(32, -np.inf)
                for nb in range(NB):
                    mx = np.maximum(mx, np.maximum(sc[nb][:, 2 * rr], sc[nb][:, 2 * rr + 1]))
                mx = quad_max(mx)
                m_new = np.maximum(m_i[w, rr], mx)
                m_use = np.where(m_new == -np.inf, 0.0, m_new)
                with np.errstate(invalid="raise"):
                    alpha = np.exp2(m_i[w, rr] - m_use)
                m_i[w, rr] = m_new
                ssum = np.zeros(32)
                for nb in range(NB):
                    sc[nb][:, 2 * rr] = np.exp2(sc[nb][:, 2 * rr] - m_use)
                    sc[nb][:, 2 * rr + 1] = np.exp2(sc[nb][:, 2 * rr + 1] - m_use)
                    ssum += sc[nb][:, 2 * rr] + sc[nb][:, 2 * rr + 1]
                l_i[w, rr] = l_i[w, rr] * alpha + ssum
                for ob in range(OB):
                    o[w, ob][:, 2 * rr] *= alpha
                    o[w, ob][:, 2 * rr + 1] *= alpha
            sc_all.append(sc)
        for w in range(NW):
            sc = sc_all[w]
            for kk in range(BN // 16):
                a = np.stack([np.stack([sc[2 * kk][:, 0], sc[2 * kk][:, 1]], -1),
                              np.stack([sc[2 * kk][:, 2], sc[2 * kk][:, 3]], -1),
                              np.stack([sc[2 * kk + 1][:, 0], sc[2 * kk + 1][:, 1]], -1),
                              np.stack([sc[2 * kk + 1][:, 2], sc[2 * kk + 1][:, 3]], -1)])
                key = kk * 16 + (LANES & 7) + ((LANES >> 3) & 1) * 8
                for ob2 in range(OB // 2):
                    if ob2 < v_steps:
                        b = ldsm_x4(smem, sVc + swz(D, key, ob2 * 16 + (LANES >> 4) * 8), True)
                        mma(o[w, 2 * ob2], a, b[0], b[1])
                        mma(o[w, 2 * ob2 + 1], a, b[2], b[3])
        if it + 1 < n_tiles:
            n1 = n0 + BN
            load_kv("v", sV + nxt * BN * D, n1)
    for w in range(NW):
        wrow = w * 16
        for rr in range(2):
            l = quad_sum(l_i[w, rr])
            inv = np.where(l > 0, 1.0 / np.where(l > 0, l, 1.0), 0.0)
            for lane in range(32):
                i = r0 + wrow + G[lane] + rr * 8
                if i < lq:
                    row = bq * p["o_sb"] + (q0 + i) * p["o_sm"] + h * p["o_sh"]
                    for ob in range(OB):
                        col = ob * 8 + 2 * T4[lane]
                        if col < p["Kv"]:
                            assert row + col + 2 <= p["out"].size
                            p["out"][row + col] = o[w, ob][lane, 2 * rr] * inv[lane]
                            p["out"][row + col + 1] = o[w, ob][lane, 2 * rr + 1] * inv[lane]
                            p["written"][row + col:row + col + 2] += 1
                    if T4[lane] == 0:
                        li = (bq * p["H"] + h) * p["Mq"] + q0 + i
                        p["lse"][li] = (m_i[w, rr, lane] + math.log2(l[lane])) * LN2 if l[lane] > 0 else -np.inf


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


def run_case(rng, B, Mq, Mkv, H, K, Kv, kind, wl, wr, varlen=None, seqlen_k=None, bias=False,
             D=None, BM=None, BN=None):
    Kp, Kvp = K, Kv  # multiples of 8 (the glue pads)
    d = max(Kp, Kvp)
    D = D or (64 if d <= 64 else 128 if d <= 128 else 256)
    BM = BM or (64 if D >= 256 else 128)
    BN = BN or (32 if D >= 256 else 64)
    q = rng.standard_normal((B, Mq, H, Kp))
    k = rng.standard_normal((B, Mkv, H, Kp))
    v = rng.standard_normal((B, Mkv, H, Kvp))
    # strided views: head-major storage for q (like a transpose), contiguous k, v
    qs = np.ascontiguousarray(q.transpose(0, 2, 1, 3))  # [B, H, Mq, K]
    p = dict(q=qs.ravel(), k=k.ravel(), v=v.ravel(), Mq=Mq, Mkv=Mkv, H=H, K=Kp, Kv=Kvp,
             q_sb=H * Mq * Kp, q_sm=Kp, q_sh=Mq * Kp,
             k_sb=Mkv * H * Kp, k_sm=H * Kp, k_sh=Kp, v_sb=Mkv * H * Kvp, v_sm=H * Kvp, v_sh=Kvp,
             o_sb=Mq * H * Kvp, o_sm=H * Kvp, o_sh=Kvp, mask_kind=kind, wl=wl, wr=wr, scale=0.37)
    p["out"] = np.zeros(B * Mq * H * Kvp)
    p["written"] = np.zeros(B * Mq * H * Kvp)
    p["lse"] = np.full(B * H * Mq, -np.inf)
    dense = np.full((B, Mq, Mkv), -np.inf)  # additive mask (without bias)
    if varlen is not None:
        sq, sk = varlen
        p["seqstart_q"], p["seqstart_k"], p["seqlen_k"] = sq, sk, seqlen_k
        nseq = len(sq) - 1
        for s_ in range(nseq):
            lq = sq[s_ + 1] - sq[s_]
            lk = seqlen_k[s_] if seqlen_k is not None else sk[s_ + 1] - sk[s_]
            a = allowed_block(lq, lk, kind, wl, wr)
            blk = dense[0, sq[s_]:sq[s_] + lq, sk[s_]:sk[s_] + lk]
            blk[a] = 0.0
        maxq = max(sq[s_ + 1] - sq[s_] for s_ in range(nseq))
    else:
        p["seqstart_q"] = p["seqstart_k"] = None
        p["seqlen_k"] = seqlen_k
        nseq = B
        for b in range(B):
            lk = seqlen_k[b] if seqlen_k is not None else Mkv
            dense[b, :, :lk][allowed_block(Mq, lk, kind, wl, wr)] = 0.0
        maxq = Mq
    bias_t = None
    if bias:
        bias_t = rng.standard_normal((1, H, Mq, Mkv))  # broadcast over B: stride 0
        p["bias"] = bias_t.ravel()
        p["bias_sb"], p["bias_sh"], p["bias_sm"], p["bias_sn"] = 0, Mq * Mkv, Mkv, 1
    else:
        p["bias"] = None
    p["H"] = H
    stats = {"tiles": 0}
    gridx = (maxq + BM - 1) // BM
    for s_ in range(nseq):
        for h in range(H):
            for bx in range(gridx):
                kernel_cta(p, D, BM, BN, gridx, bx, h, s_, stats)
    # reference
    out = p["out"].reshape(B, Mq, H, Kvp)
    lse = p["lse"].reshape(B, H, Mq)
    err = 0.0
    for b in range(B):
        for h in range(H):
            sres = q[b, :, h] @ k[b, :, h].T * 0.37 + dense[b]
            if bias_t is not None:
                sres = sres + bias_t[0, h]
            mx = sres.max(1, keepdims=True)
            fin = np.isfinite(mx[:, 0])
            e = np.where(fin[:, None], np.exp(sres - np.where(fin[:, None], mx, 0)), 0.0)
            l = e.sum(1)
            want = np.where(fin[:, None], e @ v[b, :, h] / np.where(fin, l, 1)[:, None], 0.0)
            want_lse = np.where(fin, mx[:, 0] + np.log(np.where(fin, l, 1)), -np.inf)
            rows = np.ones(Mq, bool)
            if varlen is not None:
                rows[:] = False
                for s_ in range(nseq):
                    rows[varlen[0][s_]:varlen[0][s_ + 1]] = True
            err = max(err, np.abs(out[b, rows, h] - want[rows]).max(initial=0))
            wr_ = p["written"].reshape(B, Mq, H, Kvp)[b, :, h]
            assert (wr_[rows] == 1).all() and (wr_[~rows] == 0).all(), "each valid output element written once"
            got_l, want_l = lse[b, h, rows], want_lse[rows]
            assert np.array_equal(np.isneginf(got_l), np.isneginf(want_l)), (b, h, got_l, want_l)
            f = np.isfinite(want_l)
            err = max(err, np.abs(got_l[f] - want_l[f]).max(initial=0))
    return err, stats["tiles"]


def run_paged_case(rng, page_size, bt, ql, kstarts, klens, kind, wl, wr, K=64, Kv=64, H=2, BM=32, BN=16, D=64):
    """Paged K/V: lane s's logical key x is physical row bt[s][x // page_size] * page_size + x % page_size."""
    bt = np.asarray(bt, dtype=np.int64)
    P = (int(bt.max()) + 2) * page_size  # one page past the highest used: unused rows stay unread
    Mq = sum(ql)
    q = rng.standard_normal((1, Mq, H, K))
    k = rng.standard_normal((1, P, H, K))
    v = rng.standard_normal((1, P, H, Kv))
    sq = [0]
    for x in ql:
        sq.append(sq[-1] + x)
    p = dict(q=q.ravel(), k=k.ravel(), v=v.ravel(), Mq=Mq, Mkv=P, H=H, K=K, Kv=Kv,
             q_sb=Mq * H * K, q_sm=H * K, q_sh=K, k_sb=P * H * K, k_sm=H * K, k_sh=K,
             v_sb=P * H * Kv, v_sm=H * Kv, v_sh=Kv, o_sb=Mq * H * Kv, o_sm=H * Kv, o_sh=Kv,
             mask_kind=kind, wl=wl, wr=wr, scale=0.37, bias=None,
             seqstart_q=sq, seqstart_k=list(kstarts) + [0], seqlen_k=list(klens),
             block_table=bt.ravel(), bt_stride=bt.shape[1], bt_cols=bt.shape[1], page_size=page_size, kv_rows=P)
    p["out"] = np.zeros(Mq * H * Kv)
    p["written"] = np.zeros(Mq * H * Kv)
    p["lse"] = np.full(H * Mq, -np.inf)
    stats = {"tiles": 0}
    gridx = (max(ql) + BM - 1) // BM
    for s_ in range(len(ql)):
        for h in range(H):
            for bx in range(gridx):
                kernel_cta(p, D, BM, BN, gridx, bx, h, s_, stats)
    out, lse = p["out"].reshape(1, Mq, H, Kv), p["lse"].reshape(1, H, Mq)
    err = 0.0
    for s_, (lq, k0, lk) in enumerate(zip(ql, kstarts, klens)):
        x = np.arange(k0, k0 + lk)
        rows = bt[s_][x // page_size] * page_size + x % page_size
        a = allowed_block(lq, lk, kind, wl, wr)
        for h in range(H):
            sc = q[0, sq[s_]:sq[s_ + 1], h] @ k[0, rows, h].T * 0.37
            sc = np.where(a, sc, -np.inf)
            mx = sc.max(1, keepdims=True) if lk else np.full((lq, 1), -np.inf)
            fin = np.isfinite(mx[:, 0])
            e = np.where(fin[:, None], np.exp(sc - np.where(fin[:, None], mx, 0)), 0.0) if lk else np.zeros((lq, 0))
            l = e.sum(1)
            want = np.where(fin[:, None], e @ v[0, rows, h] / np.where(fin, l, 1)[:, None], 0.0)
            err = max(err, np.abs(out[0, sq[s_]:sq[s_ + 1], h] - want).max(initial=0))
            want_l = np.where(fin, mx[:, 0] + np.log(np.where(fin, l, 1)), -np.inf)
            got_l = lse[0, h, sq[s_]:sq[s_ + 1]]
            assert np.array_equal(np.isneginf(got_l), np.isneginf(want_l))
            f = np.isfinite(want_l)
            err = max(err, np.abs(got_l[f] - want_l[f]).max(initial=0))
            assert (p["written"].reshape(1, Mq, H, Kv)[0, sq[s_]:sq[s_ + 1], h] == 1).all()
    return err, stats["tiles"]


PAGED_CASES = [  # (page_size, block table, q lens, lane-relative key starts, key counts, kind, wl, wr)
    (4, [[5, 0, 9, 2], [1, 7, 3, 8]], [3, 6], [0, 0], [15, 16], 2, -1, -1),
    (4, [[5, 0, 9, 2], [1, 7, 3, 8]], [3, 6], [2, 5], [13, 9], 2, 2, -1),  # gappy starts, window
    (16, [[3, 1], [0, 2], [4, 5]], [17, 1, 9], [0, 3, 0], [32, 20, 0], 0, -1, -1),  # an empty lane
    (8, [[2, 6, 0, 4]], [33], [0], [31], 1, -1, -1),
]


def main():
    rng = np.random.default_rng(0)
    for c in PAGED_CASES:
        err, tiles = run_paged_case(rng, *c)
        print(f"paged err {err:.2e} tiles {tiles:4d}  {c}", flush=True)
        assert err < 1e-9, c
    cases = []
    small = dict(BM=32, BN=16)  # several key tiles with short sequences (same template logic)
    for kind, (wl, wr) in itertools.product([0, 1, 2, 3], [(-1, -1), (5, -1), (3, 2), (0, 0)]):
        cases.append(dict(B=2, Mq=37, Mkv=53, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr, **small))
        cases.append(dict(B=1, Mq=53, Mkv=21, H=1, K=64, Kv=64, kind=kind, wl=wl, wr=wr, **small))
    cases += [
        dict(B=2, Mq=40, Mkv=70, H=2, K=24, Kv=64, kind=2, wl=-1, wr=-1, bias=True, **small),
        dict(B=1, Mq=20, Mkv=40, H=1, K=64, Kv=40, kind=0, wl=-1, wr=-1, seqlen_k=[33], **small),
        dict(B=1, Mq=45, Mkv=100, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1,
             varlen=([0, 13, 13, 45], [0, 40, 50, 100]), **small),
        dict(B=1, Mq=45, Mkv=96, H=1, K=16, Kv=8, kind=1, wl=4, wr=-1,
             varlen=([0, 20, 25, 45], [0, 32, 64, 96]), seqlen_k=[30, 0, 17], **small),
        dict(B=1, Mq=45, Mkv=96, H=1, K=64, Kv=64, kind=3, wl=3, wr=6,
             varlen=([0, 20, 25, 45], [0, 32, 64, 96]), seqlen_k=[30, 3, 32], bias=True, **small),
        # real tile shapes
        dict(B=1, Mq=130, Mkv=200, H=1, K=64, Kv=64, kind=2, wl=-1, wr=-1),
        dict(B=1, Mq=70, Mkv=150, H=1, K=96, Kv=128, kind=0, wl=-1, wr=-1),
        dict(B=1, Mq=70, Mkv=75, H=1, K=256, Kv=64, kind=1, wl=-1, wr=-1),
        dict(B=1, Mq=66, Mkv=40, H=1, K=32, Kv=256, kind=3, wl=2, wr=1),
    ]
    worst = 0.0
    for c in cases:
        err, tiles = run_case(rng, **c)
        worst = max(worst, err)
        print(f"err {err:.2e} tiles {tiles:4d}  {c}", flush=True)
        assert err < 1e-9, c
    print("OK, worst", worst)


if __name__ == "__main__":
    sys.exit(main())
