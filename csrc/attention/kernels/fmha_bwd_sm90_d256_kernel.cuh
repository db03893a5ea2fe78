// Hopper (sm_90a) fused attention backward for head dim 256 (fp16 / bf16): the d64 / d128 kernel's
// producer and work walk (fmha_bwd_sm90_kernel.cuh), with the work of a key tile split differently,
// because one warpgroup cannot hold dK and dV of 64 keys x 256 columns (256 float registers a thread).
//
// One CTA per (key tile of BN = 64 keys, head, sequence), query tiles of BM = 64 rows in a 2-stage
// ring; 384 threads = producer warpgroup + 2 consumer warpgroups. Per query tile, warpgroup w:
//   S_w = Q K_w^T, dP_w = dO V_w^T    (wgmma 64 x 32 x 256: all 64 queries, its 32 keys 32w ..),
//   P_w = exp2(S_w scale log2e - lse2) masked, dS_w = P_w (dP_w - D)   (registers),
//   P_w, dS_w to shared memory as [query][key] halves of P and dS (input dtype); both warpgroups sync,
//   dV[:, 128w ..] += P^T dO[:, 128w ..], dK[:, 128w ..] += dS^T Q[:, 128w ..]   (64 x 128 x 64, P^T and
//       dS^T read MN-major from the same bytes), dQ[:, 128w ..] = dS K[:, 128w ..]   (64 x 128 x 64),
//   dQ added to the float32 dQ sums with 8-byte atomics (fmha_bwd.cu scales and converts them).
// Registers a consumer thread: dK, dV 64 each, dQ 64, S and dP 16 each.
// Shared memory: Q, dO 2 x 64 x 256 each, K, V 64 x 256, P and dS 64 x 64 (208 KB of tiles), the
// LSE / D rows and barriers: 210 KB, 211 KB with the alignment pad.
#pragma once
#include "attention/kernels/fmha_bwd_sm90_kernel.cuh"

#if MSLK_HAS_CUTLASS

namespace mslk::attention::sm90_bwd {
using namespace cute;

template <typename Element>
struct TraitsD256 {
  static constexpr int kD = 256, kBN = 64, kBM = 64, kStages = 2, kWGs = 2;
  static constexpr int kThreads = 128 * (kWGs + 1);
  static constexpr int kConsumerWarps = 4 * kWGs;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= 65536 / kThreads / 8 * 8 * kThreads,
                "register pool");
  static constexpr int kKeysWg = kBN / kWGs, kColsWg = kD / kWGs;  // S columns, dK / dV / dQ columns
  static_assert(sizeof(Element) == 2, "16-bit inputs only (MN-major operands need them)");

  // Q and dO [stage][D / 64][BM][64] (TMA boxes), K-major (BM x D) for S = Q K^T / dP = dO V^T and
  // MN-major (D x BM) as the B operand of dK / dV: same bytes (as the d64 / d128 kernel).
  using SmemLayoutQ =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBM>, Int<kD>, Int<kStages>>{}));
  using SmemLayoutQt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                              Shape<Int<kD>, Int<kBM>, Int<kStages>>{}, Step<_2, _1, _3>{}));
  // K, V [D / 64][BN][64]; K also MN-major (D x BN) as the B operand of dQ = dS K.
  using SmemLayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBN>, Int<kD>>{}));
  using SmemLayoutKt =
      decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{}, Shape<Int<kD>, Int<kBN>>{}, Step<_2, _1>{}));
  // P and dS written as [BM queries][BN keys] (K-major: the accumulator's view, and dS the A operand
  // of dQ = dS K), read as P^T / dS^T [BN keys][BM queries] MN-major (A of dV / dK): same bytes.
  using SmemLayoutP = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBM>, Int<kBN>>{}));
  using SmemLayoutPt =
      decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{}, Shape<Int<kBN>, Int<kBM>>{}, Step<_2, _1>{}));

  // S_w = Q K_w^T and dP_w = dO V_w^T: all queries, the warpgroup's keys.
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBM>, Int<kKeysWg>, Int<kD>>>()));
  // dV_w += P^T dO_w and dK_w += dS^T Q_w: A (keys x queries) and B (columns x queries) MN-major.
  using MmaDKV = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBN>, Int<kColsWg>, Int<kBM>>, GMMA::Major::MN,
                           GMMA::Major::MN>()));
  // dQ_w = dS K_w: A (queries x keys) K-major, B (columns x keys) MN-major.
  using MmaDQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBM>, Int<kColsWg>, Int<kBN>>, GMMA::Major::K,
                           GMMA::Major::MN>()));

  static constexpr uint32_t kQBytes = kBM * kD * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBN * kD * sizeof(Element);
};

