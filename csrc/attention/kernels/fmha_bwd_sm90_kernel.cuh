// Hopper (sm_90a) fused attention backward, FlashAttention-3 structure, for fp16/bf16, d64 / d128.
//
// One CTA per (key tile of BN = 128 keys, head, sequence), walking the query tiles of BM = 64 rows
// (128 at d64: kVarBM128) that the mask lets see one of its keys (as the FA2 kernel, fmha_bwd_kernel.cuh):
//   WG0 producer: thread 0 loads the K and V tiles once and each query tile's Q and dO by TMA into
//       a 2-stage ring (full: TMA transaction + warp 1's arrival; empty: the 8 consumer warps);
//       warp 1 writes the tile's LSE (log2 domain) and D rows beside them. Gives registers away.
//   WG1, WG2 consumers, 64 keys each; per query tile:
//       S^T = K Q^T, dP^T = V dO^T  (wgmma, both operands from smem, keys as rows, so that P^T and
//                                     dS^T come out in the layout of a register A operand),
//       P^T = exp2(S^T scale log2e - lse2) masked, dS^T = P^T (dP^T - D)  (registers),
//       dV += P^T dO, dK += dS^T Q   (wgmma, A from registers, dO / Q MN-major from smem; the dK / dV
//                                     accumulators stay in registers across query tiles),
//       dS^T to smem (input dtype), then dQ = dS K (wgmma, both MN-major from smem), added to the
//       float32 dQ sums with 8-byte atomics (fmha_bwd.cu scales and converts them), or (kVarTileDq)
//       stored to smem in register order and added by one bulk reduction a warpgroup that producer
//       warp 2 issues into tile-contiguous sums (fmha_bwd_dq_tiles.h).
// Tiles use the 128-byte swizzle both TMA and wgmma understand (fmha_fwd_sm90_traits.cuh).
#pragma once
#include "attention/kernels/fmha_bwd_sm90_traits.cuh"

#if MSLK_HAS_CUTLASS
#include <cutlass/arch/reg_reconfig.h>

#include "attention/kernels/fmha_bwd_device.cuh"
#include "attention/kernels/fmha_bwd_dq_tiles.h"

namespace mslk::attention::sm90_bwd {
using namespace cute;
using ptx::mbar_arrive;
using ptx::mbar_wait;
using ptx::named_barrier_sync;
using ptx::prefetch_tensormap;
using ptx::tma_load_4d;
using sm90::fast_exp2;
using sm90::pack2;

// This CTA's key tile and the query tiles [m_begin, + m_tiles * BM) of its block that the band lets
// see one of its keys. False: no keys here (nothing to write).
struct Span {
  sm80::SeqBlock sb;
  sm80::MaskBand band;
  int n0, m_begin, m_tiles;
};
template <int BN, int BM>
__device__ __forceinline__ bool key_tile_span(const FmhaBwdParams& p, Span& s) {
  if (!sm80::seq_block(p, int(blockIdx.z), p.Mkv, s.sb)) return false;
  s.n0 = int(blockIdx.x) * BN;
  if (s.n0 >= s.sb.lk) return false;
  s.band = sm80::MaskBand::make(p.mask_kind, p.window_left, p.window_right, s.sb.lq, s.sb.lk);
  int64_t ib, ie;
  s.band.queries_of(s.n0, min(s.n0 + BN, s.sb.lk) - 1, s.sb.lq, &ib, &ie);
  s.m_begin = int(ib) / BM * BM;
  s.m_tiles = ie > ib ? int((ie - s.m_begin + BM - 1) / BM) : 0;
  return true;
}

// Producer thread 0: K, V once, then Q and dO of each query tile into the ring. Tr / SS: the
// kernel's traits and shared storage (this kernel's, or the d256 one's: fmha_bwd_sm90_d256_kernel.cuh).
template <class Tr, class SS>
__device__ __forceinline__ void produce_tiles(const Args& a, SS& ss, const Span& sp, int h) {
  constexpr int BN = Tr::kBN, BM = Tr::kBM, D = Tr::kD;
  prefetch_tensormap(&a.tq);
  prefetch_tensormap(&a.tk);
  prefetch_tensormap(&a.tv);
  prefetch_tensormap(&a.tdo);
  const int bq = sp.sb.bq, kr = sp.sb.k0 + sp.n0;
  cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full_kv, 2 * Tr::kKVBytes);
#pragma unroll
  for (int cb = 0; cb < D / kColBlock; ++cb) {
    tma_load_4d(&a.tk, &ss.full_kv, ss.k.data() + cb * BN * kColBlock, cb * kColBlock, kr, h * a.k_hm, bq * a.k_bm);
    tma_load_4d(&a.tv, &ss.full_kv, ss.v.data() + cb * BN * kColBlock, cb * kColBlock, kr, h * a.v_hm, bq * a.v_bm);
  }
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int st = it % Tr::kStages;
    mbar_wait(&ss.empty[st], ((it / Tr::kStages) & 1) ^ 1);  // a fresh barrier passes parity 1
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.full[st], 2 * Tr::kQBytes);
    const int qr = sp.sb.q0 + sp.m_begin + it * BM;
