// The work walk of the Hopper attention forward, shared by its producer and consumer roles (and
// reusable by any kernel over the same Work split, fmha_fwd_sm90_work.h): the packed tile list's
// prefix counts and the i-th item of a CTA.
#pragma once
#include "attention/kernels/fmha_fwd_sm90_traits.cuh"

#if MSLK_HAS_CUTLASS
#include <climits>

namespace mslk::attention::sm90 {

// Warp-wide: cum[s] = query tiles of sequences 0..s-1 for s in [0, num_seqs] (Args::packed).
// All loads issue before the scan, so the prologue waits one memory latency.
template <int kBM>
__device__ inline void count_tiles(const FmhaFwdParams& p, int* cum) {
  constexpr int kChunks = kPackedSeqs / 32;
  const int lane = threadIdx.x % 32;
  int n[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) n[c] = 32 * c + lane < p.num_seqs ? query_tiles(p, 32 * c + lane, kBM) : 0;
  int carry = 0;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    int v = n[c];  // inclusive scan over the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += x;
    }
    if (32 * c + lane < p.num_seqs) cum[32 * c + lane + 1] = carry + v;
    carry += __shfl_sync(0xffffffffu, v, 31);
  }
  if (lane == 0) cum[0] = 0;
}

// Item i of this CTA: Work w (its key tiles clipped to the item's) and the item's key-tile range
// [kb_lo, kb_hi); false past the last. Persistent rows: stream_k_item (whole tiles, then the
// stream-K tail); else work tiles blockIdx.x, + gridDim.x, ... . A stream-K part that starts past
// key tile 0 (kb_lo > 0) leaves a partial; one from key tile 0 that ends short of the last merges
// them. The tile count and the cum table are read here, where used (parameters sit in the
// constant bank, cum in shared memory), not held in registers through the tile loop: d256's
// consumers spilled when they were.
template <class Tr>
__device__ __forceinline__ bool work_item(const Args& args, const int* cum, int num_m, int num_rect, int i, Work& w,
                                          int& kb_lo, int& kb_hi) {
  const FmhaFwdParams& p = args.p;
  int t = blockIdx.x + i * gridDim.x;
  kb_lo = 0;
  kb_hi = INT_MAX;
  if constexpr (Tr::kPersistent) {
    if (!stream_k_item(args.sk, blockIdx.x, gridDim.x, i, &t, &kb_lo, &kb_hi)) return false;
  } else if (t >= (Tr::kPackedList && args.packed ? p.H * cum[p.num_seqs] : num_rect)) {
    return false;
  }
  w = work_of(p, Tr::kPackedList && args.packed ? cum : nullptr, t, num_m, args.group, Tr::kBM, Tr::kBN);
  w.kt.n_begin += kb_lo * Tr::kBN;
  w.kt.n_tiles = (w.kt.n_tiles < kb_hi ? w.kt.n_tiles : kb_hi) - kb_lo;
  return true;
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
