// The work split of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh): which (query block,
// key lane) a work tile covers, the band a mask allows, the key tiles that hold allowed keys, and the
// order of work tiles. Host and device code; tools/attention/emulate_fmha_sm90.py mirrors it.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstdlib>

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
  // paged K/V: the lane's keys are logical, within its bt_cols pages
  const int kv_extent = p.block_table != nullptr ? p.bt_cols * p.page_size : p.Mkv;
  b.lk = max(0, min(b.lk, kv_extent - max(b.k0, 0)));
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

// Stream-K tail of the persistent rows. B2 H32 S4096 d128 makes 2048 work tiles: 15.5 rounds of
// 132 SMs, so the last round leaves half the SMs idle; B1 H4 S2048 d64 makes 32 tiles, one round
// on a quarter of the SMs. For problems whose work tiles all cost the same (no mask, no varlen, no
// per-batch key lengths), the last n_sk tiles (one round plus the remainder, or every tile when
// there are fewer than SMs) are cut into key-tile units shared evenly by the grid's CTAs: CTA b
// takes units [b * U / grid, (b + 1) * U / grid) of U = n_sk * n_kt, after its whole tiles. A tile
// is split between consecutive CTAs: those that run its later keys do so first (their range's
// first item) and leave a float32 partial (O, row max, row sums) in their workspace slot, flagged
// with whether the tile goes on past their range; the CTA that runs its first keys does so last
// and merges slots b + 1, b + 2, ... until a flag says the tile ends there (stream_k_item). With a
// round of tiles or more each CTA gets n_kt units or more, so a tile has at most two parts.
struct StreamK {
  int n_dp;  // tiles [0, n_dp) run whole, tile t on CTA t % grid (without stream-K: every tile)
  int n_sk;  // tiles [n_dp, n_dp + n_sk) are split into key-tile units (0: no stream-K)
  int n_kt;  // key tiles of every work tile
  int grid;  // CTAs to launch: min(tiles, SMs), or with fewer tiles than SMs split: min(units, SMs)
};
// The least share of the run that the tail's idle SMs must waste (counted as if a part-filled
// round cost a full one) before splitting. A part-filled last round costs less than it counts (the
// busy SMs run faster), and a split costs a partial's write and read, an extra Q load and pipeline
// fill (figures: docs/design/attention_sm90.md, "Stream-K tail").
constexpr double kStreamKMinGain = 0.05;
// Head dims whose default row splits at a smaller waste (d128 gains at 3%; d64 / d256 do not).
struct StreamKGain {
  int d;
  double min_gain;
};
inline constexpr StreamKGain kStreamKMinGainByD[] = {{128, 0.02}};
constexpr double stream_k_min_gain(int d) {
  for (const StreamKGain& g : kStreamKMinGainByD)
    if (g.d == d) return g.min_gain;
  return kStreamKMinGain;
}
// And the least key tiles a work tile must have (a split adds an item to a CTA: a Q load, a pipeline
// fill and an epilogue; the measured gains had 16-32 key tiles).
constexpr int kStreamKMinKeyTiles = 16;
// With fewer tiles than SMs a tile's first CTA merges its other parts' partials one after another,
// each a read of its O from L2 (estimated at half a key tile's time), so the time of a tile over k
// parts is about n_kt / k + k / 2 key tiles: least near k = sqrt(2 n_kt). cap_parts limits k to that
// (at least 2); without it, k is SMs / tiles.
__host__ __device__ inline int stream_k_max_parts(int n_kt) {
  int k = 2;
  while ((k + 1) * (k + 1) <= 2 * n_kt) ++k;
  return k;
}
// min_gain: kStreamKMinGain, 0 to split any tail, < 0 never; min_key_tiles (>= 2): as above
// (stream_k_policy). With fewer tiles than SMs the idle share is 1 - tiles / grid.
__host__ __device__ inline StreamK stream_k_plan(const FmhaFwdParams& p, int num_work, int sms, int bn,
                                                 double min_gain, int min_key_tiles, bool cap_parts) {
  StreamK s{num_work, 0, 0, num_work < sms ? num_work : sms};
  const bool uniform = p.seqstart_q == nullptr && p.seqlen_k == nullptr && p.mask_kind == kMaskNone &&
                       p.window_left < 0 && p.window_right < 0;
  const int n_kt = (p.Mkv + bn - 1) / bn;
  if (!uniform || min_gain < 0 || sms <= 0 || num_work <= 0 || n_kt < 2 || n_kt < min_key_tiles) return s;
  int n_sk = num_work, grid = sms;
  if (num_work > sms) {  // the last round part-filled
    const int rounds = (num_work + sms - 1) / sms;
    if (num_work % sms == 0 || rounds - double(num_work) / sms < min_gain * rounds) return s;
    n_sk = num_work >= 2 * sms ? sms + num_work % sms : num_work;  // >= sms: <= 2 CTAs a tile
  } else {  // one round on num_work SMs: every tile split, over as many SMs as there are units
    int64_t units = int64_t(num_work) * n_kt;
    if (cap_parts && units > int64_t(num_work) * stream_k_max_parts(n_kt)) units = int64_t(num_work) * stream_k_max_parts(n_kt);
    grid = int(units < sms ? units : sms);
    if (grid <= num_work || 1.0 - double(num_work) / grid < min_gain) return s;
  }
  if (int64_t(n_sk) * n_kt >= (int64_t(1) << 30)) return s;
  s.n_dp = num_work - n_sk;
  s.n_sk = n_sk;
  s.n_kt = n_kt;
  s.grid = grid;
  return s;
}
// Item i of CTA b: work tile *t and its key tiles [*kb_lo, *kb_hi) (whole tiles: [0, INT_MAX));
// false past the CTA's last item. A part with kb_lo > 0 leaves a partial in slot b (and, when
// kb_hi < n_kt, a flag that says slot b + 1 holds more of the tile); one from key tile 0 with
// kb_hi < n_kt merges slots b + 1, ... (every CTA's range is non-empty: grid <= units).
__host__ __device__ inline bool stream_k_item(const StreamK& s, int b, int grid, int i, int* t, int* kb_lo,
                                              int* kb_hi) {
  const int nd = s.n_dp > b ? (s.n_dp - b + grid - 1) / grid : 0;
  if (i < nd) {
    *t = b + i * grid;
    *kb_lo = 0;
    *kb_hi = INT_MAX;
    return true;
  }
  if (s.n_sk == 0) return false;
  const int64_t units = int64_t(s.n_sk) * s.n_kt;
  const int u0 = int(units * b / grid), u1 = int(units * (b + 1) / grid);
  const int tile = u0 / s.n_kt + (i - nd), first = tile * s.n_kt;
  if (first >= u1) return false;
  *t = s.n_dp + tile;
  *kb_lo = u0 > first ? u0 - first : 0;
  *kb_hi = u1 - first < s.n_kt ? u1 - first : s.n_kt;
  return true;
}
// forced (FmhaFwdTuning::sm90_stream_k, MSLK_FMHA_SM90_STREAMK): 0 runs every tail as whole tiles,
// 1 splits any tail that has idle SMs (work tiles of 2 key tiles or more), every idle SM taking a
// part; -1: where the waste passes stream_k_min_gain(d) and the tiles hold kStreamKMinKeyTiles, a
// tile in at most stream_k_max_parts parts.
struct StreamKPolicy {
  double min_gain;
  int min_key_tiles;
  bool cap_parts;  // stream_k_max_parts (forced: every idle SM takes a part)
};
inline StreamKPolicy stream_k_policy(int d, int forced) {  // d: the row's head dim (stream_k_min_gain)
  if (forced == 0) return {-1.0, 2, true};
  if (forced == 1) return {0.0, 2, false};
  return {stream_k_min_gain(d), kStreamKMinKeyTiles, true};
}
// Workspace of the stream-K partials: a slot per CTA, each consumer thread's O (D/2 floats), row
// maxima and row sums (2 + 2) as float4 chunks, thread-minor (coalesced); then a flag a slot and
// consumer warpgroup.
__host__ __device__ constexpr int64_t stream_k_chunks(int d) { return d / 8 + 1; }
__host__ __device__ constexpr int64_t stream_k_workspace_bytes(int d, int wgs, int grid) {
  return int64_t(grid) * (stream_k_chunks(d) * 128 * wgs * 16 + wgs * 8);
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
