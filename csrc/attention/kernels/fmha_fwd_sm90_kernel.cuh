// Hopper (sm_90a) fused attention forward, FlashAttention-3 structure, for fp16/bf16.
//
// Work tiles of 128 query rows x (head, sequence), one CTA per SM walking them (persistent) or one
// CTA per tile; 3 warpgroups (384 threads):
//   WG0 producer: one thread issues TMA loads -- Q once per work tile, K and V tiles of BN keys into a
//       kStages-deep shared-memory ring, each stage guarded by a full (TMA transaction) and an
//       empty (consumer release) mbarrier; K and V have separate rings so S = Q K^T can start
//       before V lands. It gives its registers away (setmaxnreg.dec).
//   WG1, WG2 consumers: 64 query rows each. S = Q K^T by wgmma (both operands from smem, K-major),
//       mask only on tiles that cross the allowed band or the key-lane end, online softmax in
//       registers (exp2, scale pre-multiplied by log2 e), P rounded to fp16/bf16 in registers and
//       used as the register A operand of O += P V (V as MN-major B from smem).
// Shared-memory tiles use the 128-byte swizzle that both TMA (CU_TENSOR_MAP_SWIZZLE_128B) and
// wgmma (GMMA::Layout_*_SW128_Atom) understand: each 64-column block of a tile is one TMA box of
// [rows][64] elements, rows 128 bytes apart, 16-byte chunks XOR-ed with (row & 7).
// test/cpp/test_fmha_sm90_layouts.cu checks these layouts and the register fragment
// reinterpretations on the host; tools/attention/emulate_fmha_sm90.py emulates the tile schedule,
// the barrier phases and the masking.
//
// With kTileCfgs' overlap = 1 each consumer warpgroup keeps S = Q K_{j+1}^T and O += P_j V_j in
// flight together and runs the softmax of S_{j+1} under the P V GEMM (FA3's intra-warpgroup
// pipelining).
// With pingpong = 1 the two consumer warpgroups also take turns issuing their GEMM batches.
// TODO(perf): a dynamic (atomic) tile scheduler for causal / varlen imbalance, a TMA-store
// epilogue through shared memory, BN = 176 / 80 tiles as in FA3 for d128 / d256.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdlib>
#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90.h"
#include "attention/kernels/fmha_fwd_sm90_configs.h"

#if MSLK_HAS_CUTLASS
#include <cuda.h>  // CUtensorMap and the driver enums (types only: no -lcuda)
#include <cudaTypedefs.h>
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
  static constexpr int kProducerRegs = kWGs == 3 ? 32 : 24;
  static constexpr int kConsumerRegs = kWGs == 2 ? 240 : kWGs == 3 ? 160 : 112;
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kWGs >= 2 && kWGs <= 4, "two to four consumer warpgroups");
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= kLaunchRegs * kThreads, "register pool");
  static constexpr bool kOverlap = kTileCfgs[C].overlap != 0;
  static constexpr bool kPingPong = kTileCfgs[C].pingpong != 0;
  static constexpr bool kPersistent = kTileCfgs[C].persistent != 0;
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
  static constexpr uint32_t kQBytes = kBM * D * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBN * D * sizeof(Element);
};

template <typename Element, int D, int C = default_cfg(D)>
struct SharedStorage {
  using Tr = Traits<Element, D, C>;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> q;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> k;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutVt>, 1024> v;
  uint64_t full_q, empty_q;
  uint64_t full_k[Tr::kStages], empty_k[Tr::kStages], full_v[Tr::kStages], empty_v[Tr::kStages];
};

// Kernel arguments. Tensor maps view a tensor as [batches][heads][rows][cols]; a mode whose
// stride is 0 (size 1, or broadcast by expand()) has extent 1 and its coordinate multiplier is 0.
struct Args {  // CUtensorMap carries its own alignment (64 bytes or more)
  CUtensorMap tq, tk, tv;
  FmhaFwdParams p;
  int q_hm, q_bm, k_hm, k_bm, v_hm, v_bm;  // 1: index the head / batch mode, 0: broadcast
  float scale_log2;                        // scale * log2(e)
  int group;                               // (head, sequence) lanes per L2 section (work_index)
};

// ---- the (query block, key lane) of a sequence and the allowed band of a mask
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
struct Work {
  int h, s, r0;
  Block blk;
  Band band;
  KeyTiles kt;
  bool live;  // the tile holds query rows (else every role skips it)
};
__host__ __device__ inline Work work_of(const FmhaFwdParams& p, int t, int num_m, int group, int bm, int bn) {
  Work w;
  int m_from_end = 0, lane = 0;
  work_index(t, num_m, p.H * p.num_seqs, group, &m_from_end, &lane);
  w.r0 = (num_m - 1 - m_from_end) * bm;
  w.h = lane % p.H;
  w.s = lane / p.H;
  w.blk = block_of(p, w.s);
  w.live = w.blk.ok && w.r0 < w.blk.lq;
  w.band = band_of(p, w.blk.lq, w.blk.lk);
  w.kt = w.live ? key_tiles(w.band, w.r0, min(w.r0 + bm, w.blk.lq) - 1, w.blk.lk, bn) : KeyTiles{0, 0};
  return w;
}

