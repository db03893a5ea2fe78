"""CPU emulation of csrc/gemm/kernels/fp8_rowwise_skinny.cu (no GPU needed).

Mirrors the kernel's index math line by line -- the K-split plan (the MSLK_FP8_SKINNY_SPLITS
table is parsed from fp8_rowwise_buckets.h), the CTA / warp / lane decomposition, the 16-byte
weight loads per lane, the cp.async activation stages (zero fill, commit groups, wait_group),
the B-fragment shared-memory reads, the mma.sync m16n8k32 fragments, the partials workspace and
the reduce + epilogue -- on flat byte "global memory" (bounds-checked) and a poisoned shared
memory. The MMA is written from the PTX ISA fragment tables ("Matrix Fragments for
mma.m16n8k32", 8-bit types; g = lane // 4, t = lane % 4), independently of the kernel's choice
of registers:
  A a0..a15 (register i // 4, byte i % 4): row g for i in [0, 4) u [8, 12), else g + 8;
                                          col 4t + i % 4, + 16 for i >= 8
  B b0..b7:                               row (k) 4t + i % 4, + 16 for i >= 4; col g
  C c0..c3:                               row g, + 8 for i >= 2; col 2t + i % 2
Run: python3 tools/gemm/emulate_fp8_skinny.py (a few shapes against a float64 matmul).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

KERNELS = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels"
CONFIGS = KERNELS / "fp8_rowwise_buckets.h"
WARPS, THREADS = 4, 128
ROWS_PER_CTA = 16 * WARPS
STEP, CHUNK, MAX_M = 64, 256, 64
POISON = 0x7F  # E4M3FN NaN: a read of shared memory nobody wrote shows up in the result
E4M3 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).double().numpy()

LANES = np.arange(32)
G, T = LANES // 4, LANES % 4


def split_table(path=CONFIGS):
    """Rows (max_m, max_weight_mib, ctas_per_sm, min_k_per_split) of MSLK_FP8_SKINNY_SPLITS."""
    text = path.read_text()
    body = text[text.index("#define MSLK_FP8_SKINNY_SPLITS(S)"):]
    body = body[:body.index("\n\n")]
    rows = [tuple(int(v) for v in m) for m in re.findall(r"S\((-?\d+),\s*(-?\d+),\s*(\d+),\s*(\d+)\)", body)]
    assert rows, "no MSLK_FP8_SKINNY_SPLITS rows"
    return rows


def auto_max_m(path=CONFIGS):
    return int(re.search(r"#define MSLK_FP8_SKINNY_AUTO_MAX_M (\d+)", path.read_text()).group(1))


def div_up(a, b):
    return (a + b - 1) // b


def k_per_split(K, splits):
    return div_up(div_up(K, splits), CHUNK) * CHUNK


def skinny_splits(M, N, K, L, sms, table=None):
    """fp8_rowwise_skinny_splits."""
    table = table or split_table()
    mib = N * K / 2**20
    row = table[-1]
    for r in table:
        if (r[0] < 0 or M <= r[0]) and (r[1] < 0 or mib <= r[1]):
            row = r
            break
    ctas = L * div_up(N, ROWS_PER_CTA)
    want = row[2] * max(sms, 1) // ctas
    want = min(want, K // row[3], 64)
    if want <= 1:
        return 1
    return div_up(K, k_per_split(K, want))


def skinny_applies(p):
    return (1 <= p["M"] <= MAX_M and p["K"] % 16 == 0 and p["lda"] % 16 == 0 and p["ldb"] % 16 == 0
            and p["batch_a"] % 16 == 0 and p["batch_b"] % 16 == 0 and p["a_off"] % 16 == 0 and p["b_off"] % 16 == 0)


def kernel_constants(path=KERNELS / "fp8_rowwise_skinny.cu"):
    """The kernel's tile constants, read from its source (so this mirror cannot drift silently)."""
    text = path.read_text()

    def const(name):
        return int(re.search(rf"constexpr int (?:\w+ = \w+, )?{name} = (\d+)", text).group(1))

    steps = re.search(r"kSteps = MT >= (\d+) \? (\d+) : (\d+);", text)
    return dict(warps=const("kWarps"), step=const("kStep"), chunk=const("kChunk"), max_m=const("kMaxM"),
                steps=tuple(int(v) for v in steps.groups()))


def tile_mt(M):
    return 1 if M <= 8 else 2 if M <= 16 else 4 if M <= 32 else 8


def tile_steps(MT):
    return 2 if MT >= 4 else 4