template <typename Element>
struct SharedStorageD256 {
  using Tr = TraitsD256<Element>;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> q;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutQ>, 1024> dout;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> k;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutK>, 1024> v;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutP>, 1024> p;
  cute::array_aligned<Element, cosize_v<typename Tr::SmemLayoutP>, 1024> ds;
  float lse2[Tr::kStages][Tr::kBM];
  float dsum[Tr::kStages][Tr::kBM];
  uint64_t full_kv;
  uint64_t full[Tr::kStages];
  uint64_t empty[Tr::kStages];
};
static_assert(sizeof(SharedStorageD256<cutlass::bfloat16_t>) + 1024 <= 232448, "d256: the sm_90 shared-memory cap");

template <typename Element>
__global__ void __launch_bounds__(TraitsD256<Element>::kThreads, 1)
    fmha_bwd_sm90_d256_kernel(const __grid_constant__ Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = TraitsD256<Element>;
  constexpr int BN = Tr::kBN, BM = Tr::kBM, KW = Tr::kKeysWg, NC = Tr::kColsWg;
  const FmhaBwdParams& p = a.p;
  const int h = int(blockIdx.y);
  Span sp;
  if (!key_tile_span<BN, BM>(p, sp)) return;  // uniform over the CTA

  extern __shared__ unsigned char smem_raw[];
  const uint32_t pad = (1024u - (ptx::smem_u32(smem_raw) & 1023u)) & 1023u;
  auto& ss = *reinterpret_cast<SharedStorageD256<Element>*>(smem_raw + pad);
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&ss.full_kv, 1);
#pragma unroll
    for (int st = 0; st < Tr::kStages; ++st) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.full[st], 1 + 32);  // the TMA thread + the rows warp
      cutlass::arch::ClusterBarrier::init(&ss.empty[st], 32 * Tr::kConsumerWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // ================= producer warpgroup
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<Tr::kProducerRegs>();
    if (sp.m_tiles > 0) {
      if (threadIdx.x == 0) produce_tiles<Tr>(a, ss, sp, h);
      else if (threadIdx.x / 32 == 1) produce_rows<Tr>(a, ss, sp, h, threadIdx.x % 32);
    }
    return;
  }

  // ================= consumer warpgroups
  cutlass::arch::warpgroup_reg_alloc<Tr::kConsumerRegs>();
  const int ctid = threadIdx.x - 128, wtid = ctid % 128;
  const int cwg = __shfl_sync(0xffffffffu, ctid / 128, 0), lane = threadIdx.x % 32;

  typename Tr::MmaS mma_s;
  typename Tr::MmaDKV mma_dkv;
  typename Tr::MmaDQ mma_dq;
  auto thr_s = mma_s.get_thread_slice(wtid);
  auto thr_dkv = mma_dkv.get_thread_slice(wtid);
  auto thr_dq = mma_dq.get_thread_slice(wtid);

  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Tr::SmemLayoutQ{});      // (BM, D, stages)
  Tensor sQt = make_tensor(make_smem_ptr(ss.q.data()), typename Tr::SmemLayoutQt{});    // (D, BM, stages)
  Tensor sdO = make_tensor(make_smem_ptr(ss.dout.data()), typename Tr::SmemLayoutQ{});
  Tensor sdOt = make_tensor(make_smem_ptr(ss.dout.data()), typename Tr::SmemLayoutQt{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Tr::SmemLayoutK{});      // (BN, D)
  Tensor sKt = make_tensor(make_smem_ptr(ss.k.data()), typename Tr::SmemLayoutKt{});    // (D, BN)
  Tensor sV = make_tensor(make_smem_ptr(ss.v.data()), typename Tr::SmemLayoutK{});
  Tensor sPt = make_tensor(make_smem_ptr(ss.p.data()), typename Tr::SmemLayoutPt{});    // (BN, BM)
  Tensor sdS = make_tensor(make_smem_ptr(ss.ds.data()), typename Tr::SmemLayoutP{});
  Tensor sdSt = make_tensor(make_smem_ptr(ss.ds.data()), typename Tr::SmemLayoutPt{});

  // The warpgroup's blocks as trailing modes: K, V rows (KW, D, BN / KW, 1); Q^T, dO^T columns
  // (NC, BM, D / NC, 1, stages); K^T columns (NC, BN, D / NC, 1).
  Tensor sK_b = flat_divide(sK, Shape<Int<KW>, Int<Tr::kD>>{});
  Tensor sV_b = flat_divide(sV, Shape<Int<KW>, Int<Tr::kD>>{});
  Tensor sQt_b = flat_divide(sQt, Shape<Int<NC>, Int<BM>>{});
  Tensor sdOt_b = flat_divide(sdOt, Shape<Int<NC>, Int<BM>>{});
  Tensor sKt_b = flat_divide(sKt, Shape<Int<NC>, Int<BN>>{});

  Tensor tSrQ = thr_s.partition_fragment_A(sQ);          // (1, 1, D / 16, stages)
  Tensor tSrdO = thr_s.partition_fragment_A(sdO);
  Tensor tSrK = thr_s.partition_fragment_B(sK_b);        // (1, 1, D / 16, BN / KW, 1)
  Tensor tSrV = thr_s.partition_fragment_B(sV_b);
  Tensor tKVrPt = thr_dkv.partition_fragment_A(sPt);     // (1, 1, BM / 16)
  Tensor tKVrdSt = thr_dkv.partition_fragment_A(sdSt);
  Tensor tKVrdOt = thr_dkv.partition_fragment_B(sdOt_b);  // (1, 1, BM / 16, D / NC, 1, stages)
  Tensor tKVrQt = thr_dkv.partition_fragment_B(sQt_b);
  Tensor tQrdS = thr_dq.partition_fragment_A(sdS);       // (1, 1, BN / 16)
  Tensor tQrK = thr_dq.partition_fragment_B(sKt_b);      // (1, 1, BN / 16, D / NC, 1)

  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<BM>, Int<KW>>{});
  Tensor tSrdP = partition_fragment_C(mma_s, Shape<Int<BM>, Int<KW>>{});
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<BM>, Int<KW>>{}));  // (query, key in half)
  Tensor tdVrdV = partition_fragment_C(mma_dkv, Shape<Int<BN>, Int<NC>>{});
  Tensor tdKrdK = partition_fragment_C(mma_dkv, Shape<Int<BN>, Int<NC>>{});
  Tensor tdKVc = thr_dkv.partition_C(make_identity_tensor(Shape<Int<BN>, Int<NC>>{}));  // (key, column in block)
  Tensor tdQrdQ = partition_fragment_C(mma_dq, Shape<Int<BM>, Int<NC>>{});
  static_assert(BM == 64 && BN * sizeof(Element) == 128, "P / dS rows: one 128-byte swizzle row a query");
  clear(tdVrdV);
  clear(tdKrdK);

  const sm80::SeqBlock& sb = sp.sb;
  const int n0 = sp.n0;
  if (sp.m_tiles > 0) mbar_wait(&ss.full_kv, 0);
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int st = it % Tr::kStages, m0 = sp.m_begin + it * BM;
    mbar_wait(&ss.full[st], (it / Tr::kStages) & 1);

    // ---- S_w = Q K_w^T and dP_w = dO V_w^T (two commit groups: P under the dP GEMM)
    warpgroup_fence_operand(tSrS);
    warpgroup_fence_operand(tSrdP);
    warpgroup_arrive();
    mma_s.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      cute::gemm(mma_s, tSrQ(_, _, kb, st), tSrK(_, _, kb, cwg, 0), tSrS);
      mma_s.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    mma_s.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrdO); ++kb) {
      cute::gemm(mma_s, tSrdO(_, _, kb, st), tSrV(_, _, kb, cwg, 0), tSrdP);
      mma_s.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<1>();  // S landed; dP still running
    warpgroup_fence_operand(tSrS);

    // ---- P; masking only where the tile crosses the band or a block end
    const bool need_mask = n0 + BN > sb.lk || m0 + BM > sb.lq || !sp.band.inside(m0, m0 + BM - 1, n0, n0 + BN - 1);
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); ++i) {
      const int qr = get<0>(tScS(i)), kc = cwg * KW + get<1>(tScS(i));
      float pr = fast_exp2(tSrS(i) * a.scale_log2 - ss.lse2[st][qr]);
      if (need_mask) {
        const int qi = m0 + qr, kj = n0 + kc;
        if (qi >= sb.lq || kj >= sb.lk || !sp.band.allowed(qi, kj)) pr = 0.f;
      }
      tSrS(i) = pr;
    }
    warpgroup_wait<0>();  // dP landed
    warpgroup_fence_operand(tSrdP);
    CUTE_UNROLL
    for (int i = 0; i < size(tSrdP); ++i) tSrdP(i) = tSrS(i) * (tSrdP(i) - ss.dsum[st][get<0>(tScS(i))]);

    // ---- P and dS halves to shared memory, once both warpgroups' GEMMs of the previous tile read them
    named_barrier_sync(kBarDsFree, 256);
    {
      // key pairs (values i, i + 1: one query row, keys c and c + 1) as 32-bit words into the
      // 128-byte swizzled [query][key] rows (SmemLayoutP; test_fmha_sm90_layouts checks the formula)
      const uint32_t p_base = ptx::smem_u32(ss.p.data()), ds_base = ptx::smem_u32(ss.ds.data());
      CUTE_UNROLL
      for (int i = 0; i < size(tSrS); i += 2) {
        const int qr = get<0>(tScS(i)), kc = cwg * KW + get<1>(tScS(i));
        const uint32_t off = uint32_t(ptx::swizzle128(qr, kc / 8) + (kc % 8) * int(sizeof(Element)));
        ptx::st_shared_b32(p_base + off, pack2<Element>(tSrS(i), tSrS(i + 1)));
        ptx::st_shared_b32(ds_base + off, pack2<Element>(tSrdP(i), tSrdP(i + 1)));
      }
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores before the async-proxy reads
    named_barrier_sync(kBarDsReady, 256);

    // ---- dV_w += P^T dO_w, dK_w += dS^T Q_w, dQ_w = dS K_w (one batch)
    warpgroup_fence_operand(tdVrdV);
    warpgroup_fence_operand(tdKrdK);
    warpgroup_fence_operand(tdQrdQ);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tKVrPt); ++kb)
      cute::gemm(mma_dkv, tKVrPt(_, _, kb), tKVrdOt(_, _, kb, cwg, 0, st), tdVrdV);
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tKVrdSt); ++kb)
      cute::gemm(mma_dkv, tKVrdSt(_, _, kb), tKVrQt(_, _, kb, cwg, 0, st), tdKrdK);
    mma_dq.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tQrdS); ++kb) {
      cute::gemm(mma_dq, tQrdS(_, _, kb), tQrK(_, _, kb, cwg, 0), tdQrdQ);
      mma_dq.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<0>();  // the stage, P and dS are read
    warpgroup_fence_operand(tdVrdV);
    warpgroup_fence_operand(tdKrdK);
    warpgroup_fence_operand(tdQrdQ);
    cutlass::arch::ClusterBarrier::arrive(&ss.empty[st]);  // every lane: its reads of the stage are done

    // ---- dQ sums: 8-byte reductions from the thread's two row pointers, the warpgroup's columns
    reduce_dq_rows<NC>(a, sb, m0, h, cwg * NC, wtid, lane, tdQrdQ);
  }

  // ---- epilogue: dK * scale and dV of the tile's keys, the warpgroup's columns
  store_dk_dv<Element>(p, sb, n0, h, cwg * NC, tdKrdK, tdVrdV, tdKVc);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mslk::attention::sm90_bwd
#endif  // MSLK_HAS_CUTLASS
