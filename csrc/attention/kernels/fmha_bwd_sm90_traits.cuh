// Compile-time shape of the Hopper attention backward (fmha_bwd_sm90_kernel.cuh): tiles, register
// budgets, shared-memory layouts, the three tiled MMAs, the shared storage and the kernel arguments.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_bwd.h"

#if MSLK_HAS_CUTLASS
// First: it includes cuda.h and cudaTypedefs.h ahead of every CUTLASS header.
#include "attention/kernels/fmha_fwd_sm90_device.cuh"
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace mslk::attention::sm90_bwd {
using namespace cute;

constexpr int kColBlock = 64;  // elements per 128-byte swizzled row = columns of one TMA box

// One CTA per key tile of BN = 128 keys: a producer warpgroup (TMA, LSE / D rows) and two consumer
// warpgroups of 64 keys each; query tiles of BM = 64 rows (128 at d64 with kVarBM128) stream through
// a 2-stage ring.
template <typename Element, int D, int BM = 64>
struct Traits {
  static constexpr int kBN = 128, kBM = BM, kStages = 2, kWGs = 2, kD = D;
  static constexpr int kThreads = 128 * (kWGs + 1);
  static constexpr int kConsumerWarps = 4 * kWGs;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= 65536 / kThreads / 8 * 8 * kThreads,
                "register pool");
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  // BM 128 doubles the S^T / dP^T accumulators (64 + 64 registers a thread): room for it at d64 only.
  static_assert(BM == 64 || (BM == 128 && D == 64), "query tiles of 64 rows, or 128 at d64");
  static_assert(sizeof(Element) == 2, "16-bit inputs only (MN-major operands need them)");
  // d64: each warpgroup's dQ = dS K over its own 64 keys (all 64 columns), as kVarKeySplitDq does at d128
  // (kVarRowSplitDq, the library's d64: over its 64 query rows instead).
  static constexpr int kDqSplitKeys = D == 64;

  // Q and dO: [stage][D / 64][BM][64] (one TMA box per 64-column block), seen K-major (BM x D) as
  // the B operand of S^T = K Q^T, and MN-major (D x BM) as the B operand of dK += dS^T Q: the
  // MN-major atoms vary along BM first, so both views are the same bytes.
  using SmemLayoutQ =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBM>, Int<D>, Int<kStages>>{}));
  using SmemLayoutQt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                              Shape<Int<D>, Int<kBM>, Int<kStages>>{}, Step<_2, _1, _3>{}));
  // K and V: [D / 64][BN][64]; K also MN-major (D x BN) as the B operand of dQ = dS K.
  using SmemLayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBN>, Int<D>>{}));
  using SmemLayoutKt =
      decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{}, Shape<Int<D>, Int<kBN>>{}, Step<_2, _1>{}));
  // dS^T written by the consumers as [BN keys][BM queries] (K-major, the accumulator's view) and
  // read as the MN-major A operand (BM x BN) of dQ = dS K: same bytes.
  using SmemLayoutdSt = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBN>, Int<kBM>>{}));
  using SmemLayoutdS =
      decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{}, Shape<Int<kBM>, Int<kBN>>{}, Step<_2, _1>{}));

  // S^T = K Q^T and dP^T = V dO^T: keys as rows (64 a warpgroup), queries as columns.
  using MmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBM>, Int<D>>>(), Layout<Shape<_2, _1, _1>>{}));
  // dV += P^T dO and dK += dS^T Q: P^T / dS^T from registers, dO / Q MN-major from smem.
  using MmaDKV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<D>, Int<kBM>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));
  // dQ part = dS K over KW keys and NC columns (both operands MN-major from smem).
  template <int NC, int KW>
  using MmaDQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<NC>, Int<KW>>, GMMA::Major::MN, GMMA::Major::MN>()));
  // P^T / dS^T as the register A operand of one thread: (8 values of a 16-query step, 1, BM / 16),
  // the accumulator's linear order (as the forward's P).
  using LayoutP = Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBM / 16>>>;

  // dQ leaves through shared memory: each warpgroup's BM x 64 float32 part, added to the global
  // float32 sums by bulk reductions that producer warp 2 issues; 2 buffers (1 at BM 128: two would
  // not fit beside the doubled Q / dO / dS^T tiles). kVarBulkDq: rows padded to 72 floats
  // (conflict-free 8-byte stores from the accumulator layout, 16-byte aligned rows), one reduction a
  // row; kVarTileDq: each 64-row half's 4096 floats in register order, one reduction a half.
  static constexpr int kDqCols = 64, kDqLd = kDqCols + 8, kDqStages = BM == 64 ? 2 : 1;

  static constexpr uint32_t kQBytes = kBM * D * sizeof(Element);   // one Q (or dO) tile
  static constexpr uint32_t kKVBytes = kBN * D * sizeof(Element);  // the K (or V) tile
};