# ---- mma.sync m16n8k32 .row.col f32.e4m3.e4m3.f32, from the ISA tables ---------------------
A_ROW = np.array([[g if (i < 4 or 8 <= i < 12) else g + 8 for i in range(16)] for g in G])
A_COL = np.array([[4 * t + (i & 3) + (16 if i >= 8 else 0) for i in range(16)] for t in T])
B_ROW = np.array([[4 * t + (i & 3) + (16 if i >= 4 else 0) for i in range(8)] for t in T])
B_COL = np.array([[g] * 8 for g in G])
C_ROW = np.array([[g + (8 if i >= 2 else 0) for i in range(4)] for g in G])
C_COL = np.array([[2 * t + (i & 1) for i in range(4)] for t in T])


def _covers_once(rows, cols, shape):
    count = np.zeros(shape, np.int64)
    np.add.at(count, (rows, cols), 1)
    return bool(np.all(count == 1))


assert _covers_once(A_ROW, A_COL, (16, 32)) and _covers_once(B_ROW, B_COL, (32, 8))
assert _covers_once(C_ROW, C_COL, (16, 8))


def mma_m16n8k32(c, a_regs, b_regs):
    """c: [32, 4] float32; a_regs: [32, 4, 4] bytes (register, byte); b_regs: [32, 2, 4] bytes."""
    A = np.zeros((16, 32))
    B = np.zeros((32, 8))
    A[A_ROW, A_COL] = E4M3[a_regs.reshape(32, 16)]
    B[B_ROW, B_COL] = E4M3[b_regs.reshape(32, 8)]
    D = (A @ B).astype(np.float32)  # exact products, float32 result as the HMMA path gives
    return (c + D[C_ROW, C_COL]).astype(np.float32)


def words(v16):
    """A lane's 16 loaded bytes [32, 16] as its four .b32 registers x, y, z, w: [32, 4, 4]."""
    return v16.reshape(32, 4, 4)


# ---- the kernel -----------------------------------------------------------------------------
class Memory:
    """Flat global memory of one operand with a bounds-checked 16-byte read."""

    def __init__(self, data):
        self.data = data

    def read16(self, off):
        assert 0 <= off and off + 16 <= self.data.size, f"global read out of bounds at {off}"
        assert off % 16 == 0, f"16-byte access not 16-byte aligned: {off}"
        return self.data[off:off + 16]


