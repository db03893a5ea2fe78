// The main loop pieces of the Hopper attention forward: the producer's TMA order (Q once per work
// tile, K and V tiles through a kStages ring, each stage on a full and an empty mbarrier) and the
// consumer's GEMM issues, P conversion, stage releases and ping-pong turns. The consumer's order
// over a work tile's key tiles is in fmha_fwd_sm90_kernel.cuh.
#pragma once
#include "attention/kernels/fmha_fwd_sm90_sched.cuh"

#if MSLK_HAS_CUTLASS
#include <cutlass/arch/barrier.h>

namespace mslk::attention::sm90 {
using namespace cute;

// Paged K/V: the BN logical keys x .. x + BN - 1 of lane s (one operand, K or V) into dst. A tile
// whose keys up to the lane's last (x_last) lie in one page is one box at its physical row (rows past
// x_last are masked, or zeroed for V, by the consumers); a tile across pages goes a row at a time
// (map1: 1-row boxes; the 128-byte swizzle follows the shared-memory address, so row r lands where
// the whole box would put it), keys past x_last reading that key. A page outside the cache (negative,
// or rows past kv_rows) is placed before row 0, where TMA reads zeros, as the FA2 kernel reads it.
template <int BN, int D, typename Element>
__device__ __forceinline__ void load_kv_paged(const CUtensorMap* map, const CUtensorMap* map1, uint64_t* bar,
                                              Element* dst, const FmhaFwdParams& p, int s, int x, int x_last,
                                              int head) {
  const int* bt = p.block_table + int64_t(s) * p.bt_stride;
  const int ps = p.page_size, off = x % ps;
  auto physical = [&](int xr) {
    const int64_t page = bt[xr / ps], r = page * ps + xr % ps;
    return page < 0 || r >= p.kv_rows ? -BN : int(r);
  };
  if (off + min(BN, x_last - x + 1) <= ps) {
    const int row = physical(x);
#pragma unroll
    for (int cb = 0; cb < D / kColBlock; ++cb)
      tma_load_4d(map, bar, dst + cb * BN * kColBlock, cb * kColBlock, row, head, 0);
    return;
  }
#pragma unroll 1
  for (int r = 0; r < BN; ++r) {
    const int row = physical(min(x, x_last - r) + r);
#pragma unroll
    for (int cb = 0; cb < D / kColBlock; ++cb)
      tma_load_4d(map1, bar, dst + cb * BN * kColBlock + r * kColBlock, cb * kColBlock, row, head, 0);
  }
}

// The producer's one issuing thread: every item of this CTA in the consumers' order, so that the
// K/V ring position (g) and the Q buffer's use count (qn) agree with theirs. kPaged: K/V through the
// block table (a copy of the loop of its own, so the plain one keeps its 24 registers to itself).
template <typename Element, int D, int C, bool kPaged>
__device__ __forceinline__ void produce_walk(const Args& args, SharedStorage<Element, D, C>& ss, int num_m,
                                             int num_rect) {
  using Tr = Traits<Element, D, C>;
  constexpr int BN = Tr::kBN, kStages = Tr::kStages, kBM = Tr::kBM;
  prefetch_tensormap(&args.tq);
  prefetch_tensormap(&args.tk);
  prefetch_tensormap(&args.tv);
  if constexpr (Traits<Element, D, C>::kBias) {
    if (args.bias_tma) prefetch_tensormap(&args.tb);
  }
  int g = 0, qn = 0;
  for (int i = 0;; ++i) {
    Work w;
    int kb_lo, kb_hi;
    if (!work_item<Tr>(args, ss.cum, num_m, num_rect, i, w, kb_lo, kb_hi)) break;
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
      const int row = w.blk.k0 + w.kt.n_begin + it * BN;  // paged: the lane's logical key
      const int x_last = w.blk.k0 + w.blk.lk - 1;
      mbar_wait(&ss.empty_k[st], phase ^ 1);
      // bias rows, TMA route: the key tile's bias beside K, on K's barrier (bias_into_scores reads it)
      const bool tb = Tr::kBias && args.bias_tma;
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
          &ss.full_k[st], Tr::kKVBytes + (tb ? Tr::kBiasTileBytes : 0u));
      if (tb) {
#pragma unroll
        for (int cb = 0; cb < BN / kColBlock; ++cb)
          tma_load_4d(&args.tb, &ss.full_k[st], ss.bias.data() + st * kBM * BN + cb * kBM * kColBlock,
                      row + cb * kColBlock, w.blk.q0 + w.r0, w.h * args.b_hm, w.blk.bq * args.b_bm);
      }
      if constexpr (kPaged) {
        load_kv_paged<BN, D>(&args.tk, &args.tk1, &ss.full_k[st], ss.k.data() + st * BN * D, args.p, w.s, row, x_last,
                             w.h * args.k_hm);
      } else {
#pragma unroll
        for (int cb = 0; cb < D / kColBlock; ++cb)
          tma_load_4d(&args.tk, &ss.full_k[st], ss.k.data() + st * BN * D + cb * BN * kColBlock, cb * kColBlock, row,
                      w.h * args.k_hm, w.blk.bq * args.k_bm);
      }
      mbar_wait(&ss.empty_v[st], phase ^ 1);
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full_v[st], Tr::kKVBytes);
      if constexpr (kPaged) {
        load_kv_paged<BN, D>(&args.tv, &args.tv1, &ss.full_v[st], ss.v.data() + st * BN * D, args.p, w.s, row, x_last,
                             w.h * args.v_hm);
      } else {
#pragma unroll
        for (int cb = 0; cb < D / kColBlock; ++cb)
          tma_load_4d(&args.tv, &ss.full_v[st], ss.v.data() + st * BN * D + cb * BN * kColBlock, cb * kColBlock, row,
                      w.h * args.v_hm, w.blk.bq * args.v_bm);
      }
    }
  }
}