#pragma unroll
    for (int cb = 0; cb < D / kColBlock; ++cb) {
      const int off = st * BM * D + cb * BM * kColBlock;
      tma_load_4d(&a.tq, &ss.full[st], ss.q.data() + off, cb * kColBlock, qr, h * a.q_hm, bq * a.q_bm);
      tma_load_4d(&a.tdo, &ss.full[st], ss.dout.data() + off, cb * kColBlock, qr, h * a.do_hm, bq * a.do_bm);
    }
  }
}

// Producer warp 1: each query tile's LSE (log2 domain, +inf: no contribution) and D rows.
template <class Tr, class SS>
__device__ __forceinline__ void produce_rows(const Args& a, SS& ss, const Span& sp, int h, int lane) {
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int st = it % Tr::kStages, m0 = sp.m_begin + it * Tr::kBM;
    mbar_wait(&ss.empty[st], ((it / Tr::kStages) & 1) ^ 1);
    for (int r = lane; r < Tr::kBM; r += 32) {
      ss.lse2[st][r] = bwd_detail::row_lse2(a.p, sp.sb, h, m0 + r);
      ss.dsum[st][r] = bwd_detail::row_dsum(a.p, a.dsum, sp.sb, h, m0 + r);
    }
    // Every lane arrives (release of its own rows): an ordering that compute-sanitizer's racecheck
    // follows, where one lane's arrive after __syncwarp() reads to it as a race.
    mbar_arrive(&ss.full[st]);
  }
}

// Producer warp 2: each query tile's dQ parts (shared memory) added to the float32 dQ sums by bulk
// reductions, one 256-byte row of a warpgroup's part per instruction, rows past the block skipped.
template <class Tr, class SS>
__device__ __forceinline__ void drain_dq(const Args& a, SS& ss, const Span& sp, int h, int lane) {
  const FmhaBwdParams& p = a.p;
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int s = it % Tr::kDqStages, m0 = sp.m_begin + it * Tr::kBM;
    mbar_wait(&ss.dq_full[s], (it / Tr::kDqStages) & 1);
    const int rows = min(Tr::kBM, sp.sb.lq - m0);
    for (int idx = lane; idx < Tr::kWGs * Tr::kBM; idx += 32) {
      const int w = idx / Tr::kBM, r = idx % Tr::kBM;
      if (r >= rows) continue;
      const int col = Tr::kDqSplitKeys ? 0 : w * Tr::kDqCols;
      float* dst = a.dq_accum + ((int64_t(sp.sb.bq) * p.Mq + sp.sb.q0 + m0 + r) * p.H + h) * p.K + col;
      ptx::bulk_reduce_add_f32(dst, ss.dq.data() + ((s * Tr::kWGs + w) * Tr::kBM + r) * Tr::kDqLd,
                               Tr::kDqCols * sizeof(float));
    }
    ptx::tma_store_commit();
    ptx::tma_store_wait_read();  // this lane's reductions have read the buffer
    mbar_arrive(&ss.dq_empty[s]);
  }
  ptx::tma_store_wait_all();
}

// Producer warp 2 (kVarTileDq): each query tile's dQ parts (register order, fmha_bwd_dq_tiles.h)
// added to the tile-contiguous sums, one 16 KB bulk reduction a warpgroup and 64-row tile from lane 0.
// Rows past the block land in the tile's own padding (the conversion skips them); a 64-row half of
// a BM 128 tile that starts past the block is skipped (its tile may not exist). kRowSplit: warpgroup
// w's one part is half w.
template <class Tr, bool kRowSplit, class SS>
__device__ __forceinline__ void drain_dq_tiles(const Args& a, SS& ss, const Span& sp, int h, int lane) {
  constexpr uint32_t kPartBytes = kDqTileRows * kDqPartCols * sizeof(float);
  constexpr int kHalves = Tr::kBM / kDqTileRows;
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int s = it % Tr::kDqStages, m0 = sp.m_begin + it * Tr::kBM;
    mbar_wait(&ss.dq_full[s], (it / Tr::kDqStages) & 1);
    if (lane == 0) {
#pragma unroll
      for (int hh = 0; hh < kHalves; ++hh) {
        const int mh = m0 + hh * kDqTileRows;
        if (hh > 0 && mh >= sp.sb.lq) break;
        float* dst = a.dq_accum + dq_tile_offset(a.p, sp.sb.bq, sp.sb.q0, int(blockIdx.z), mh, h);
#pragma unroll
        for (int w = 0; w < Tr::kWGs; ++w) {
          if (kRowSplit && w != hh) continue;
          const float* src = ss.dq.data() + (s * Tr::kWGs + w) * Tr::kBM * Tr::kDqLd;
          ptx::bulk_reduce_add_f32(dst + (Tr::kDqSplitKeys || kRowSplit ? 0 : w * kDqTileRows * kDqPartCols),
                                   src + (kRowSplit ? 0 : hh * kDqTileRows * kDqPartCols), kPartBytes);
        }
      }
      ptx::tma_store_commit();
      ptx::tma_store_wait_read();  // the reductions have read the buffer
    }
    __syncwarp();
    mbar_arrive(&ss.dq_empty[s]);  // every lane (dq_empty counts 32)
  }
  if (lane == 0) ptx::tma_store_wait_all();
}