// ---- device helpers
__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
// One TMA box into shared memory, completing `bytes` of the transaction on `bar`.
__device__ __forceinline__ void tma_load_4d(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}
// mbarrier parity wait with a watchdog: a protocol bug traps (a launch error; compute-sanitizer
// names the line) instead of hanging the GPU. 20 s is far beyond any legitimate wait. One asm
// block (labels are local to its braces), so the hot path adds no live registers or branches
// to the surrounding code.
constexpr uint64_t kWatchdogNs = 20ull * 1000 * 1000 * 1000;
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      ".reg .u64 t0, t1;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra.uni WAIT_DONE;\n"
      "mov.u64 t0, %%globaltimer;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra.uni WAIT_DONE;\n"
      "mov.u64 t1, %%globaltimer;\n"
      "sub.u64 t1, t1, t0;\n"
      "setp.gt.u64 p, t1, %2;\n"
      "@p trap;\n"
      "bra.uni WAIT_LOOP;\n"
      "WAIT_DONE:\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity), "l"(kWatchdogNs)
      : "memory");
}
__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Named barriers (0 is __syncthreads): per-warpgroup V-tail zeroing, and the ping-pong turns.
constexpr int kBarTail = 1;  // + consumer warpgroup (128 threads): 1..4
constexpr int kBarTurn = 5;  // + consumer warpgroup whose turn it is (256 threads: 128 arrive, 128 sync)
template <typename Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// A wgmma accumulator fragment ((2 cols, 2 rows, N/8), 1, 1) seen as (2 rows, (2 cols, N/8)).
template <class L>
CUTE_HOST_DEVICE constexpr auto acc_rowcol(L l) {
  static_assert(rank(L{}) == 3 && size<1>(L{}) == 1 && size<2>(L{}) == 1, "one wgmma tile per thread");
  auto v = get<0>(l);
  return make_layout(get<1>(v), make_layout(get<0>(v), get<2>(v)));
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
  const int num_work = num_m * p.H * p.num_seqs;

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
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.tq)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.tk)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.tv)) : "memory");
      int g = 0, qn = 0;
      for (int t = blockIdx.x; t < num_work; t += gridDim.x) {
        const Work w = work_of(p, t, num_m, args.group, kBM, BN);
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
  for (int t = blockIdx.x; t < num_work; t += gridDim.x) {
    const Work w = work_of(p, t, num_m, args.group, kBM, BN);
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
        for (int it = 1; it < kt.n_tiles; ++it) {
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
        const int last = kt.n_tiles - 1, sl = (g + last) % kStages;
        wait_full(&ss.full_v[sl], last);
        turn_wait();
        issue_pv(sl, kt.n_begin + last * BN);
        turn_pass(true);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        release(&ss.empty_v[sl]);
      }
      g += kt.n_tiles;
      ++qn;
    }

    // ---- epilogue: O / l and LSE = ln(sum exp); rows with no allowed key get O = 0, LSE = -inf
    Element* out = static_cast<Element*>(p.out);
    constexpr float kLn2 = 0.6931471805599453f;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      float l = l_i[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int i = r0 + get<0>(Oc_rc(r, 0));
      if (i < lq) {
        Element* orow = out + int64_t(blk.bq) * p.o_sb + int64_t(blk.q0 + i) * p.o_sm + int64_t(h) * p.o_sh;
        CUTE_UNROLL
        for (int c = 0; c < size<1>(O_rc); c += 2) {  // (c, c+1): adjacent columns
          const int col = get<1>(Oc_rc(r, c));
          if (col < p.Kv)
            *reinterpret_cast<uint32_t*>(orow + col) = pack2<Element>(O_rc(r, c) * inv, O_rc(r, c + 1) * inv);
        }
        if (get<1>(Oc_rc(r, 0)) == 0)
          p.lse[(int64_t(blk.bq) * p.H + h) * p.Mq + blk.q0 + i] = l > 0.f ? (m_i[r] + log2f(l)) * kLn2 : -INFINITY;
      }
    }
  }     // work tiles
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// ---- host side
using EncodeTiledFn = PFN_cuTensorMapEncodeTiled_v12000;
// The driver entry point through the runtime (no -lcuda); process-wide, device-independent.
inline EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return EncodeTiledFn(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// Tensor map over [batches][heads][rows][cols] with element strides; boxes of [box_rows][64].
// A stride-0 mode gets extent 1 (and a packed stride the driver accepts); *_mul = 0 marks it.
inline bool encode_map(CUtensorMap* map, const void* base, bool bf16, int cols, int rows, int heads, int batches,
                       int64_t s_row, int64_t s_head, int64_t s_batch, int box_rows, int* head_mul, int* batch_mul) {
  const EncodeTiledFn fn = encode_tiled_fn();
  if (fn == nullptr) return false;
  constexpr uint64_t es = 2;
  const int64_t st[3] = {s_row, s_head, s_batch};
  const int ext[3] = {rows, heads, batches};
  cuuint64_t dim[4] = {cuuint64_t(cols), 1, 1, 1};
  cuuint64_t stride[3];
  uint64_t packed = uint64_t(cols) * es;
  for (int i = 0; i < 3; ++i) {
    dim[i + 1] = st[i] != 0 ? cuuint64_t(ext[i]) : 1;
    stride[i] = st[i] != 0 ? cuuint64_t(st[i]) * es : packed;
    packed = stride[i] * dim[i + 1];
  }
  *head_mul = s_head != 0;
  *batch_mul = s_batch != 0;
  const cuuint32_t box[4] = {cuuint32_t(kColBlock), cuuint32_t(box_rows), 1, 1};
  const cuuint32_t elem_stride[4] = {1, 1, 1, 1};
  const CUresult r = fn(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                        const_cast<void*>(base), dim, stride, box, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds elements read as zero
  return r == CUDA_SUCCESS;
}

// Lanes per L2 section (work_index): as many as keep their K and V within kL2SectionMiB, a third of
// the H200's 50 MB L2 (H200, 2026-11-30, bench/attention/results_tune_fmha_sm90.md: non-causal d128
// 422 TFLOP/s with one section, 506 / 500 / 499 / 480 with 8 / 16 / 24 / 40 MiB; d256 522 -> 560 /
// 557 / 513 / 534). MSLK_FMHA_SM90_L2_MIB=<n> (read per call, for tuning) overrides it; 0 puts every
// lane in one section (the order before sections).
constexpr int kL2SectionMiB = 16;
inline int l2_group(const FmhaFwdParams& p) {
  const int lanes = p.H * p.num_seqs;
  int mib = kL2SectionMiB;
  if (const char* e = std::getenv("MSLK_FMHA_SM90_L2_MIB"); e != nullptr && *e != '\0') mib = std::atoi(e);
  if (mib <= 0) return lanes;
  // keys per lane: a batch's Mkv, or the mean key-lane length of a varlen / paged problem
  const int64_t keys = p.seqstart_q == nullptr ? int64_t(p.Mkv)
                       : p.block_table != nullptr ? int64_t(p.bt_cols) * p.page_size
                                                  : (int64_t(p.Mkv) + p.num_seqs - 1) / p.num_seqs;
  const int64_t lane_bytes = keys * (p.K + p.Kv) * 2;
  const int64_t g = lane_bytes > 0 ? (int64_t(mib) << 20) / lane_bytes : lanes;
  return int(g < 1 ? 1 : g > lanes ? lanes : g);
}

template <typename Element, int D, int C>
cudaError_t launch(const FmhaFwdParams& p, cudaStream_t stream) {
  using Tr = Traits<Element, D, C>;
  if (fmha_fwd_sm90_head_dim(p) != D) return cudaErrorNotSupported;
  if (p.num_seqs <= 0 || p.H <= 0 || p.max_seqlen_q <= 0) return cudaSuccess;
  Args a{};
  a.p = p;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.group = l2_group(p);
  const bool bf16 = p.is_bf16 != 0;
  if (!encode_map(&a.tq, p.q, bf16, p.K, p.Mq, p.H, p.B, p.q_sm, p.q_sh, p.q_sb, Tr::kBM, &a.q_hm, &a.q_bm) ||
      !encode_map(&a.tk, p.k, bf16, p.K, p.Mkv, p.H, p.B, p.k_sm, p.k_sh, p.k_sb, Tr::kBN, &a.k_hm, &a.k_bm) ||
      !encode_map(&a.tv, p.v, bf16, p.Kv, p.Mkv, p.H, p.B, p.v_sm, p.v_sh, p.v_sb, Tr::kBN, &a.v_hm, &a.v_bm))
    return cudaErrorNotSupported;
  const int64_t num_work = int64_t((p.max_seqlen_q + Tr::kBM - 1) / Tr::kBM) * p.H * p.num_seqs;
  if (num_work >= (int64_t(1) << 30)) return cudaErrorNotSupported;  // int tile indices in the kernel
  int grid = int(num_work);
  if constexpr (Tr::kPersistent) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    grid = int(num_work < sms ? num_work : sms);  // one CTA per SM (smem and registers allow one)
  }
  const size_t smem = sizeof(SharedStorage<Element, D, C>) + 1024;
  auto kern = fmha_fwd_sm90_kernel<Element, D, C>;
  cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  kern<<<grid, Tr::kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <int D, int C = default_cfg(D)>
cudaError_t launch_dtype(const FmhaFwdParams& p, cudaStream_t stream) {
  return p.is_bf16 ? launch<cutlass::bfloat16_t, D, C>(p, stream) : launch<cutlass::half_t, D, C>(p, stream);
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
