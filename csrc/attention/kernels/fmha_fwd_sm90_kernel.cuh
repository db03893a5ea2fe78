// Hopper (sm_90a) fused attention forward, FlashAttention-3 structure, for fp16/bf16.
//
// Work tiles of BM = 64 x (consumer warpgroups) query rows x (head, sequence), one CTA per SM
// walking them (persistent) or one CTA per tile; one producer warpgroup and 2-4 consumer
// warpgroups (kTileCfgs' wgs):
//   WG0 producer: one thread issues TMA loads -- Q once per work tile, K and V tiles of BN keys into a
//       kStages-deep shared-memory ring, each stage guarded by a full (TMA transaction) and an
//       empty (consumer release) mbarrier; K and V have separate rings so S = Q K^T can start
//       before V lands. It gives its registers away (setmaxnreg.dec).
//   WG1.. consumers: 64 query rows each. S = Q K^T by wgmma (both operands from smem, K-major),
//       mask only on tiles that cross the allowed band or the key-lane end, online softmax in
//       registers (exp2, scale pre-multiplied by log2 e), P rounded to fp16/bf16 in registers and
//       used as the register A operand of O += P V (V as MN-major B from smem).
// Shared-memory tiles use the 128-byte swizzle that both TMA (CU_TENSOR_MAP_SWIZZLE_128B) and
// wgmma (GMMA::Layout_*_SW128_Atom) understand: each 64-column block of a tile is one TMA box of
// [rows][64] elements, rows 128 bytes apart, 16-byte chunks XOR-ed with (row & 7).
// test/cpp/test_fmha_sm90_layouts.cu checks these layouts and the register fragment
// reinterpretations on the host; tools/attention/emulate_fmha_sm90.py emulates the tile schedule,
// the barrier phases and the masking. Beside this file: fmha_fwd_sm90_work.h (the work split),
// fmha_fwd_sm90_device.cuh (device helpers), fmha_fwd_sm90_launch.cuh (the host side).
//
// With kTileCfgs' overlap = 1 each consumer warpgroup keeps S = Q K_{j+1}^T and O += P_j V_j in
// flight together and runs the softmax of S_{j+1} under the P V GEMM (FA3's intra-warpgroup
// pipelining).
// With pingpong = 1 the two consumer warpgroups also take turns issuing their GEMM batches.
// Persistent rows on dense problems whose tiles do not fill whole rounds split the last round's
// tiles by keys between consecutive CTAs (stream-K, stream_k_plan in fmha_fwd_sm90_work.h; with
// fewer tiles than SMs, every tile over min(units, SMs) CTAs): the later keys leave float32
// partials in the caller's workspace, the CTA with the first keys merges them.
// TODO(perf): K/V multicast across a cluster of two; what else a work tile costs beyond its key
// tiles (d128 dense, 16 whole rounds, H200 2026-12-02: 580-595 TFLOP/s at 32 key tiles a work tile,
// B2 H33 S4096, against 620-623 at 128, B1 H33 S16384; cuDNN 586-600 vs 603-606).
// (A dynamic tile scheduler and FA3's BN 176 were measured and dropped: fmha_fwd_sm90_configs.h.
// So was chaining a CTA's work tiles, the next tile's first Q K^T issued with this tile's last P V,
// with two Q buffers: H200, 2026-12-01, chain on vs off, medians of 5: d128 562 vs 564, d64 381 vs
// 385, d256 610 vs 619 TFLOP/s; the code is on branch wip/chain-tiles. So was a second Q buffer on
// the d64 / d128 rows, the next tile's Q loaded a K/V ring ahead: H200, 2026-12-02, medians of 7,
// on vs off: d128 589 vs 587 (H33 594 vs 592, S16384 617 vs 620), d64 420 vs 428; branch
// wip/q-double-buffer.)
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90.h"
#include "attention/kernels/fmha_fwd_sm90_configs.h"
#include "attention/kernels/fmha_fwd_sm90_work.h"

#if MSLK_HAS_CUTLASS
// First: it includes cuda.h and cudaTypedefs.h ahead of every CUTLASS header (see there).
#include "attention/kernels/fmha_fwd_sm90_device.cuh"
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace mslk::attention::sm90 {
using namespace cute;

// The consumer's lambdas hold the accumulators by reference: a lambda left out of line (NVVM did
// so for issue_pv with a BN = 176 tile) puts S, P and O on the stack.
#define MSLK_FMHA_INLINE __attribute__((always_inline))

// ---- tile configurations: fmha_fwd_sm90_configs.h (kTileCfgs; C below is a row of it).
constexpr float kMaxDrift = 8.f;  // log2 units a row max may pass its softmax reference (FA4's lazy rescale)
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
  // rounded down to 8), not the SM's 64K: a consumer setmaxnreg.inc beyond it never returns
  // (H200, 2026-12-01: 4 WGs at 24 / 120 hung, 640 threads launch with 96 each).
  static constexpr int kProducerRegs = kWGs >= 3 ? 32 : 24;
  static constexpr int kConsumerRegs = kWGs == 2 ? 240 : kWGs == 3 ? 160 : 112;
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kWGs >= 2 && kWGs <= 4, "two to four consumer warpgroups");
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= kLaunchRegs * kThreads, "register pool");
  static constexpr bool kOverlap = kTileCfgs[C].overlap != 0;
  static constexpr bool kPingPong = kTileCfgs[C].pingpong != 0;
  static constexpr bool kPersistent = kTileCfgs[C].persistent != 0;
  // The packed tile list (work_of) serves the one-CTA-per-tile rows, which varlen problems take
  // (banded_cfg). The persistent rows keep the rectangle: their producer's 24 registers spilled
  // (36 bytes, reloaded in the K/V issue loop) with both walks compiled in.
  static constexpr bool kPackedList = !kPersistent;
  static_assert(kOverlap || !kPingPong, "ping-pong is only wired into the overlapped order");
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
  static constexpr bool kOSmem = kQKVBytes + kBM * D * int(sizeof(Element)) + 2048 <= 232448;
  static constexpr uint32_t kQBytes = kBM * D * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBN * D * sizeof(Element);
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