template <typename Element, int D, int BM = 64>
struct SharedStorage {
  using Tr = Traits<Element, D, BM>;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> q;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> dout;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> k;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> v;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutdSt>, 1024> ds;
  cute::array_aligned<float, Tr::kDqStages * Tr::kWGs * Tr::kBM * Tr::kDqLd, 128> dq;  // [stage][wg][row][kDqLd]
  float lse2[Tr::kStages][Tr::kBM];  // row_lse2 of the stage's query rows
  float dsum[Tr::kStages][Tr::kBM];  // D_i of the stage's query rows
  uint64_t full_kv;                  // K and V landed (TMA transaction)
  uint64_t full[Tr::kStages];        // Q, dO landed and the LSE / D rows written
  uint64_t empty[Tr::kStages];       // every consumer warp is done with the stage
  uint64_t dq_full[Tr::kDqStages];   // the 256 consumer threads wrote their dQ parts
  uint64_t dq_empty[Tr::kDqStages];  // warp 2's bulk reductions have read the buffer (32 lanes)
};

// Tensor maps view a tensor as [batches][heads][rows][cols] (boxes of [rows of a tile][64]); a mode
// whose stride is 0 has extent 1 and its coordinate multiplier (*_hm, *_bm) is 0.
struct Args {
  CUtensorMap tq, tk, tv, tdo;
  FmhaBwdParams p;
  const float* dsum;  // FmhaBwdScratch
  float* dq_accum;
  int q_hm, q_bm, k_hm, k_bm, v_hm, v_bm, do_hm, do_bm;
  float scale_log2;  // scale * log2(e)
};

// Kernel variants (bits of the kernel's V), kept selectable so tools/attention/fmha_bwd_sm90_check can
// time them against each other in one run; kVariant is what the library instantiates.
constexpr int kVarBulkDq = 1;    // dQ parts through shared memory + a bulk reduction a row (else 8-byte atomics)
constexpr int kVarSplitSdP = 2;  // S and dP in separate wgmma groups: P and dV under the dP GEMM
constexpr int kVarKeySplitDq = 4;  // d128: each warpgroup's dQ over its own keys, no cross-warpgroup barrier
constexpr int kVarFastIo = 8;      // dS^T by stmatrix, dQ reductions from hoisted row pointers, LSE rows in registers
constexpr int kVarPingPong = 16;   // with key-split dQ: the warpgroups alternate their S / dP GEMM issue
constexpr int kVarNoLsePrefetch = 32;  // with kVarFastIo: LSE rows read from shared memory per element
// dQ parts to shared memory in the accumulator's register order, then one bulk reduction a
// warpgroup and tile into tile-contiguous sums (fmha_bwd_dq_tiles.h); FmhaBwdParams::sm90_dq_tiles.
constexpr int kVarTileDq = 64;
constexpr int kVarBM128 = 128;  // d64: query tiles of 128 rows (wgmma N = 128 for S^T / dP^T, half the tile steps)
// With kVarBM128: each warpgroup's dQ part is its 64 query rows over all 128 keys (both halves of dS^T),
// not its 64 keys over all rows: the dQ sums receive BM x D floats a tile instead of 2 BM x D.
constexpr int kVarRowSplitDq = 256;
constexpr int kVariant = kVarSplitSdP | kVarFastIo;
// What the library instantiates, by head dim and dQ route (tools/attention/fmha_bwd_sm90_check
// --variants): 128-row query tiles at d64, their dQ divided by query rows (half the floats to the dQ
// sums); with the tile-contiguous dQ sums, LSE rows read from shared memory per element rather than
// prefetched into registers.
template <int D, bool kTiles>
constexpr int kLibraryVariant =
    kVariant | (D == 64 ? kVarBM128 | kVarRowSplitDq : 0) | (kTiles ? kVarTileDq | kVarNoLsePrefetch : 0);
// Query-tile rows of variant V.
template <int V>
constexpr int bm_of() {
  return (V & kVarBM128) != 0 ? 128 : 64;
}

// Named barriers (0 is __syncthreads), both over the 256 consumer threads.
constexpr int kBarDsFree = 1;   // both warpgroups' dQ GEMMs of the previous query tile are done
constexpr int kBarDsReady = 2;  // both halves of dS^T are in shared memory
constexpr int kBarDsReadyWg = 3;  // + warpgroup: its half of dS^T is in shared memory (kVarKeySplitDq)
constexpr int kBarSched = 5;      // + warpgroup: its turn to issue S / dP (kVarPingPong)

}  // namespace mslk::attention::sm90_bwd
#endif  // MSLK_HAS_CUTLASS