def skinny_cta(p, bx, by, bz, grid_z, splits, kps, ws, out, written, a_order=(0, 1, 2, 3)):
    """One CTA of skinny_kernel<MT>; a_order permutes the A registers (tests use it to show a
    wrong fragment mapping is caught)."""
    M, N, K, L = p["M"], p["N"], p["K"], p["L"]
    MT = tile_mt(M)
    steps = tile_steps(MT)
    chunk_mt = STEP * steps
    R = 8 * MT
    stage_bytes = chunk_mt * R
    pieces = stage_bytes // 16
    assert pieces % THREADS == 0
    smem = np.full((2, stage_bytes), POISON, dtype=np.uint8)
    k_begin = by * kps
    k_end = min(k_begin + kps, K)
    nchunks = div_up(k_end - k_begin, chunk_mt) if k_end > k_begin else 0
    amem, bmem = p["a_mem"], p["b_mem"]

    for l in range(bz, L, grid_z):
        A = p["a_off"] + l * p["batch_a"]
        B = p["b_off"] + l * p["batch_b"]
        pending = []  # cp.async commit groups not yet waited for: lists of (buf, byte, 16 bytes)

        def stage_x(buf, k0, reading):
            assert buf != reading, "cp.async into the stage this chunk reads"
            group = []
            for tid in range(THREADS):
                for i0 in range(0, pieces, THREADS):
                    i = i0 + tid
                    j, r, q = i // (4 * R), (i // 4) % R, i % 4
                    k = k0 + j * STEP + 16 * q
                    ok = r < M and k < k_end
                    data = amem.read16(A + r * p["lda"] + k) if ok else np.zeros(16, np.uint8)
                    group.append((buf, 16 * i, data.copy()))
            pending.append(group)

        def wait_group(n):
            while len(pending) > n:
                for buf, off, data in pending.pop(0):
                    smem[buf, off:off + 16] = data

        def load_w(warp, k0):
            """[2 * steps][32 lanes][16 bytes] of one warp."""
            n_lo = bx * ROWS_PER_CTA + warp * 16 + G
            n_hi = n_lo + 8
            w = np.zeros((2 * steps, 32, 16), np.uint8)
            for lane in range(32):
                g, t = G[lane], T[lane]
                for j in range(steps):
                    k = k0 + j * STEP
                    inside = k + 16 * t < k_end
                    if inside and n_lo[lane] < N:
                        w[j, lane] = bmem.read16(B + n_lo[lane] * p["ldb"] + 16 * t + k)
                    if inside and n_hi[lane] < N:
                        w[steps + j, lane] = bmem.read16(B + n_hi[lane] * p["ldb"] + 16 * t + k)
            return w

        acc = np.zeros((WARPS, MT, 32, 4), np.float32)
        cur = nxt = None
        if nchunks > 0:
            stage_x(0, k_begin, None)
            cur = [load_w(w, k_begin) for w in range(WARPS)]
        for c in range(nchunks):
            more = c + 1 < nchunks
            if more:
                stage_x((c + 1) & 1, k_begin + (c + 1) * chunk_mt, c & 1)
                nxt = [load_w(w, k_begin + (c + 1) * chunk_mt) for w in range(WARPS)]
                wait_group(1)
            else:
                wait_group(0)
            x = smem[c & 1]
            for warp in range(WARPS):
                for j in range(steps):
                    lo, hi = words(cur[warp][j]), words(cur[warp][steps + j])
                    for nt in range(MT):
                        base = j * R * 64 + nt * 512 + 16 * LANES
                        b = words(np.stack([x[o:o + 16] for o in base]))
                        regs0 = [lo[:, 0], hi[:, 0], lo[:, 1], hi[:, 1]]  # h = 0: bytes 0..7
                        regs1 = [lo[:, 2], hi[:, 2], lo[:, 3], hi[:, 3]]  # h = 1: bytes 8..15
                        a0 = np.stack([regs0[o] for o in a_order], axis=1)
                        a1 = np.stack([regs1[o] for o in a_order], axis=1)
                        d = np.zeros((32, 4), np.float32)
                        d = mma_m16n8k32(d, a0, b[:, 0:2])
                        d = mma_m16n8k32(d, a1, b[:, 2:4])
                        acc[warp, nt] = (acc[warp, nt] + d).astype(np.float32)
            # (__syncthreads: the next stage_x refills buffer c & 1 only after every warp read it)
            if more:
                cur = nxt

        for warp in range(WARPS):
            n_lo = bx * ROWS_PER_CTA + warp * 16 + G
            for nt in range(MT):
                for i in range(4):
                    m = 8 * nt + 2 * T + (i & 1)
                    n = n_lo + (8 if i >= 2 else 0)
                    for lane in range(32):
                        if m[lane] >= M or n[lane] >= N:
                            continue
                        v = acc[warp, nt, lane, i]
                        if splits > 1:
                            e = (by * L + l) * M * N + m[lane] * N + n[lane]
                            assert 0 <= e < ws.size
                            ws[e] = v
                        else:
                            store_out(p, l, m[lane], n[lane], v, out, written)


def store_out(p, l, m, n, acc, out, written):
    f32 = np.float32
    xs = p["x_scale"][l * p["batch_xs"] + m]
    wsc = p["w_scale"][l * p["batch_ws"] + n]
    bias = p["bias"][l * p["batch_bias"] + n] if p["bias"] is not None else f32(0)
    v = np.float32(np.float64(xs) * np.float64(f32(wsc * f32(acc))) + np.float64(bias))  # fmaf, to float32 accuracy
    o = l * p["batch_d"] + m * p["ldd"] + n
    assert 0 <= o < out.size, f"output index {o} out of bounds"
    out[o] = v
    written[o] += 1


def reduce(p, splits, ws, out, written):
    """skinny_reduce: sum of the partials in split order, then the epilogue."""
    M, N, L = p["M"], p["N"], p["L"]
    mn, total = M * N, L * M * N
    for e in range(total):
        v = np.float32(0)
        for s in range(splits):
            v = np.float32(v + ws[s * total + e])
        l, r = divmod(e, mn)
        m, n = divmod(r, N)
        store_out(p, l, m, n, v, out, written)


def run(p, splits, a_order=(0, 1, 2, 3)):
    """fp8_rowwise_skinny: returns (float32 pre-rounding output, flat; write counts)."""
    assert skinny_applies(p)
    kps = k_per_split(p["K"], splits)
    splits = div_up(p["K"], kps)
    out = np.full(p["out_size"], np.nan, np.float32)
    written = np.zeros(p["out_size"], np.int64)
    ws = np.full(max(splits, 1) * p["L"] * p["M"] * p["N"], np.nan, np.float32) if splits > 1 else None
    grid_z = min(p["L"], 65535)
    for bz in range(grid_z):
        for by in range(splits):
            for bx in range(div_up(p["N"], ROWS_PER_CTA)):
                skinny_cta(p, bx, by, bz, grid_z, splits, kps, ws, out, written, a_order)
    if splits > 1:
        assert not np.isnan(ws).any(), "a partial was never written"
        reduce(p, splits, ws, out, written)
    return out, written, splits