// Kernel arguments. Tensor maps view a tensor as [batches][heads][rows][cols]; a mode whose
// stride is 0 (size 1, or broadcast by expand()) has extent 1 and its coordinate multiplier is 0.
struct Args {  // CUtensorMap carries its own alignment (64 bytes or more)
  CUtensorMap tq, tk, tv, to;  // to: O in boxes of [64 rows][64 columns] (o_tma)
  FmhaFwdParams p;
  int q_hm, q_bm, k_hm, k_bm, v_hm, v_bm;  // 1: index the head / batch mode, 0: broadcast
  float scale_log2;                        // scale * log2(e)
  int group;                               // (head, sequence) lanes per L2 section (work_index)
  int packed;                              // 1: walk the packed tile list (packed_tiles, work_of)
  int trim;                                // 1: a warpgroup skips the key tiles past its rows' band (no ping-pong rows)
  int o_vec;                               // 1: O rows take 16-byte stores (aligned, strides and Kv % 8 == 0)
  int o_tma;                               // 1: O goes through shared memory and TMA stores (kOSmem, dense rows)
  int o_hm, o_bm;                          // as q_hm / q_bm, for the map to
  StreamK sk;                              // persistent rows: the whole tiles and the stream-K tail
  float4* sk_ws;                           // stream-K partials (stream_k_workspace_bytes)
  unsigned long long* sk_flags;            // a flag a slot and consumer warpgroup
  unsigned long long sk_token;             // this launch's "partial ready" flag value
};

template <typename Element, int D, int C>
__global__ void __launch_bounds__(Traits<Element, D, C>::kThreads, 1) fmha_fwd_sm90_kernel(const __grid_constant__ Args args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = Traits<Element, D, C>;
  constexpr int BN = Tr::kBN, kStages = Tr::kStages, kBM = Tr::kBM, kConsumerWarps = Tr::kConsumerWarps;
  const FmhaFwdParams& p = args.p;

  // 1024-byte alignment of the tiles: the 128-byte swizzle is a function of the address bits.
  extern __shared__ unsigned char smem_raw[];
  const uint32_t pad = (1024u - (smem_u32(smem_raw) & 1023u)) & 1023u;
  auto& ss = *reinterpret_cast<SharedStorage<Element, D, C>*>(smem_raw + pad);

  // Persistent: CTA b runs work tiles b, b + gridDim.x, ... (Work). Every role walks the same
  // sequence and skips the same tiles; the K/V ring position (g: key tiles so far) and the Q
  // buffer's use count (qn: tiles with key tiles so far) carry across work tiles.
  const int num_m = (p.max_seqlen_q + kBM - 1) / kBM;
  const int num_rect = num_m * p.H * p.num_seqs;  // tiles of the rectangle (work_index)
  if (Tr::kPackedList && args.packed && threadIdx.x / 32 == 1) count_tiles<kBM>(p, ss.cum);
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&ss.full_q, 1);
    cutlass::arch::ClusterBarrier::init(&ss.empty_q, kConsumerWarps);
