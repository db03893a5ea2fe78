// The work split of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh): which (query block,
// key lane) a work tile covers, the band a mask allows, the key tiles that hold allowed keys, and the
// order of work tiles. Host and device code; tools/attention/emulate_fmha_sm90.py mirrors it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90.h"

namespace mslk::attention::sm90 {

// The (query block, key lane) of a sequence and the allowed band of a mask.
struct Block {
  int bq, q0, lq, k0, lk;
  bool ok;
};
__host__ __device__ inline Block block_of(const FmhaFwdParams& p, int s) {
  Block b;
  if (p.seqstart_q != nullptr) {
    b.bq = 0;
    b.q0 = p.seqstart_q[s];
    b.lq = p.seqstart_q[s + 1] - b.q0;
    b.k0 = p.seqstart_k[s];
    b.lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.seqstart_k[s + 1] - b.k0;
  } else {
    b.bq = s;
    b.q0 = 0;
    b.lq = p.Mq;
    b.k0 = 0;
    b.lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.Mkv;
  }
  // Memory safety against inconsistent descriptors (the glue cannot check device-side values).
  b.ok = b.q0 >= 0 && b.k0 >= 0;
  b.lq = max(0, min(b.lq, p.Mq - max(b.q0, 0)));
  b.lk = max(0, min(b.lk, p.Mkv - max(b.k0, 0)));
  return b;
}

constexpr int64_t kUnbounded = int64_t(1) << 40;

// Key j is allowed for query i (block-relative) iff j < lk and lo <= j - i - shift <= hi.
struct Band {
  int64_t shift, lo, hi;
};
__host__ __device__ inline Band band_of(const FmhaFwdParams& p, int lq, int lk) {
  const bool causal = p.mask_kind == kMaskCausalTopLeft || p.mask_kind == kMaskCausalBottomRight;
  const bool bottom_right = p.mask_kind == kMaskCausalBottomRight || p.mask_kind == kMaskLocalBottomRight;
  Band b;
  b.shift = bottom_right ? int64_t(lk) - lq : 0;
  b.hi = causal ? 0 : kUnbounded;
  if (p.window_right >= 0 && p.window_right < b.hi) b.hi = p.window_right;
  b.lo = p.window_left >= 0 ? -p.window_left : -kUnbounded;
  return b;
}

// Key tiles [n_begin, n_begin + n_tiles * bn) that hold an allowed key for some row of [r0, r1].
struct KeyTiles {
  int n_begin, n_tiles;
};
__host__ __device__ inline KeyTiles key_tiles(const Band& b, int r0, int r1, int lk, int bn) {
  int64_t jb = int64_t(r0) + b.shift + b.lo, je = int64_t(r1) + b.shift + b.hi + 1;
  jb = jb < 0 ? 0 : (jb > lk ? lk : jb);
  je = je < 0 ? 0 : (je > lk ? lk : je);
  KeyTiles t;
  t.n_begin = int(jb) / bn * bn;
  t.n_tiles = je > jb ? int((je - t.n_begin + bn - 1) / bn) : 0;
  return t;
}

// Work tile t of num_m * H * num_seqs, in sections of `group` (head, sequence) lanes (the last
// section may hold fewer): inside a section, query tiles of one index for every lane run together,
// the last query tiles (longest under a causal mask) first. A section's K/V is sized to stay in L2
// while all its query tiles read it (l2_group below): ordering every lane at once streamed K/V from
// HBM again for each query tile (ncu, B2 H32 S4096 d128: 48% L2 hit rate, cuDNN 90%).
__host__ __device__ inline void work_index(int t, int num_m, int lanes, int group, int* m_from_end, int* lane) {
  const int per = num_m * group;
  const int sec = t / per, local = t - sec * per;
  const int gs = lanes - sec * group < group ? lanes - sec * group : group;
  *m_from_end = local / gs;
  *lane = sec * group + local % gs;
}
// Varlen problems of at most kPackedSeqs sequences walk a packed tile list: only the query tiles
// that hold rows. The num_m x lanes rectangle of work_index is mostly empty when lengths differ
// (the bench's 16 sequences: 9152 of 16384 tiles), and every empty tile still cost a CTA launch.
// The CTA prologue counts each sequence's query tiles into cum (shared memory, count_tiles).
constexpr int kPackedSeqs = 128;
__host__ __device__ inline bool packed_tiles(const FmhaFwdParams& p) {
  return p.seqstart_q != nullptr && p.num_seqs <= kPackedSeqs;
}
// Query tiles of sequence s: those that hold rows of a block the kernel runs (Work::live).
__host__ __device__ inline int query_tiles(const FmhaFwdParams& p, int s, int bm) {
  const Block b = block_of(p, s);
  return b.ok ? (b.lq + bm - 1) / bm : 0;
}
// Packed tile t of H * cum[num_seqs] (cum[s]: query tiles of the sequences before s): sequence
// after sequence, head after head, and the last query tiles (longest under a causal mask) first.
// A (sequence, head) lane's tiles run together, so its K/V is read from L2 by all of them.
__host__ __device__ inline void packed_index(int t, const int* cum, int num_seqs, int H, int* s, int* h,
                                             int* m_from_end) {
  const int u = t / H;  // cum[s] * H <= t  <=>  cum[s] <= u
  int lo = 0, hi = num_seqs - 1;  // the last s with cum[s] <= u (empty sequences share their cum)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cum[mid] <= u) lo = mid; else hi = mid - 1;
  }
  const int n = cum[lo + 1] - cum[lo], local = t - cum[lo] * H;
  *s = lo;
  *h = local / n;
  *m_from_end = local - *h * n;
}

struct Work {
  int h, s, r0;
  Block blk;
  Band band;
  KeyTiles kt;
  bool live;  // the tile holds query rows (else every role skips it)
};
// cum: the packed tile counts (packed_tiles(p)), else nullptr for the rectangle of work_index.
__host__ __device__ inline Work work_of(const FmhaFwdParams& p, const int* cum, int t, int num_m, int group, int bm,
                                        int bn) {
  Work w;
  int m_from_end = 0;
  if (cum != nullptr) {
    packed_index(t, cum, p.num_seqs, p.H, &w.s, &w.h, &m_from_end);
    w.blk = block_of(p, w.s);
    w.r0 = ((w.blk.lq + bm - 1) / bm - 1 - m_from_end) * bm;
  } else {
    int lane = 0;
    work_index(t, num_m, p.H * p.num_seqs, group, &m_from_end, &lane);
    w.r0 = (num_m - 1 - m_from_end) * bm;
    w.h = lane % p.H;
    w.s = lane / p.H;
    w.blk = block_of(p, w.s);
  }
  w.live = w.blk.ok && w.r0 < w.blk.lq;
  w.band = band_of(p, w.blk.lq, w.blk.lk);
  w.kt = w.live ? key_tiles(w.band, w.r0, min(w.r0 + bm, w.blk.lq) - 1, w.blk.lk, bn) : KeyTiles{0, 0};
  return w;
}

}  // namespace mslk::attention::sm90