# ---- problems -------------------------------------------------------------------------------
def make_problem(M, N, K, L=1, broadcast_w=False, lda_pad=0, ldb_pad=0, ldd_pad=0, bias=True, seed=0):
    """Random E4M3 operands laid out in flat memory with the given padding (strides in bytes /
    elements), batch strides (0 for a broadcast weight) and a 16-byte aligned start offset."""
    rng = np.random.default_rng(seed)
    lda, ldb, ldd = K + lda_pad, K + ldb_pad, N + ldd_pad
    batch_a, batch_b = M * lda + 16 * (L > 1), 0 if broadcast_w else N * ldb + 32
    a_off, b_off = 48, 16
    a_mem = np.full(a_off + (L - 1) * batch_a + M * lda + 64, 0x7F, np.uint8)  # NaN wherever not an element
    b_mem = np.full(b_off + (0 if broadcast_w else (L - 1) * batch_b) + N * ldb + 64, 0x7F, np.uint8)
    finite = np.array([b for b in range(256) if np.isfinite(E4M3[b])], np.uint8)
    for l in range(L):
        for m in range(M):
            o = a_off + l * batch_a + m * lda
            a_mem[o:o + K] = rng.choice(finite, K)
        for n in range(N if (l == 0 or not broadcast_w) else 0):
            o = b_off + l * batch_b + n * ldb
            b_mem[o:o + K] = rng.choice(finite, K)
    p = dict(M=M, N=N, K=K, L=L, lda=lda, ldb=ldb, ldd=ldd, batch_a=batch_a, batch_b=batch_b,
             batch_d=M * ldd, a_off=a_off, b_off=b_off, a_mem=Memory(a_mem), b_mem=Memory(b_mem),
             x_scale=(rng.random(L * M) * 0.02 + 1e-3).astype(np.float32), batch_xs=M,
             w_scale=(rng.random((1 if broadcast_w else L) * N) * 0.02 + 1e-3).astype(np.float32),
             batch_ws=0 if broadcast_w else N,
             bias=(rng.standard_normal(L * N) * 4).astype(np.float32) if bias else None, batch_bias=N)
    p["out_size"] = L * M * ldd
    return p


def reference(p):
    """float64 [L, M, N] of the contract and the magnitude sum |a||b| (for tolerances)."""
    M, N, K, L = p["M"], p["N"], p["K"], p["L"]
    ref = np.zeros((L, M, N))
    mag = np.zeros((L, M, N))
    for l in range(L):
        a = np.stack([E4M3[p["a_mem"].data[p["a_off"] + l * p["batch_a"] + m * p["lda"]:][:K]] for m in range(M)])
        b = np.stack([E4M3[p["b_mem"].data[p["b_off"] + l * p["batch_b"] + n * p["ldb"]:][:K]] for n in range(N)])
        acc = a @ b.T
        xs = p["x_scale"][l * M:(l + 1) * M].astype(np.float64)
        ws = p["w_scale"][l * p["batch_ws"]:l * p["batch_ws"] + N].astype(np.float64)
        bias = p["bias"][l * N:(l + 1) * N].astype(np.float64) if p["bias"] is not None else 0.0
        ref[l] = xs[:, None] * ws[None, :] * acc + bias
        mag[l] = np.abs(xs[:, None] * ws[None, :]) * (np.abs(a) @ np.abs(b).T)
    return ref, mag


def check(p, out, written):
    """Every element written exactly once (and nothing else); values match float64 to float32
    accumulation accuracy."""
    M, N, L, ldd = p["M"], p["N"], p["L"], p["ldd"]
    idx = np.array([l * p["batch_d"] + m * ldd + n for l in range(L) for m in range(M) for n in range(N)])
    expect_written = np.zeros_like(written)
    expect_written[idx] = 1
    assert np.array_equal(written, expect_written), "an element was written twice, never, or outside the output"
    ref, mag = reference(p)
    got = out[idx].reshape(L, M, N).astype(np.float64)
    err = np.abs(got - ref)
    bias = np.abs(p["bias"]).max() if p["bias"] is not None else 0.0
    bound = 1e-5 * (mag + np.abs(ref) + bias) + 1e-30
    assert np.all(err <= bound), f"max err {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


def main():
    cases = [dict(M=1, N=72, K=96), dict(M=9, N=100, K=48 * 11, L=2, broadcast_w=True, lda_pad=16),
             dict(M=33, N=24, K=272, ldb_pad=32, ldd_pad=3)]
    for c in cases:
        for splits in (1, 3):
            p = make_problem(**c)
            out, written, used = run(p, splits)
            check(p, out, written)
            print(f"ok {c} splits requested {splits}, used {used}")


if __name__ == "__main__":
    main()