// A warpgroup's 64 x NC dQ part added to the float32 dQ sums ([B, Mq, H, K] rows) at column col:
// column pairs as 8-byte reductions from two row pointers, the thread's two rows (value v of the
// accumulator: row 16 (warp % 4) + lane / 4 + 8 ((v / 2) % 2), column 8 (v / 4) + 2 (lane % 4) + v % 2,
// which test_fmha_sm90_layouts checks). The layout formula rather than the MMA's coordinates, so that
// the 8-column steps become immediate offsets of two row pointers (per-reduction address arithmetic
// serialised the reductions); rows past the block skipped.
template <int NC, class TQ>
__device__ __forceinline__ void reduce_dq_rows(const Args& a, const sm80::SeqBlock& sb, int m0, int h, int col,
                                               int wtid, int lane, const TQ& tdQrdQ) {
  static_assert(decltype(size(tdQrdQ))::value == NC / 2, "64 x NC accumulator: 2 rows x NC / 8 column pairs");
  const FmhaBwdParams& p = a.p;
  const int64_t dq_rs = int64_t(p.H) * p.K;  // float stride of a query row
  const int r0 = 16 * (wtid / 32) + lane / 4, rows_left = sb.lq - m0;
  float* const ra =
      a.dq_accum + (int64_t(sb.bq) * p.Mq + sb.q0 + m0 + r0) * dq_rs + int64_t(h) * p.K + col + 2 * (lane % 4);
  float* const rb = ra + 8 * dq_rs;
  auto reduce = [&](bool pa, bool pb) {
    cute::for_each(cute::make_int_sequence<NC / 8>{}, [&](auto k) {
      ptx::red_add_f32x2<32 * k>(ra, tdQrdQ(4 * k), tdQrdQ(4 * k + 1), pa);
      ptx::red_add_f32x2<32 * k>(rb, tdQrdQ(4 * k + 2), tdQrdQ(4 * k + 3), pb);
    });
  };
  if (rows_left >= 64) reduce(true, true);  // the common full tile: no guards
  else reduce(r0 < rows_left, r0 + 8 < rows_left);
}

// dK * scale and dV of a key tile (keys n0 + the fragments' rows, columns col + theirs) as 32-bit pairs;
// keys past the lane not written.
template <typename Element, class TK, class TV, class TC>
__device__ __forceinline__ void store_dk_dv(const FmhaBwdParams& p, const sm80::SeqBlock& sb, int n0, int h, int col,
                                            const TK& tdKrdK, const TV& tdVrdV, const TC& tdKVc) {
  Element* dkp = static_cast<Element*>(p.dk);
  Element* dvp = static_cast<Element*>(p.dv);
  CUTE_UNROLL
  for (int i = 0; i < size(tdKrdK); i += 2) {
    const int kj = n0 + get<0>(tdKVc(i)), c = col + get<1>(tdKVc(i));
    if (kj < sb.lk) {
      const int64_t row = int64_t(sb.bq) * p.dk_sb + int64_t(sb.k0 + kj) * p.dk_sm + int64_t(h) * p.dk_sh;
      const int64_t vrow = int64_t(sb.bq) * p.dv_sb + int64_t(sb.k0 + kj) * p.dv_sm + int64_t(h) * p.dv_sh;
      *reinterpret_cast<uint32_t*>(dkp + row + c) = pack2<Element>(tdKrdK(i) * p.scale, tdKrdK(i + 1) * p.scale);
      *reinterpret_cast<uint32_t*>(dvp + vrow + c) = pack2<Element>(tdVrdV(i), tdVrdV(i + 1));
    }
  }
}

