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
// Each consumer warpgroup keeps S = Q K_{j+1}^T and O += P_j V_j in flight together and runs the
// softmax of S_{j+1} under the P V GEMM (FA3's intra-warpgroup pipelining); with ping-pong rows
// the two consumer warpgroups also take turns issuing their GEMM batches.
// Persistent rows on dense problems whose tiles do not fill whole rounds split the last round's
// tiles by keys between consecutive CTAs (stream-K, stream_k_plan in fmha_fwd_sm90_work.h): the
// later keys leave float32 partials in the caller's workspace, the CTA with the first keys merges.
// Shared-memory tiles use the 128-byte swizzle that both TMA (CU_TENSOR_MAP_SWIZZLE_128B) and
// wgmma (GMMA::Layout_*_SW128_Atom) understand: each 64-column block of a tile is one TMA box of
// [rows][64] elements, rows 128 bytes apart, 16-byte chunks XOR-ed with (row & 7).
//
// The parts, each in its own header (FlashAttention-3's split): fmha_fwd_sm90_traits.cuh (tile
// shapes, shared storage, arguments), fmha_fwd_sm90_sched.cuh (the work walk over
// fmha_fwd_sm90_work.h), fmha_fwd_sm90_mainloop.cuh (producer and GEMM issues),
// fmha_fwd_sm90_softmax.cuh (masking, online softmax), fmha_fwd_sm90_epilogue.cuh (stream-K merge,
// normalisation, stores); fmha_fwd_sm90_device.cuh and common/sm90_ptx.cuh (device helpers);
// fmha_fwd_sm90_launch.cuh (the host side). test/cpp/test_fmha_sm90_layouts.cu checks the layouts
// and fragment reinterpretations; tools/attention/emulate_fmha_sm90.py emulates the tile schedule,
// the barrier phases and the masking. Register allocation is tight (the producer runs in 24
// registers): every piece is force-inlined, and values the loops need are re-read where used
// rather than held. Measurements and dropped alternatives: docs/design/attention_sm90.md.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90_epilogue.cuh"
#include "attention/kernels/fmha_fwd_sm90_mainloop.cuh"
#include "attention/kernels/fmha_fwd_sm90_softmax.cuh"

#if MSLK_HAS_CUTLASS
#include <cutlass/arch/reg_reconfig.h>

