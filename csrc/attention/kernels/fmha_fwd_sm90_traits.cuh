// Compile-time shape of a kTileCfgs row of the Hopper attention forward (Traits: tiles, register
// budgets, shared-memory layouts, the two tiled MMAs), its shared storage and the kernel's
// arguments. Device and host: test/cpp/test_fmha_sm90_layouts.cu checks the layouts.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90.h"
#include "attention/kernels/fmha_fwd_sm90_configs.h"
#include "attention/kernels/fmha_fwd_sm90_work.h"

#if MSLK_HAS_CUTLASS
// First: it includes cuda.h and cudaTypedefs.h ahead of every CUTLASS header (see there).
#include "attention/kernels/fmha_fwd_sm90_device.cuh"
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace mslk::attention::sm90 {
using namespace cute;

// Tile configurations: fmha_fwd_sm90_configs.h (kTileCfgs; C below is a row of it).
constexpr int kColBlock = 64;  // elements per 128-byte swizzled row = columns of one TMA box

template <typename Element, int D, int C = default_cfg(D)>
struct Traits {
  static_assert(C >= 0 && C < kNumTileCfgs && kTileCfgs[C].d == D, "kTileCfgs row of another head dim");
  static constexpr int kBN = kTileCfgs[C].bn, kStages = kTileCfgs[C].stages;
  // Query rows per work tile: 64 per consumer warpgroup; one producer warpgroup besides.
  static constexpr int kWGs = kTileCfgs[C].wgs, kBM = 64 * kWGs, kThreads = 128 * (kWGs + 1);
  static constexpr int kConsumerWarps = 4 * kWGs;
  // setmaxnreg budgets (multiples of 8): 24 / 240 (2 WGs), 32 / 160 (3), 24 / 112 (4: BN 64 only).
  // The pool they share is what the launch allocated, kLaunchRegs a thread (65536 / threads,
  // rounded down to 8), not the SM's 64K: a consumer setmaxnreg.inc beyond it never returns.
  static constexpr int kProducerRegs = kWGs >= 3 ? 32 : 24;
  static constexpr int kConsumerRegs = kWGs == 2 ? 240 : kWGs == 3 ? 160 : 112;
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kWGs >= 2 && kWGs <= 4, "two to four consumer warpgroups");
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= kLaunchRegs * kThreads, "register pool");
  static constexpr bool kPingPong = kTileCfgs[C].pingpong != 0;
  static constexpr bool kPersistent = kTileCfgs[C].persistent != 0;
  static constexpr bool kBias = kTileCfgs[C].bias != 0;  // the row adds a tensor bias to S
  // The packed tile list (work_of) serves the one-CTA-per-tile rows, which varlen problems take
  // (banded_cfg). The persistent rows keep the rectangle: their producer's 24 registers spilled
  // (36 bytes, reloaded in the K/V issue loop) with both walks compiled in.
  static constexpr bool kPackedList = !kPersistent;
  static_assert(kWGs == 2 || !kPingPong, "ping-pong takes turns between two warpgroups");
  static_assert(kBN > 0 && D % kColBlock == 0 && kBN % 16 == 0 && kBN <= 256, "tile config");
  static_assert(sizeof(Element) == 2, "16-bit inputs only (MN-major V needs them)");
  using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBM>, Int<D>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBN>, Int<D>, Int<kStages>>{}));
  // V seen as the (D x BN) MN-major B operand; the 8-key atoms vary fastest so that each 64-column
  // block of a stage is one [BN][64] TMA box, byte-for-byte the K layout.
  using SmemLayoutVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                              Shape<Int<D>, Int<kBN>, Int<kStages>>{}, Step<_2, _1, _3>{}));
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBN>, Int<D>>>(),
                                        Layout<Shape<Int<kWGs>, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<D>, Int<kBN>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kWGs>, _1, _1>>{}));
  // P as the A operand of one thread: (8 values of a 16-key step, 1, BN/16 steps), compact; its
  // linear order equals the S accumulator's (checked by test/cpp/test_fmha_sm90_layouts.cu).
  using LayoutP = Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBN / 16>>>;
  // O staged in shared memory for TMA stores (Args::o_tma) where it fits beside Q and the K/V ring
  // (not d256's 192 KB): [D / 64][kBM rows][64] 128-byte swizzled, Q's layout, so that each
  // warpgroup's 64 rows of a 64-column block are one [64][64] TMA box.
  static constexpr int kQKVBytes = (kBM * D + 2 * kStages * kBN * D) * int(sizeof(Element));  // Q + K/V ring
  // Bias rows: a [kBM][kBN] bias tile beside each K stage (Args::bias_tma), as [kBN / 64][kBM][64]
  // 128-byte swizzled TMA boxes (Q's layout).
  static constexpr int kBiasElems = kBias ? kStages * kBM * kBN : 0;
  static constexpr uint32_t kBiasTileBytes = kBM * kBN * sizeof(Element);
  static constexpr bool kOSmem = kQKVBytes + kBiasElems * int(sizeof(Element)) + kBM * D * int(sizeof(Element)) + 2048 <= 232448;
  static constexpr uint32_t kQBytes = kBM * D * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBN * D * sizeof(Element);
};