template <typename Element, int D, int C>
__device__ __forceinline__ void produce(const Args& args, SharedStorage<Element, D, C>& ss, int num_m, int num_rect) {
  if (args.paged) produce_walk<Element, D, C, true>(args, ss, num_m, num_rect);
  else produce_walk<Element, D, C, false>(args, ss, num_m, num_rect);
}

// Issues S = Q K^T on K stage st (one wgmma batch, not waited for); acc: S += Q K^T (S holds the
// tile's bias, bias_into_scores).
template <class Mma, class TQ, class TK, class TS>
__device__ __forceinline__ void issue_qk(Mma& mma_qk, const TQ& tSrQ, const TK& tSrK, TS& tSrS, int st,
                                         bool acc = false) {
  warpgroup_fence_operand(tSrS);
  warpgroup_arrive();
  mma_qk.accumulate_ = acc ? GMMA::ScaleOut::One : GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
    cute::gemm(mma_qk, tSrQ(_, _, kb), tSrK(_, _, kb, st), tSrS);
    mma_qk.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// Issues O += P V on V stage st for the key tile at n0 (one wgmma batch, not waited for). Keys past
// the lane end (lk) have P = 0, but their V rows (another sequence, padding, or TMA zero fill) may
// hold NaN/Inf and 0 * NaN = NaN: zero them. Both warpgroups write the same zeros; each fences and
// syncs its own 128 threads before its wgmma reads them.
template <typename Element, int D, int BN, class Mma, class TP, class TV, class TO, class SV>
__device__ __forceinline__ void issue_pv(Mma& mma_pv, TP& tOrP, const TV& tOrV, TO& tOrO, SV& sVt, int st, int n0,
                                         int lk, int ctid, int cwg) {
  if (n0 + BN > lk) {
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
}

// P in 32-bit pairs (cvt.rn.{bf16x2,f16x2}.f32); S and P offsets agree (layout checker).
template <typename Element, class TP, class TS>
__device__ __forceinline__ void convert_p(TP& tOrP, const TS& tSrS) {
  Tensor tOrP32 = recast<uint32_t>(tOrP);
  CUTE_UNROLL
  for (int i = 0; i < size(tOrP32); ++i) tOrP32(i) = pack2<Element>(tSrS(2 * i), tSrS(2 * i + 1));
}

// One arrival per consumer warp on an empty barrier (the barrier counts the consumer warps).
__device__ __forceinline__ void release_stage(uint64_t* bar, int lane) {
  __syncwarp();
  if (lane == 0) cutlass::arch::ClusterBarrier::arrive(bar);
}

// Ping-pong: each warpgroup issues n_tiles + 1 GEMM batches (prologue, loop, epilogue). Before one
// it waits for its turn, after it hands the turn over; warpgroup 1 hands warpgroup 0 the first turn
// and keeps its last, so every bar.sync meets exactly one bar.arrive.
template <bool kPingPong>
__device__ __forceinline__ void turn_wait(int cwg) {
  if constexpr (kPingPong) named_barrier_sync(kBarTurn + cwg, 256);
}
template <bool kPingPong>
__device__ __forceinline__ void turn_pass(int cwg, bool last) {
  if constexpr (kPingPong) {
    if (!(last && cwg == 1)) named_barrier_arrive(kBarTurn + (cwg ^ 1), 256);
  }
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