namespace mslk::attention::sm90 {
using namespace cute;

// The parity of a ring stage's n-th use (n: key tiles issued so far).
template <int kStages>
__device__ __forceinline__ uint32_t stage_parity(int n) {
  return uint32_t(n / kStages) & 1;
}

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
  // ================= producer warpgroup
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) produce<Element, D, C>(args, ss, num_m, num_rect);
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
    Work w;
    int kb_lo, kb_hi;
    if (!work_item<Tr>(args, ss.cum, num_m, num_rect, i, w, kb_lo, kb_hi)) break;
    if (!w.live) continue;
    const int h = w.h, r0 = w.r0, lq = w.blk.lq, lk = w.blk.lk;
    const Block& blk = w.blk;
    const KeyTiles& kt = w.kt;
    // The band on kj - qi (both in [0, 2^31), so the difference fits int32): its bounds clamped to
    // int32 keep every comparison exact and the per-element test in 32-bit arithmetic.
    const int dlo = int(max(w.band.lo + w.band.shift, int64_t(INT32_MIN)));
    const int dhi = int(min(w.band.hi + w.band.shift, int64_t(INT32_MAX)));
    OnlineSoftmax sm;
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
      n_run = span < 0 ? 0 : int(min(int64_t(kt.n_tiles), span / BN + 1));
    }
    // Key tiles starting in [n0_lo, n0_hi] lie wholly inside the band for this warpgroup's rows:
    // n0 - wr0 - 63 >= dlo and n0 + BN - 1 - wr0 <= dhi, bounds clamped to int32 (n0 is in [0, 2^31)).
    const int n0_lo = int(max(min(int64_t(dlo) + wr0 + 63, int64_t(INT32_MAX)), int64_t(INT32_MIN)));
    const int n0_hi = int(max(min(int64_t(dhi) + wr0 - BN + 1, int64_t(INT32_MAX)), int64_t(INT32_MIN)));
    const BandMask<BN> mask{dlo, dhi, n0_lo, n0_hi, r0, lk};
    BiasTile bias{};
    if constexpr (Tr::kBias) {
      const int64_t e = int64_t(blk.bq) * p.bias_sb + int64_t(h) * p.bias_sh + int64_t(blk.q0 + r0) * p.bias_sm +
                        int64_t(blk.k0) * p.bias_sn;
      bias = {static_cast<const char*>(p.bias) + e * (p.bias_is_fp32 ? 4 : int64_t(sizeof(Element))), p.bias_sm,
              p.bias_sn, lq - r0, lk, p.bias_is_fp32 != 0};
    }
    // S to P of the key tile at n0 (K stage st), with the bias where the row has one; K stage st is
    // released first (the TMA route read the stage's bias before the S GEMM).
    auto softmax_update = [&](int n0, int st) __attribute__((always_inline)) {
      if constexpr (Tr::kBias) {
        if (args.bias_tma) fence_proxy_async_smem();  // the bias reads land before the TMA write that reuses the stage
      }
      release_stage(&ss.empty_k[st], lane);
      if constexpr (Tr::kBias) {
        if (!args.bias_tma) {
          sm.update_biased<Element>(S_rc, Sc_rc, mask, n0, args.scale_log2, bias);
          return;
        }
      }
      sm.update(S_rc, Sc_rc, mask, n0, args.scale_log2);
    };
    // Bias rows, TMA route: the bias of K stage st starts S's accumulator (bias_into_scores); S is
    // free here (P holds the last tile's scores).
    const bool s_acc = Tr::kBias && args.bias_tma;
    auto bias_start = [&](int st) __attribute__((always_inline)) {
      if constexpr (Tr::kBias) {
        if (s_acc)
          bias_into_scores<Element, BN, kBM>(S_rc, smem_u32(ss.bias.data() + st * kBM * BN),
                                             64 * cwg + 16 * ((ctid % 128) / 32), lane, args.bias_inv_scale);
      }
    };

    if (kt.n_tiles > 0) {
      mbar_wait(&ss.full_q, qn & 1);
      // Intra-warpgroup overlap: S_{it} = Q K_{it}^T and O += P_{it-1} V_{it-1} are in flight
      // together; the softmax of S_{it} runs while the P V GEMM does (it reads P and writes O, the
      // softmax touches only S); O is rescaled once that GEMM is done.
      if (n_run > 0) {
        if constexpr (Tr::kPingPong) {
          if (cwg == 1) named_barrier_arrive(kBarTurn + 0, 256);
        }
        const int s0 = g % kStages;
        mbar_wait(&ss.full_k[s0], stage_parity<kStages>(g));
        bias_start(s0);
        turn_wait<Tr::kPingPong>(cwg);
        issue_qk(mma_qk, tSrQ, tSrK, tSrS, s0, s_acc);
        if constexpr (Tr::kBias) {
          if (!args.bias_tma) bias.prefetch<BN>(Sc_rc, kt.n_begin, lane);
        }
        turn_pass<Tr::kPingPong>(cwg, false);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tSrS);
        softmax_update(kt.n_begin, s0);
        convert_p<Element>(tOrP, tSrS);  // O is still 0: no rescale
        for (int it = 1; it < n_run; ++it) {
          const int st = (g + it) % kStages, sp = (g + it - 1) % kStages;
          mbar_wait(&ss.full_k[st], stage_parity<kStages>(g + it));
          mbar_wait(&ss.full_v[sp], stage_parity<kStages>(g + it - 1));
          bias_start(st);
          turn_wait<Tr::kPingPong>(cwg);
          issue_qk(mma_qk, tSrQ, tSrK, tSrS, st, s_acc);
          if constexpr (Tr::kBias) {
            if (!args.bias_tma) bias.prefetch<BN>(Sc_rc, kt.n_begin + it * BN, lane);
          }
          issue_pv<Element, D, BN>(mma_pv, tOrP, tOrV, tOrO, sVt, sp, kt.n_begin + (it - 1) * BN, lk, ctid, cwg);
          turn_pass<Tr::kPingPong>(cwg, false);
          warpgroup_wait<1>();  // the older batch, S_{it}, is done
          warpgroup_fence_operand(tSrS);
          softmax_update(kt.n_begin + it * BN, st);
          warpgroup_wait<0>();  // O += P_{it-1} V_{it-1} done: P and O are free
          warpgroup_fence_operand(tOrO);
          release_stage(&ss.empty_v[sp], lane);
          sm.rescale(O_rc);
          convert_p<Element>(tOrP, tSrS);
        }
        release_stage(&ss.empty_q, lane);  // every Q K^T of this tile is done: the producer may load the next Q
        const int last = n_run - 1, sl = (g + last) % kStages;
        mbar_wait(&ss.full_v[sl], stage_parity<kStages>(g + last));
        turn_wait<Tr::kPingPong>(cwg);
        issue_pv<Element, D, BN>(mma_pv, tOrP, tOrV, tOrO, sVt, sl, kt.n_begin + last * BN, lk, ctid, cwg);
        turn_pass<Tr::kPingPong>(cwg, true);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        release_stage(&ss.empty_v[sl], lane);
      } else {
        release_stage(&ss.empty_q, lane);
      }
      // Key tiles past this warpgroup's band: each stage is released once its load has landed, so
      // that no warp arrives on a stage's empty barrier a use ahead of the others.
      for (int it = n_run; it < kt.n_tiles; ++it) {
        const int st = (g + it) % kStages;
        mbar_wait(&ss.full_k[st], stage_parity<kStages>(g + it));
        release_stage(&ss.empty_k[st], lane);
        mbar_wait(&ss.full_v[st], stage_parity<kStages>(g + it));
        release_stage(&ss.empty_v[st], lane);
      }
      g += kt.n_tiles;
      ++qn;
    }

    // ---- stream-K: a tile's last keys leave a partial for the CTA that runs its first keys
    if constexpr (Tr::kPersistent) {
      if (kb_lo > 0) {
        stream_k_save<D, Tr::kWGs>(args, O_rc, sm, ctid, cwg, kb_hi);
        continue;  // no output: the merging CTA writes the rows
      }
      stream_k_merge<D, Tr::kWGs>(args, O_rc, sm, ctid, cwg, kb_hi);
    }
    store_output<Element, D, C>(args, ss, O_rc, Oc_rc, sm, blk, h, r0, lq, ctid, cwg, lane);
  }  // work tiles
  if constexpr (Tr::kOSmem) {
    if (args.o_tma && ctid % 128 == 0) tma_store_wait_all();  // the buffer outlives the boxes' reads
  }
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