// V: the variant bits of kVariantBits (traits); production kernels use kLibraryVariant.
template <typename Element, int D, int V>
__global__ void __launch_bounds__(Traits<Element, D>::kThreads, 1)
    fmha_bwd_sm90_kernel(const __grid_constant__ Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = Traits<Element, D, bm_of<V>()>;
  using SS = SharedStorage<Element, D, bm_of<V>()>;
  constexpr bool kBulkDq = (V & kVarBulkDq) != 0, kSplitSdP = (V & kVarSplitSdP) != 0;
  constexpr bool kTileDq = (V & kVarTileDq) != 0;
  static_assert(!(kTileDq && kBulkDq), "one way for the dQ parts");
  constexpr bool kFastIo = (V & kVarFastIo) != 0;
  constexpr bool kLsePrefetch = kFastIo && (V & kVarNoLsePrefetch) == 0;
  // dQ = dS K per warpgroup: kKeySplit: all NC = D columns over the warpgroup's own 64 keys (no
  // cross-warpgroup barrier; twice the dQ reductions at d128), else 64 columns over all 128 keys.
  // kRowSplit (BM 128): each warpgroup's dQ is its 64 query rows, all D columns, over all 128 keys.
  constexpr bool kRowSplit = (V & kVarRowSplitDq) != 0;
  static_assert(!kRowSplit || (Tr::kBM == 128 && D == 64), "row-split dQ: two 64-row halves of D = 64 columns");
  constexpr bool kKeySplit = !kRowSplit && (Tr::kDqSplitKeys || (V & kVarKeySplitDq) != 0);
  // Independent warpgroups (kKeySplit) take turns issuing their S / dP GEMMs, so that one's
  // exponentials run under the other's GEMMs instead of both idling the tensor cores together.
  constexpr bool kPingPong = (V & kVarPingPong) != 0 && kKeySplit;
  static_assert(!kPingPong || kSplitSdP, "the turn passes after the split S / dP issue");
  // BM 128: dV += P^T dO issued with dK's GEMM, after dS^T: P^T's packed registers and dV's would
  // otherwise be held by a GEMM in flight while the 2 x 64 S^T / dP^T values are live (wgmma
  // serialised for want of registers).
  constexpr bool kLateDv = bm_of<V>() == 128;
  static_assert(!(kBulkDq && kKeySplit && D != 64), "the bulk dQ buffers hold 64 columns a warpgroup");
  static_assert(!(kBulkDq && kRowSplit), "the bulk dQ buffers hold all BM rows a warpgroup");
  // dQ part of a warpgroup: DQR rows x NC columns over KW keys.
  constexpr int KW = kKeySplit ? 64 : 128, NC = kKeySplit || kRowSplit ? D : 64, DQR = kRowSplit ? 64 : Tr::kBM;
  static_assert(!kTileDq || (NC == kDqPartCols && Tr::kBM % kDqTileRows == 0 && Tr::kDqLd >= kDqPartCols),
                "tile-contiguous dQ: 64 x 64 parts, each in one buffer of the dQ stages");
  using MmaDQ = typename Tr::template MmaDQ<NC, KW>;
  constexpr int BN = Tr::kBN, BM = Tr::kBM;
  const FmhaBwdParams& p = a.p;
  const int h = int(blockIdx.y);
  Span sp;
  if (!key_tile_span<BN, BM>(p, sp)) return;  // uniform over the CTA

  extern __shared__ unsigned char smem_raw[];
  const uint32_t pad = (1024u - (ptx::smem_u32(smem_raw) & 1023u)) & 1023u;
  auto& ss = *reinterpret_cast<SS*>(smem_raw + pad);
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&ss.full_kv, 1);
#pragma unroll
    for (int st = 0; st < Tr::kStages; ++st) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.full[st], 1 + 32);  // the TMA thread + the rows warp
      cutlass::arch::ClusterBarrier::init(&ss.empty[st], 32 * Tr::kConsumerWarps);
    }