// The bias rows' tiles (Traits::kBiasElems), nothing for the other rows.
template <typename Element, int N>
struct BiasRing {
  cute::array_aligned<Element, N, 1024> a;
  CUTE_HOST_DEVICE Element* data() { return a.data(); }
};
template <typename Element>
struct BiasRing<Element, 0> {
  CUTE_HOST_DEVICE Element* data() { return nullptr; }
};

template <typename Element, int D, int C = default_cfg(D)>
struct SharedStorage {
  using Tr = Traits<Element, D, C>;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> q;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> k;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutVt>, 1024> v;
  cute::array_aligned<Element, Tr::kOSmem ? Tr::kBM * D : 8, 1024> o;  // Traits::kOSmem
  uint64_t full_q, empty_q;
  uint64_t full_k[Tr::kStages], empty_k[Tr::kStages], full_v[Tr::kStages], empty_v[Tr::kStages];
  int cum[kPackedSeqs + 1];  // packed tile list (work_of): query tiles of the sequences before s
  BiasRing<Element, Tr::kBiasElems> bias;  // last: rows without a bias keep their layout
};

// The O buffer's stmatrix addressing (Traits::kOSmem; checked against the TMA box layout by
// test/cpp/test_fmha_sm90_layouts.cu). Lane l of stmatrix_x4 gives the address of row l % 8 of matrix
// l / 8; matrices 0 / 1 hold rows 0-7 / 8-15 of the warp's 16 (block b8), 2 / 3 the same of block
// b8 + 1. row0: the tile row of the lane's first accumulator row (warp's first + lane / 4).
CUTE_HOST_DEVICE constexpr int o_stmatrix_row(int row0, int lane) {
  return row0 - lane / 4 + 8 * ((lane / 8) & 1) + (lane & 7);
}
// Byte offset of the 16 bytes of tile row srow, 8-column block b8, in Q's layout (bm rows).
CUTE_HOST_DEVICE constexpr int o_chunk_offset(int b8, int srow, int bm) {
  return ((b8 / 8) * bm + srow) * 128 + ((b8 % 8) ^ (srow % 8)) * 16;
}

// Kernel arguments. Tensor maps view a tensor as [batches][heads][rows][cols]; a mode whose
// stride is 0 (size 1, or broadcast by expand()) has extent 1 and its coordinate multiplier is 0.
struct Args {  // CUtensorMap carries its own alignment (64 bytes or more)
  CUtensorMap tq, tk, tv, to;  // to: O in boxes of [64 rows][64 columns] (o_tma)
  CUtensorMap tk1, tv1;        // paged K/V: K and V in 1-row boxes, for key tiles across pages
  int paged;                   // 1: K/V rows through p.block_table (load_kv_paged)
  FmhaFwdParams p;
  int q_hm, q_bm, k_hm, k_bm, v_hm, v_bm;  // 1: index the head / batch mode, 0: broadcast
  float scale_log2;                        // scale * log2(e)
  int group;                               // (head, sequence) lanes per L2 section (work_index)
  int packed;                              // 1: walk the packed tile list (packed_tiles, work_of)
  int o_vec;                               // 1: O rows take 16-byte stores (aligned, strides and Kv % 8 == 0)
  int o_tma;                               // 1: O goes through shared memory and TMA stores (kOSmem, dense rows)
  int o_hm, o_bm;                          // as q_hm / q_bm, for the map to
  CUtensorMap tb;                          // bias rows: the bias in boxes of [BM rows][64 keys] (bias_tma)
  int bias_tma;                            // 1: bias tiles by TMA into shared memory; 0: per-thread loads
  int b_hm, b_bm;                          // as q_hm / q_bm, for the map tb
  float bias_inv_scale;                    // 1 / scale: the TMA route adds b / scale to Q K^T
  StreamK sk;                              // persistent rows: the whole tiles and the stream-K tail
  float4* sk_ws;                           // stream-K partials (stream_k_workspace_bytes)
  unsigned long long* sk_flags;            // a flag a slot and consumer warpgroup
  unsigned long long sk_token;             // this launch's "partial ready" flag value
};

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