#pragma unroll
    for (int st = 0; st < kStages; ++st) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.full_k[st], 1);
      cutlass::arch::ClusterTransactionBarrier::init(&ss.full_v[st], 1);
      cutlass::arch::ClusterBarrier::init(&ss.empty_k[st], kConsumerWarps);
      cutlass::arch::ClusterBarrier::init(&ss.empty_v[st], kConsumerWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  // The tile count and the cum table are re-read where used (parameters sit in the constant bank,
  // cum in shared memory), not held in registers through the tile loop: d256's consumers spilled.
  // (Macros: the same as lambdas spilled 32 bytes in d256's consumers; undefined at the kernel's end.)
#define MSLK_NUM_WORK (Tr::kPackedList && args.packed ? p.H * ss.cum[p.num_seqs] : num_rect)
#define MSLK_CUM (Tr::kPackedList && args.packed ? ss.cum : nullptr)
  // Item i of this CTA -> Work w (its key tiles clipped to the item's) and kb_lo / kb_hi; breaks
  // the loop past the last. Persistent rows: stream_k_item (whole tiles, then the stream-K tail);
  // else work tiles blockIdx.x, + gridDim.x, ... . A stream-K part that starts past key tile 0
  // (kb_lo > 0) leaves a partial; one from key tile 0 that ends short of the last merges them.
#define MSLK_ITEM(i)                                                                          \
  int t = blockIdx.x + (i) * gridDim.x, kb_lo = 0, kb_hi = INT_MAX;                           \
  if constexpr (Tr::kPersistent) {                                                            \
    if (!stream_k_item(args.sk, blockIdx.x, gridDim.x, (i), &t, &kb_lo, &kb_hi)) break;      \
  } else if (t >= MSLK_NUM_WORK) {                                                            \
    break;                                                                                    \
  }                                                                                           \
  Work w = work_of(p, MSLK_CUM, t, num_m, args.group, kBM, BN);                               \
  w.kt.n_begin += kb_lo * BN;                                                                 \
  w.kt.n_tiles = (w.kt.n_tiles < kb_hi ? w.kt.n_tiles : kb_hi) - kb_lo

  // ================= producer warpgroup
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_tensormap(&args.tq);
      prefetch_tensormap(&args.tk);
      prefetch_tensormap(&args.tv);
      int g = 0, qn = 0;
      for (int i = 0;; ++i) {
        MSLK_ITEM(i);
        if (w.kt.n_tiles == 0) continue;  // no loads: the consumers only write zeros / -inf
        // Q buffer: free once the consumers' last Q K^T of the previous tile is done (a fresh
        // barrier passes a parity-1 wait, so the first tile does not wait).
        mbar_wait(&ss.empty_q, (qn & 1) ^ 1);
        cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full_q, Tr::kQBytes);
#pragma unroll
        for (int cb = 0; cb < D / kColBlock; ++cb)
          tma_load_4d(&args.tq, &ss.full_q, ss.q.data() + cb * kBM * kColBlock, cb * kColBlock, w.blk.q0 + w.r0,
                      w.h * args.q_hm, w.blk.bq * args.q_bm);
        ++qn;
#pragma unroll 1  // one K/V step of code: the producer has 24 registers (32 with 3-4 consumer WGs)
        for (int it = 0; it < w.kt.n_tiles; ++it, ++g) {
          const int st = g % kStages;
          const uint32_t phase = (g / kStages) & 1;
          const int row = w.blk.k0 + w.kt.n_begin + it * BN;
          mbar_wait(&ss.empty_k[st], phase ^ 1);
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full_k[st], Tr::kKVBytes);
#pragma unroll
          for (int cb = 0; cb < D / kColBlock; ++cb)
            tma_load_4d(&args.tk, &ss.full_k[st], ss.k.data() + st * BN * D + cb * BN * kColBlock, cb * kColBlock, row,
                        w.h * args.k_hm, w.blk.bq * args.k_bm);
          mbar_wait(&ss.empty_v[st], phase ^ 1);
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full_v[st], Tr::kKVBytes);
#pragma unroll
          for (int cb = 0; cb < D / kColBlock; ++cb)
            tma_load_4d(&args.tv, &ss.full_v[st], ss.v.data() + st * BN * D + cb * BN * kColBlock, cb * kColBlock, row,
                        w.h * args.v_hm, w.blk.bq * args.v_bm);
        }
      }
    }
    return;
  }

  // ================= consumer warpgroups
  cutlass::arch::warpgroup_reg_alloc<Tr::kConsumerRegs>();
  const int ctid = threadIdx.x - 128;  // 0..128*kWGs-1; the tiled MMAs give rows [64*cwg, 64*cwg+64) to warpgroup cwg
  // The warpgroup index through a shuffle, so that the compiler sees it warp-uniform (as CUTLASS
  // does): the wgmma descriptors, which depend only on it, can then live in uniform registers.
  const int cwg = __shfl_sync(0xffffffffu, ctid / 128, 0), lane = threadIdx.x % 32;

  typename Tr::MmaQK mma_qk;
  typename Tr::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(ctid);
  auto thr_pv = mma_pv.get_thread_slice(ctid);
  auto wg_qk = mma_qk.get_thread_slice(cwg * 128);  // smem operands: one descriptor a warpgroup
  auto wg_pv = mma_pv.get_thread_slice(cwg * 128);
  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Tr::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Tr::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(ss.v.data()), typename Tr::SmemLayoutVt{});
  Tensor tSrQ = wg_qk.partition_fragment_A(sQ);   // wgmma descriptors (1, 1, D/16)
  Tensor tSrK = wg_qk.partition_fragment_B(sK);   // (1, 1, D/16, stages)
  Tensor tOrV = wg_pv.partition_fragment_B(sVt);  // (1, 1, BN/16, stages)
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBM>, Int<BN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBM>, Int<D>>{});
  Tensor tOrP = make_tensor<Element>(typename Tr::LayoutP{});
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<BN>>{}));  // (row, key) in the tile
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<D>>{}));   // (row, col)
  Tensor S_rc = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));
  Tensor O_rc = make_tensor(tOrO.data(), acc_rowcol(tOrO.layout()));
  Tensor Oc_rc = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
  Tensor Sc_rc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  static_assert(size(tOrP) == size(tSrS) && size<0>(S_rc) == 2 && size<0>(O_rc) == 2, "fragment shapes");

  int g = 0, qn = 0;  // as the producer's
  for (int i = 0;; ++i) {
    MSLK_ITEM(i);
    if (!w.live) continue;
    const int h = w.h, r0 = w.r0, lq = w.blk.lq, lk = w.blk.lk;
    const Block& blk = w.blk;
    const KeyTiles& kt = w.kt;
    // The band on kj - qi (both in [0, 2^31), so the difference fits int32): its bounds clamped to
    // int32 keep every comparison exact and the per-element test in 32-bit arithmetic.
    const int dlo = int(max(w.band.lo + w.band.shift, int64_t(INT32_MIN)));
    const int dhi = int(min(w.band.hi + w.band.shift, int64_t(INT32_MAX)));
    float m_i[2] = {-INFINITY, -INFINITY};  // running row max (log2 domain), rows of S_rc
    float l_i[2] = {0.f, 0.f};              // running row sum, this thread's columns only
    float alpha[2];                         // rescale factor of O from the last softmax
    clear(tOrO);
    const int wr0 = r0 + cwg * 64;  // first query row of this warpgroup
    // Key tiles this warpgroup runs: those up to the last key any of its rows may see. Under a
    // causal band the upper warpgroups of a tall tile (BM 192 / 256) end up to 3 key tiles before
    // the tile's diagonal. Only rows without ping-pong (their warpgroups take no turns, so each may
    // issue its own number of GEMMs); the skipped tiles' stages are still released (below).
    int n_run = kt.n_tiles;
    if constexpr (!Tr::kPingPong) {
      const int64_t last_row = min(int64_t(wr0) + 63, int64_t(lq) - 1);
      const int64_t last_key = min(last_row + dhi, int64_t(lk) - 1);
      const int64_t span = last_row < wr0 ? -1 : last_key - kt.n_begin;  // keys past the tile's first
      if (args.trim) n_run = span < 0 ? 0 : int(min(int64_t(kt.n_tiles), span / BN + 1));
    }
    // Key tiles starting in [n0_lo, n0_hi] lie wholly inside the band for this warpgroup's rows:
    // n0 - wr0 - 63 >= dlo and n0 + BN - 1 - wr0 <= dhi, bounds clamped to int32 (n0 is in [0, 2^31)).
    const int n0_lo = int(max(min(int64_t(dlo) + wr0 + 63, int64_t(INT32_MAX)), int64_t(INT32_MIN)));
    const int n0_hi = int(max(min(int64_t(dhi) + wr0 - BN + 1, int64_t(INT32_MAX)), int64_t(INT32_MIN)));

    // Issues S = Q K^T on K stage st (one wgmma batch, not waited for).
    auto issue_qk = [&](int st) MSLK_FMHA_INLINE {
      warpgroup_fence_operand(tSrS);
      warpgroup_arrive();
      mma_qk.accumulate_ = GMMA::ScaleOut::Zero;
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
        cute::gemm(mma_qk, tSrQ(_, _, kb), tSrK(_, _, kb, st), tSrS);
        mma_qk.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
    };
    // Issues O += P V on V stage st for the key tile at n0 (one wgmma batch, not waited for).
    auto issue_pv = [&](int st, int n0) MSLK_FMHA_INLINE {
      if (n0 + BN > lk) {
        // Keys past the lane end have P = 0, but their V rows (another sequence, padding, or TMA
        // zero fill) may hold NaN/Inf and 0 * NaN = NaN: zero them. Both warpgroups write the same
        // zeros; each fences and syncs its own 128 threads before its wgmma reads them.
        Tensor sVs = sVt(_, _, st);
        for (int idx = (lk - n0) * D + ctid % 128; idx < BN * D; idx += 128) sVs(idx % D, idx / D) = Element(0.f);
        cutlass::arch::fence_view_async_shared();
        named_barrier_sync(kBarTail + cwg, 128);
      }
      warpgroup_fence_operand(tOrP);  // P materialised before wgmma.fence: no register writes inside the batch
      warpgroup_fence_operand(tOrO);
      warpgroup_arrive();
      mma_pv.accumulate_ = GMMA::ScaleOut::One;
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tOrP); ++kb) cute::gemm(mma_pv, tOrP(_, _, kb), tOrV(_, _, kb, st), tOrO);
      warpgroup_commit_batch();
    };
    auto release = [&](uint64_t* bar) {  // one arrival per consumer warp (the barrier counts 8)
      __syncwarp();
      if (lane == 0) cutlass::arch::ClusterBarrier::arrive(bar);
    };
    // Scale, mask, online softmax of S (key tile at n0): S becomes exp2(scale * S - m), m_i and l_i
    // advance, alpha[r] = exp2(m_old - m_new) is left for O. Touches neither O nor P.
    // A tile that needs no mask keeps S raw: the row max of scale * S is scale * max(S) (scale * min(S)
    // for a negative scale), and the scale folds into the exponent's FFMA, one multiply an element
    // fewer. A masked tile is scaled first (scale * -inf is NaN for scale = 0) and then f = 1.
    // (Four partial chains a row were timed once with the sign branch inside the row loop, which
    // kept the rows' chains apart: no change, H200 2026-11-30, d64 362 vs 362-370 TFLOP/s.)
    auto softmax = [&](int n0) MSLK_FMHA_INLINE {
      // kj - qi over this warpgroup's rows x the tile's keys spans [n0 - wr0 - 63, n0 + BN - 1 - wr0]
      const bool need_mask = n0 > lk - BN || n0 < n0_lo || n0 > n0_hi;  // else every element allowed
      if (need_mask) {
        // Row qi allows keys [qi + dlo, min(qi + dhi, lk - 1)]: once a row, as offsets from this
        // thread's first column, so an element costs two compares against a constant column offset
        // (clamped to int32: the offsets compared are in [0, BN)).
        const int col0 = get<1>(Sc_rc(0, 0));
        const int64_t key0 = int64_t(n0) + col0;
        auto clamp32 = [](int64_t v) { return int(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v); };
        int lo[2], hi[2];
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int64_t qi = int64_t(r0) + get<0>(Sc_rc(r, 0));
          lo[r] = clamp32(qi + dlo - key0);
          hi[r] = clamp32(min(qi + dhi, int64_t(lk) - 1) - key0);
        }
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          CUTE_UNROLL
          for (int c = 0; c < size<1>(S_rc); ++c) {
            const int j = get<1>(Sc_rc(r, c)) - col0;  // a compile-time constant
            const float x = S_rc(r, c) * args.scale_log2;  // a constant-bank operand: no register
            S_rc(r, c) = j < lo[r] || j > hi[r] ? -INFINITY : x;
          }
        }
      }
      const float f = need_mask ? 1.f : args.scale_log2;  // the multiplier S still needs
      // Row extremes of both rows at once, two partial chains a row (four independent FMNMX chains
      // instead of two rows one after the other), then the quad's 4 lanes (they share a row).
      // max(f * S) = f * max(S) for f >= 0, f * min(S) for f < 0 (a uniform branch outside the rows).
      constexpr int NC = size<1>(S_rc);
      static_assert(NC % 2 == 0, "column pairs");
      float mx[2];
      auto row_extremes = [&](auto is_max) MSLK_FMHA_INLINE {
        auto op = [](float a, float b) { return decltype(is_max)::value ? fmaxf(a, b) : fminf(a, b); };
        float a0[2], a1[2];
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) a0[r] = S_rc(r, 0), a1[r] = S_rc(r, 1);
        CUTE_UNROLL
        for (int c = 2; c < NC; c += 2) {
          CUTE_UNROLL
          for (int r = 0; r < 2; ++r) a0[r] = op(a0[r], S_rc(r, c)), a1[r] = op(a1[r], S_rc(r, c + 1));
        }
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          mx[r] = op(a0[r], a1[r]);
          mx[r] = op(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = op(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
      };
      if (f >= 0.f)  // uniform
        row_extremes(cute::true_type{});
      else
        row_extremes(cute::false_type{});
      float m_use[2];
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        mx[r] *= f;
        // The reference max moves only when the row max passes it by more than kMaxDrift (log2
        // units): softmax does not depend on the reference, P = exp2(S - m) <= 2^kMaxDrift stays
        // well inside float32 sums and 16-bit P, and O needs no rescale for this row (alpha = 1).
        const bool move = mx[r] > m_i[r] + kMaxDrift;  // m_i = -inf: any finite max moves it
        const float m_ref = move ? mx[r] : m_i[r];
        m_use[r] = m_ref == -INFINITY ? 0.f : m_ref;  // all masked so far: keep exp2 finite
        alpha[r] = move ? fast_exp2(m_i[r] - m_use[r]) : 1.f;
        m_i[r] = m_ref;
      }
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        float s0 = 0.f, s1 = 0.f;  // two partial sums: half the FADD chain
        CUTE_UNROLL
        for (int c = 0; c < NC; c += 2) {
          const float e0 = fast_exp2(fmaf(S_rc(r, c), f, -m_use[r]));
          const float e1 = fast_exp2(fmaf(S_rc(r, c + 1), f, -m_use[r]));
          S_rc(r, c) = e0;
          S_rc(r, c + 1) = e1;
          s0 += e0;
          s1 += e1;
        }
        l_i[r] = l_i[r] * alpha[r] + (s0 + s1);
      }
    };
    auto rescale_o = [&]() MSLK_FMHA_INLINE {
      if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;  // no row of the warp moved
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(O_rc); ++c) O_rc(r, c) *= alpha[r];
      }
    };
    auto convert_p = [&]() MSLK_FMHA_INLINE {  // P in 32-bit pairs (cvt.rn.{bf16x2,f16x2}.f32); S and P offsets agree (layout checker)
      Tensor tOrP32 = recast<uint32_t>(tOrP);
      CUTE_UNROLL
      for (int i = 0; i < size(tOrP32); ++i) tOrP32(i) = pack2<Element>(tSrS(2 * i), tSrS(2 * i + 1));
    };
    auto wait_full = [&](uint64_t* bar, int it) {  // it: key tile of this work tile
      mbar_wait(bar, uint32_t((g + it) / kStages) & 1);
    };
    // Ping-pong: each warpgroup issues n_tiles + 1 GEMM batches (prologue, loop, epilogue). Before
    // one it waits for its turn, after it hands the turn over; warpgroup 1 hands warpgroup 0 the
    // first turn and keeps its last, so every bar.sync meets exactly one bar.arrive.
    auto turn_wait = [&] {
      if constexpr (Tr::kPingPong) named_barrier_sync(kBarTurn + cwg, 256);
    };
    auto turn_pass = [&](bool last) {
      if constexpr (Tr::kPingPong) {
        if (!(last && cwg == 1)) named_barrier_arrive(kBarTurn + (cwg ^ 1), 256);
      }
    };

    if (kt.n_tiles > 0) {
      mbar_wait(&ss.full_q, qn & 1);
      if constexpr (!Tr::kOverlap) {
        // One tile at a time: the two warpgroups overlap each other's softmax and GEMMs.
        for (int it = 0; it < kt.n_tiles; ++it) {
          const int st = (g + it) % kStages, n0 = kt.n_begin + it * BN;
          wait_full(&ss.full_k[st], it);
          issue_qk(st);
          warpgroup_wait<0>();
          warpgroup_fence_operand(tSrS);
          release(&ss.empty_k[st]);
          softmax(n0);
          rescale_o();
          convert_p();
          wait_full(&ss.full_v[st], it);
          issue_pv(st, n0);
          warpgroup_wait<0>();
          warpgroup_fence_operand(tOrO);
          release(&ss.empty_v[st]);
        }
        release(&ss.empty_q);
      } else {
        // Intra-warpgroup overlap: S_{it} = Q K_{it}^T and O += P_{it-1} V_{it-1} are in flight
        // together; the softmax of S_{it} runs while the P V GEMM does (it reads P and writes O, the
        // softmax touches only S); O is rescaled once that GEMM is done.
        if (n_run > 0) {
          if constexpr (Tr::kPingPong) {
            if (cwg == 1) named_barrier_arrive(kBarTurn + 0, 256);
          }
          const int s0 = g % kStages;
          wait_full(&ss.full_k[s0], 0);
          turn_wait();
          issue_qk(s0);
          turn_pass(false);
          warpgroup_wait<0>();
          warpgroup_fence_operand(tSrS);
          release(&ss.empty_k[s0]);
          softmax(kt.n_begin);
          convert_p();  // O is still 0: no rescale
          for (int it = 1; it < n_run; ++it) {
            const int st = (g + it) % kStages, sp = (g + it - 1) % kStages;
            wait_full(&ss.full_k[st], it);
            wait_full(&ss.full_v[sp], it - 1);
            turn_wait();
            issue_qk(st);
            issue_pv(sp, kt.n_begin + (it - 1) * BN);
            turn_pass(false);
            warpgroup_wait<1>();  // the older batch, S_{it}, is done
            warpgroup_fence_operand(tSrS);
            release(&ss.empty_k[st]);
            softmax(kt.n_begin + it * BN);
            warpgroup_wait<0>();  // O += P_{it-1} V_{it-1} done: P and O are free
            warpgroup_fence_operand(tOrO);
            release(&ss.empty_v[sp]);
            rescale_o();
            convert_p();
          }
          release(&ss.empty_q);  // every Q K^T of this tile is done: the producer may load the next Q
          const int last = n_run - 1, sl = (g + last) % kStages;
          wait_full(&ss.full_v[sl], last);
          turn_wait();
          issue_pv(sl, kt.n_begin + last * BN);
          turn_pass(true);
          warpgroup_wait<0>();
          warpgroup_fence_operand(tOrO);
          release(&ss.empty_v[sl]);
        } else {
          release(&ss.empty_q);
        }
        // Key tiles past this warpgroup's band: each stage is released once its load has landed, so
        // that no warp arrives on a stage's empty barrier a use ahead of the others.
        for (int it = n_run; it < kt.n_tiles; ++it) {
          const int st = (g + it) % kStages;
          wait_full(&ss.full_k[st], it);
          release(&ss.empty_k[st]);
          wait_full(&ss.full_v[st], it);
          release(&ss.empty_v[st]);
        }
      }
      g += kt.n_tiles;
      ++qn;
    }

    // ---- stream-K: a tile's last keys leave a partial for the CTA that runs its first keys
    if constexpr (Tr::kPersistent) {
      constexpr int kNT = 128 * Tr::kWGs, kRowChunks = size<1>(O_rc) / 4;  // float4 chunks of a row
      static_assert(size<1>(O_rc) % 4 == 0 && 2 * kRowChunks + 1 == stream_k_chunks(D), "partial layout");
      auto chunk = [&](int slot, int c) { return args.sk_ws + (int64_t(slot) * stream_k_chunks(D) + c) * kNT + ctid; };
      if (kb_lo > 0) {  // O unscaled, the reference maxima and this thread's row sums
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          CUTE_UNROLL
          for (int c = 0; c < kRowChunks; ++c)
            __stcg(chunk(blockIdx.x, r * kRowChunks + c),
                   make_float4(O_rc(r, 4 * c), O_rc(r, 4 * c + 1), O_rc(r, 4 * c + 2), O_rc(r, 4 * c + 3)));
        }
        __stcg(chunk(blockIdx.x, 2 * kRowChunks), make_float4(m_i[0], m_i[1], l_i[0], l_i[1]));
        __threadfence();
        named_barrier_sync(kBarTail + cwg, 128);
        if (ctid % 128 == 0)  // + 1: the next slot holds more of this tile
          flag_release(args.sk_flags + blockIdx.x * Tr::kWGs + cwg, args.sk_token + (kb_hi < args.sk.n_kt ? 1 : 0));
        continue;  // no output: the merging CTA writes the rows
      }
      // Merge slots blockIdx.x + 1, ... (written early in those CTAs' tails) until a flag says the
      // tile ends there. The count comes from the flags, not from the plan: recomputing each CTA's
      // range here (64-bit unit math) made ptxas spill in the key loops.
      int slot = blockIdx.x;