#pragma unroll
    for (int st = 0; st < Tr::kDqStages; ++st) {
      cutlass::arch::ClusterBarrier::init(&ss.dq_full[st], 128 * Tr::kWGs);
      cutlass::arch::ClusterBarrier::init(&ss.dq_empty[st], 32);
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
      else if (kBulkDq && threadIdx.x / 32 == 2) drain_dq<Tr>(a, ss, sp, h, threadIdx.x % 32);
      else if (kTileDq && threadIdx.x / 32 == 2) drain_dq_tiles<Tr, kRowSplit>(a, ss, sp, h, threadIdx.x % 32);
    }
    return;
  }

  // ================= consumer warpgroups
  cutlass::arch::warpgroup_reg_alloc<Tr::kConsumerRegs>();
  const int ctid = threadIdx.x - 128;
  const int cwg = __shfl_sync(0xffffffffu, ctid / 128, 0), lane = threadIdx.x % 32;
  // dQ part of this warpgroup: row block mblk, NC-column block cblk, key block kblk.
  const int cblk = kKeySplit || kRowSplit ? 0 : cwg, kblk = kKeySplit ? cwg : 0, mblk = kRowSplit ? cwg : 0;

  typename Tr::MmaSdP mma_sdp;
  typename Tr::MmaDKV mma_dkv;
  MmaDQ mma_dq;
  auto thr_sdp = mma_sdp.get_thread_slice(ctid);
  auto wg_sdp = mma_sdp.get_thread_slice(cwg * 128);  // smem operands: one descriptor a warpgroup
  auto thr_dkv = mma_dkv.get_thread_slice(ctid);
  auto wg_dkv = mma_dkv.get_thread_slice(cwg * 128);
  auto thr_dq = mma_dq.get_thread_slice(ctid % 128);

  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Tr::SmemLayoutQ{});
  Tensor sQt = make_tensor(make_smem_ptr(ss.q.data()), typename Tr::SmemLayoutQt{});
  Tensor sdO = make_tensor(make_smem_ptr(ss.dout.data()), typename Tr::SmemLayoutQ{});
  Tensor sdOt = make_tensor(make_smem_ptr(ss.dout.data()), typename Tr::SmemLayoutQt{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Tr::SmemLayoutK{});
  Tensor sKt = make_tensor(make_smem_ptr(ss.k.data()), typename Tr::SmemLayoutKt{});
  Tensor sV = make_tensor(make_smem_ptr(ss.v.data()), typename Tr::SmemLayoutK{});
  Tensor sdSt = make_tensor(make_smem_ptr(ss.ds.data()), typename Tr::SmemLayoutdSt{});
  Tensor sdS = make_tensor(make_smem_ptr(ss.ds.data()), typename Tr::SmemLayoutdS{});
  // dQ operands with the warpgroup's block as trailing modes: (DQR, KW, BM / DQR, BN / KW), (NC, KW, D / NC, BN / KW).
  Tensor sdS_b = flat_divide(sdS, Shape<Int<DQR>, Int<KW>>{});
  Tensor sKt_b = flat_divide(sKt, Shape<Int<NC>, Int<KW>>{});

  Tensor tSrK = wg_sdp.partition_fragment_A(sK);       // descriptors (1, 1, D / 16)
  Tensor tSrV = wg_sdp.partition_fragment_A(sV);
  Tensor tSrQ = wg_sdp.partition_fragment_B(sQ);       // (1, 1, D / 16, stages)
  Tensor tSrdO = wg_sdp.partition_fragment_B(sdO);
  Tensor tKVrQt = wg_dkv.partition_fragment_B(sQt);    // (1, 1, BM / 16, stages)
  Tensor tKVrdOt = wg_dkv.partition_fragment_B(sdOt);
  Tensor tQrdS = thr_dq.partition_fragment_A(sdS_b);   // (1, DQR / 64, KW / 16, BM / DQR, BN / KW)
  Tensor tQrK = thr_dq.partition_fragment_B(sKt_b);    // (1, 1, KW / 16, D / NC, BN / KW)

  Tensor tSrS = partition_fragment_C(mma_sdp, Shape<Int<BN>, Int<BM>>{});
  Tensor tSrdP = partition_fragment_C(mma_sdp, Shape<Int<BN>, Int<BM>>{});
  Tensor tScS = thr_sdp.partition_C(make_identity_tensor(Shape<Int<BN>, Int<BM>>{}));  // (key, query)
  Tensor tSsdS = thr_sdp.partition_C(sdSt);                                            // dS^T stores
  Tensor tOrP = make_tensor<Element>(typename Tr::LayoutP{});
  Tensor tOrdS = make_tensor<Element>(typename Tr::LayoutP{});
  Tensor tdVrdV = partition_fragment_C(mma_dkv, Shape<Int<BN>, Int<D>>{});
  Tensor tdKrdK = partition_fragment_C(mma_dkv, Shape<Int<BN>, Int<D>>{});
  Tensor tdKVc = thr_dkv.partition_C(make_identity_tensor(Shape<Int<BN>, Int<D>>{}));  // (key, column)
  Tensor tdQrdQ = partition_fragment_C(mma_dq, Shape<Int<DQR>, Int<NC>>{});  // (value, DQR / 64, 1)
  Tensor tdQc = thr_dq.partition_C(make_identity_tensor(Shape<Int<DQR>, Int<NC>>{}));  // (query, column in block)
  static_assert(size(tOrP) == size(tSrS) && size(tSsdS) == size(tSrS), "fragment shapes");
  clear(tdVrdV);
  clear(tdKrdK);

  // kFastIo: the accumulator layout of a 64 x N wgmma tile, value v = c + 2 rb + 4 k of a thread
  // holding row (warp % 4) * 16 + lane / 4 + 8 rb, column 8 k + 2 (lane % 4) + c (as tScS / tdQc say).
  // dS^T leaves by stmatrix: instruction t stores the 8 x 8 blocks (rb, k) = (0, 2t), (1, 2t),
  // (0, 2t + 1), (1, 2t + 1); lane l addresses row l % 8 of block l / 8 in the 128-byte swizzled rows
  // of query-column block t / 4 ([BM / 64][BN][64], SmemLayoutdSt).
  static_assert(BM % 64 == 0 && sizeof(Element) == 2, "stmatrix addressing assumes 128-byte dS^T rows");
  // (Addresses are recomputed per tile: at d128 the consumer registers are full, hoisting spills.)

  const sm80::SeqBlock& sb = sp.sb;
  const int n0 = sp.n0;
  if (sp.m_tiles > 0) mbar_wait(&ss.full_kv, 0);
  if (kPingPong && cwg == 1 && sp.m_tiles > 0) ptx::named_barrier_arrive(kBarSched, 256);  // warpgroup 0 first
#pragma unroll 1
  for (int it = 0; it < sp.m_tiles; ++it) {
    const int st = it % Tr::kStages, m0 = sp.m_begin + it * BM;
    mbar_wait(&ss.full[st], (it / Tr::kStages) & 1);

    // ---- S^T = K Q^T and dP^T = V dO^T
    if constexpr (kPingPong) named_barrier_sync(kBarSched + cwg, 256);  // this warpgroup's turn
    warpgroup_fence_operand(tSrS);
    warpgroup_fence_operand(tSrdP);
    warpgroup_arrive();
    mma_sdp.accumulate_ = GMMA::ScaleOut::Zero;
    if constexpr (kSplitSdP) {
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrK); ++kb) {
        cute::gemm(mma_sdp, tSrK(_, _, kb), tSrQ(_, _, kb, st), tSrS);
        mma_sdp.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      mma_sdp.accumulate_ = GMMA::ScaleOut::Zero;
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrV); ++kb) {
        cute::gemm(mma_sdp, tSrV(_, _, kb), tSrdO(_, _, kb, st), tSrdP);
        mma_sdp.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      if constexpr (kPingPong) ptx::named_barrier_arrive(kBarSched + 1 - cwg, 256);  // the other's turn
      float lse_r[BM / 4];  // kLsePrefetch: this thread's BM / 4 query rows' LSE, read while the GEMMs run
      if constexpr (kLsePrefetch) {
        CUTE_UNROLL
        for (int k = 0; k < BM / 8; ++k) {
          const float2 l2 = *reinterpret_cast<const float2*>(&ss.lse2[st][8 * k + 2 * (lane % 4)]);
          lse_r[2 * k] = l2.x, lse_r[2 * k + 1] = l2.y;
        }
      }
      warpgroup_wait<1>();  // S^T landed; dP^T still running under the exponentials
      warpgroup_fence_operand(tSrS);

      // ---- P^T; masking only where the tile crosses the band or a block end
      const bool need_mask = n0 + BN > sb.lk || m0 + BM > sb.lq || !sp.band.inside(m0, m0 + BM - 1, n0, n0 + BN - 1);
      CUTE_UNROLL
      for (int i = 0; i < size(tSrS); ++i) {
        const int kr = get<0>(tScS(i)), qc = get<1>(tScS(i));
        const float l2 = kLsePrefetch ? lse_r[2 * (i / 4) + i % 2] : ss.lse2[st][qc];
        float pr = fast_exp2(tSrS(i) * a.scale_log2 - l2);
        if (need_mask) {
          const int qi = m0 + qc, kj = n0 + kr;
          if (qi >= sb.lq || kj >= sb.lk || !sp.band.allowed(qi, kj)) pr = 0.f;
        }
        tSrS(i) = pr;
      }
      auto pack_p = [&] {
        Tensor p32 = recast<uint32_t>(tOrP);
        CUTE_UNROLL
        for (int i = 0; i < size(p32); ++i) p32(i) = pack2<Element>(tSrS(2 * i), tSrS(2 * i + 1));
      };
      auto issue_dv = [&] {
        warpgroup_fence_operand(tOrP);
        warpgroup_fence_operand(tdVrdV);
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tOrP); ++kb) cute::gemm(mma_dkv, tOrP(_, _, kb), tKVrdOt(_, _, kb, st), tdVrdV);
      };
      if constexpr (!kLateDv) {
        // ---- dV += P^T dO (not waited for yet): it runs under dS^T's arithmetic
        pack_p();
        issue_dv();
        warpgroup_commit_batch();
      }

      // ---- dS^T = P^T (dP^T - D)
      warpgroup_wait<kLateDv ? 0 : 1>();  // dP^T landed (dV may still run)
      warpgroup_fence_operand(tSrdP);
      CUTE_UNROLL
      for (int i = 0; i < size(tSrdP); ++i) {
        const float d = kFastIo ? ss.dsum[st][8 * (i / 4) + 2 * (lane % 4) + i % 2] : ss.dsum[st][get<1>(tScS(i))];
        tSrdP(i) = tSrS(i) * (tSrdP(i) - d);
      }
      if constexpr (kLateDv) pack_p();
      {
        Tensor ds32 = recast<uint32_t>(tOrdS);
        CUTE_UNROLL
        for (int i = 0; i < size(ds32); ++i) ds32(i) = pack2<Element>(tSrdP(2 * i), tSrdP(2 * i + 1));
      }

      // ---- dK += dS^T Q (kLateDv: after dV += P^T dO, one batch; not waited for yet)
      if constexpr (kLateDv) issue_dv();
      warpgroup_fence_operand(tOrdS);
      warpgroup_fence_operand(tdKrdK);
      if constexpr (!kLateDv) warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tOrdS); ++kb) cute::gemm(mma_dkv, tOrdS(_, _, kb), tKVrQt(_, _, kb, st), tdKrdK);
      warpgroup_commit_batch();

    } else {
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrK); ++kb) {
        cute::gemm(mma_sdp, tSrK(_, _, kb), tSrQ(_, _, kb, st), tSrS);
        mma_sdp.accumulate_ = GMMA::ScaleOut::One;
      }
      mma_sdp.accumulate_ = GMMA::ScaleOut::Zero;
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrV); ++kb) {
        cute::gemm(mma_sdp, tSrV(_, _, kb), tSrdO(_, _, kb, st), tSrdP);
        mma_sdp.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      warpgroup_fence_operand(tSrdP);

      // ---- P^T and dS^T; masking only where the tile crosses the band or a block end
      const bool need_mask = n0 + BN > sb.lk || m0 + BM > sb.lq || !sp.band.inside(m0, m0 + BM - 1, n0, n0 + BN - 1);
      CUTE_UNROLL
      for (int i = 0; i < size(tSrS); ++i) {
        const int kr = get<0>(tScS(i)), qc = get<1>(tScS(i));
        float pr = fast_exp2(tSrS(i) * a.scale_log2 - ss.lse2[st][qc]);
        if (need_mask) {
          const int qi = m0 + qc, kj = n0 + kr;
          if (qi >= sb.lq || kj >= sb.lk || !sp.band.allowed(qi, kj)) pr = 0.f;
        }
        tSrS(i) = pr;
        tSrdP(i) = pr * (tSrdP(i) - ss.dsum[st][qc]);
      }
      {
        Tensor p32 = recast<uint32_t>(tOrP);
        Tensor ds32 = recast<uint32_t>(tOrdS);
        CUTE_UNROLL
        for (int i = 0; i < size(p32); ++i) {
          p32(i) = pack2<Element>(tSrS(2 * i), tSrS(2 * i + 1));
          ds32(i) = pack2<Element>(tSrdP(2 * i), tSrdP(2 * i + 1));
        }
      }

      // ---- dV += P^T dO and dK += dS^T Q (not waited for yet)
      warpgroup_fence_operand(tOrP);
      warpgroup_fence_operand(tOrdS);
      warpgroup_fence_operand(tdVrdV);
      warpgroup_fence_operand(tdKrdK);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tOrP); ++kb) cute::gemm(mma_dkv, tOrP(_, _, kb), tKVrdOt(_, _, kb, st), tdVrdV);
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tOrdS); ++kb) cute::gemm(mma_dkv, tOrdS(_, _, kb), tKVrQt(_, _, kb, st), tdKrdK);
      warpgroup_commit_batch();
    }
    // ---- dS^T to shared memory once both warpgroups' previous dQ GEMMs have read it
    if constexpr (!kKeySplit) named_barrier_sync(kBarDsFree, 256);  // (kKeySplit: own half, own wait<0>)
    if constexpr (kFastIo) {
      Tensor ds32 = recast<uint32_t>(tOrdS);
      const int blk = lane / 8, row = 64 * cwg + 16 * ((ctid % 128) / 32) + 8 * (blk & 1) + lane % 8;
      const uint32_t row_addr = ptx::smem_u32(ss.ds.data()) + row * 128;
      CUTE_UNROLL
      for (int t = 0; t < BM / 16; ++t)
        ptx::stmatrix_x4(row_addr + (t / 4) * (BN * 128) + (((2 * (t % 4) + (blk >> 1)) ^ (row % 8)) << 4),
                         ds32(4 * t), ds32(4 * t + 1), ds32(4 * t + 2), ds32(4 * t + 3));
    } else {
      CUTE_UNROLL
      for (int i = 0; i < size(tOrdS); ++i) tSsdS(i) = tOrdS(i);
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores before the async-proxy reads
    if constexpr (kKeySplit) named_barrier_sync(kBarDsReadyWg + cwg, 128);
    else named_barrier_sync(kBarDsReady, 256);

    // ---- dQ part = dS K
    warpgroup_fence_operand(tdQrdQ);
    warpgroup_arrive();
    mma_dq.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tQrdS); ++kb) {
      cute::gemm(mma_dq, tQrdS(_, _, kb, mblk, kblk), tQrK(_, _, kb, cblk, kblk), tdQrdQ);
      mma_dq.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<0>();  // dK / dV and dQ batches: the stage and dS^T are read
    warpgroup_fence_operand(tdVrdV);
    warpgroup_fence_operand(tdKrdK);
    warpgroup_fence_operand(tdQrdQ);
    cutlass::arch::ClusterBarrier::arrive(&ss.empty[st]);  // every lane: its reads of the stage are done

    if constexpr (kBulkDq) {
      // ---- dQ part to its shared buffer (column pairs as 8-byte stores) for warp 2's bulk reductions
      {
        const int ds = it % Tr::kDqStages;
        mbar_wait(&ss.dq_empty[ds], ((it / Tr::kDqStages) & 1) ^ 1);
        float* buf = ss.dq.data() + (ds * Tr::kWGs + cwg) * BM * Tr::kDqLd;
        CUTE_UNROLL
        for (int i = 0; i < size(tdQrdQ); i += 2)
          *reinterpret_cast<float2*>(buf + get<0>(tdQc(i)) * Tr::kDqLd + get<1>(tdQc(i))) =
              make_float2(tdQrdQ(i), tdQrdQ(i + 1));
        ptx::fence_proxy_async_smem();  // generic stores before the async-proxy reads
        mbar_arrive(&ss.dq_full[ds]);
      }
    } else if constexpr (kTileDq) {
      // ---- dQ part to its shared buffer in register order (float4 j of thread t at j * 128 + t:
      // each warp's store is 512 contiguous bytes) for warp 2's bulk reduction
      const int ds = it % Tr::kDqStages;
      mbar_wait(&ss.dq_empty[ds], ((it / Tr::kDqStages) & 1) ^ 1);
      // (BM 128: the two 64-row halves' values follow each other, so do their 16 KB parts)
      float4* buf = reinterpret_cast<float4*>(ss.dq.data() + (ds * Tr::kWGs + cwg) * BM * Tr::kDqLd);
      CUTE_UNROLL
      for (int j = 0; j < size(tdQrdQ) / 4; ++j)
        buf[j * 128 + ctid % 128] = make_float4(tdQrdQ(4 * j), tdQrdQ(4 * j + 1), tdQrdQ(4 * j + 2), tdQrdQ(4 * j + 3));
      ptx::fence_proxy_async_smem();  // generic stores before the async-proxy reads
      mbar_arrive(&ss.dq_full[ds]);
    } else if constexpr (kFastIo) {
      // ---- dQ sums: 8-byte reductions from the thread's two row pointers
      CUTE_UNROLL
      for (int mh = 0; mh < DQR / 64; ++mh)
        reduce_dq_rows<NC>(a, sb, m0 + 64 * (mblk + mh), h, cblk * NC, ctid % 128, lane, tdQrdQ(_, mh, 0));
    } else {
      // ---- dQ sums: column pairs as one 8-byte reduction (even columns, K a multiple of 8)
      CUTE_UNROLL
      for (int i = 0; i < size(tdQrdQ); i += 2) {
        const int qi = m0 + 64 * mblk + get<0>(tdQc(i));
        if (qi < sb.lq) {
          const int c = cblk * NC + get<1>(tdQc(i));
          float* dst = a.dq_accum + ((int64_t(sb.bq) * p.Mq + sb.q0 + qi) * p.H + h) * p.K + c;
          atomicAdd(reinterpret_cast<float2*>(dst), make_float2(tdQrdQ(i), tdQrdQ(i + 1)));
        }
      }
    }
  }
  if (kPingPong && cwg == 0 && sp.m_tiles > 0) named_barrier_sync(kBarSched, 256);  // warpgroup 1's last turn

  // ---- epilogue: dK * scale and dV of the tile's keys
  store_dk_dv<Element>(p, sb, n0, h, 0, tdKrdK, tdVrdV, tdKVc);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mslk::attention::sm90_bwd
#endif  // MSLK_HAS_CUTLASS