#pragma unroll 1
      for (unsigned more = kb_hi < args.sk.n_kt ? 1u : 0u; more != 0;) {
        ++slot;
        more = flag_wait(args.sk_flags + slot * Tr::kWGs + cwg, args.sk_token);  // every thread acquires
        named_barrier_sync(kBarTail + cwg, 128);
        if (ctid % 128 == 0) args.sk_flags[slot * Tr::kWGs + cwg] = 0;  // cleared for a graph replay (the next launch)
        const float4 ml = __ldcg(chunk(slot, 2 * kRowChunks));
        const float mb[2] = {ml.x, ml.y}, lb[2] = {ml.z, ml.w};
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          // Both parts relative to their own reference max: rescale to the larger (a part whose
          // rows saw no key has m = -inf, O = 0, l = 0 and weight 0).
          const float mn = fmaxf(m_i[r], mb[r]);
          const float fa = m_i[r] == -INFINITY ? 0.f : fast_exp2(m_i[r] - mn);
          const float fb = mb[r] == -INFINITY ? 0.f : fast_exp2(mb[r] - mn);
          l_i[r] = l_i[r] * fa + lb[r] * fb;
          m_i[r] = mn;
          CUTE_UNROLL
          for (int c = 0; c < kRowChunks; ++c) {
            const float4 o = __ldcg(chunk(slot, r * kRowChunks + c));
            O_rc(r, 4 * c) = O_rc(r, 4 * c) * fa + o.x * fb;
            O_rc(r, 4 * c + 1) = O_rc(r, 4 * c + 1) * fa + o.y * fb;
            O_rc(r, 4 * c + 2) = O_rc(r, 4 * c + 2) * fa + o.z * fb;
            O_rc(r, 4 * c + 3) = O_rc(r, 4 * c + 3) * fa + o.w * fb;
          }
        }
      }
    }

    // ---- epilogue: O / l and LSE = ln(sum exp); rows with no allowed key get O = 0, LSE = -inf
    Element* out = static_cast<Element*>(p.out);
    constexpr float kLn2 = 0.6931471805599453f;
    float l_row[2], inv[2];  // a row's sum over its quad's 4 lanes, and 1 / sum (0 for an empty row)
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      float l = l_i[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      l_row[r] = l;
      inv[r] = l > 0.f ? 1.f / l : 0.f;
    }
    // A quad's 4 lanes share a row; lane q holds columns 8j + 2q, 8j + 2q + 1 of each 8-column block
    // j (the 8 x 8 matrices of an mma accumulator).
    bool stored = false;
    if constexpr (Tr::kOSmem) {
      if (args.o_tma) {  // uniform
        // With o_tma each warp writes its pairs to shared memory with stmatrix (Q's swizzled layout),
        // and one thread of the warpgroup sends its 64 rows out as [64][64] TMA boxes: the tensor
        // map's extents clip rows past Mq and columns past Kv, so only dense rows (no seqstart_q)
        // take it. The stores run on while the warpgroup goes on to its next tile. H200, 2026-12-02,
        // medians of 5-7 interleaved reps, on vs off (16-byte register stores), TFLOP/s: d128 595 vs
        // 588 and 597 vs 590, H33 601 vs 592, causal 532 vs 519, S8192 causal 595 vs 588; d64 427 vs
        // 426 and d128 S16384 617 vs 618 even.
        stored = true;
        const bool issuer = ctid % 128 == 0;
        if (issuer) tma_store_wait_read();  // the last tile's boxes have left the buffer
        named_barrier_sync(kBarTail + cwg, 128);
        const int srow = o_stmatrix_row(get<0>(Oc_rc(0, 0)), lane);  // the tile row this lane addresses
        const uint32_t obase = smem_u32(ss.o.data());
        CUTE_UNROLL
        for (int j = 0; j < size<1>(O_rc) / 2; j += 2) {  // 8-column blocks j and j + 1: four matrices
          const uint32_t addr = obase + uint32_t(o_chunk_offset(j + (lane / 16), srow, kBM));
          stmatrix_x4(addr, pack2<Element>(O_rc(0, 2 * j) * inv[0], O_rc(0, 2 * j + 1) * inv[0]),
                      pack2<Element>(O_rc(1, 2 * j) * inv[1], O_rc(1, 2 * j + 1) * inv[1]),
                      pack2<Element>(O_rc(0, 2 * j + 2) * inv[0], O_rc(0, 2 * j + 3) * inv[0]),
                      pack2<Element>(O_rc(1, 2 * j + 2) * inv[1], O_rc(1, 2 * j + 3) * inv[1]));
        }
        cutlass::arch::fence_view_async_shared();  // generic-proxy writes before the async proxy reads
        named_barrier_sync(kBarTail + cwg, 128);
        if (issuer) {
          CUTE_UNROLL
          for (int cb = 0; cb < D / kColBlock; ++cb)
            tma_store_4d(&args.to, ss.o.data() + (cb * kBM + 64 * cwg) * kColBlock, cb * kColBlock,
                         blk.q0 + r0 + 64 * cwg, h * args.o_hm, blk.bq * args.o_bm);
          tma_store_commit();
        }
      }
    }
    // Otherwise, with o_vec, four blocks at a time the quad swaps these pairs (two shfl_xor rounds: a
    // 4 x 4 transpose), so that lane q holds all 8 columns of block 4m + q and writes them in one
    // 16-byte store: whole 32-byte sectors and a quarter of the store instructions. The 4-byte stores
    // of half sectors cost 4% at d128 and 6% at d256 (H200, 2026-12-01: B2 H33 S4096 with no O
    // stores at all, 609 vs 587 and 658 vs 622 TFLOP/s).
    constexpr int kGroups = size<1>(O_rc) / 8;  // groups of four 8-column blocks
    static_assert(size<1>(O_rc) % 8 == 0, "whole groups of four 8-column blocks");
    const int quad_lane = lane & 3;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int i = r0 + get<0>(Oc_rc(r, 0));
      Element* orow = out + int64_t(blk.bq) * p.o_sb + int64_t(blk.q0 + i) * p.o_sm + int64_t(h) * p.o_sh;
      if (!stored && args.o_vec) {  // uniform; every lane of the warp shuffles, rows past lq only skip the store
        CUTE_UNROLL
        for (int m = 0; m < kGroups; ++m) {
          uint32_t v[4];  // v[k]: this lane's pair of block 4m + k, then (after the swaps) pair k of block 4m + q
          CUTE_UNROLL
          for (int k = 0; k < 4; ++k)
            v[k] = pack2<Element>(O_rc(r, 8 * m + 2 * k) * inv[r], O_rc(r, 8 * m + 2 * k + 1) * inv[r]);
          CUTE_UNROLL
          for (int sw = 1; sw <= 2; sw <<= 1) {
            const bool upper = (quad_lane & sw) != 0;
            CUTE_UNROLL
            for (int k = 0; k < 4; ++k) {
              if (k & sw) continue;  // the pair (k, k | sw): the lower lane sends v[k | sw], the upper v[k]
              const uint32_t got = __shfl_xor_sync(0xffffffffu, upper ? v[k] : v[k | sw], sw);
              if (upper)
                v[k] = got;
              else
                v[k | sw] = got;
            }
          }
          const int col = 8 * (4 * m + quad_lane);
          if (i < lq && col < p.Kv) *reinterpret_cast<uint4*>(orow + col) = make_uint4(v[0], v[1], v[2], v[3]);
        }
      }
      if (i < lq) {
        if (!stored && !args.o_vec) {
          CUTE_UNROLL
          for (int c = 0; c < size<1>(O_rc); c += 2) {  // (c, c+1): adjacent columns
            const int col = get<1>(Oc_rc(r, c));
            if (col < p.Kv)
              *reinterpret_cast<uint32_t*>(orow + col) = pack2<Element>(O_rc(r, c) * inv[r], O_rc(r, c + 1) * inv[r]);
          }
        }
        if (get<1>(Oc_rc(r, 0)) == 0)
          p.lse[(int64_t(blk.bq) * p.H + h) * p.Mq + blk.q0 + i] =
              l_row[r] > 0.f ? (m_i[r] + log2f(l_row[r])) * kLn2 : -INFINITY;
      }
    }
  }     // work tiles
  if constexpr (Tr::kOSmem) {
    if (args.o_tma && ctid % 128 == 0) tma_store_wait_all();  // the buffer outlives the boxes' reads
  }
#undef MSLK_NUM_WORK
#undef MSLK_CUM
#undef MSLK_ITEM
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
