// The epilogue of the Hopper attention forward: the stream-K partials (a part that starts past key
// tile 0 saves O, the row maxima and sums; the part from key tile 0 merges them) and the
// normalised output with its LSE through one of three store paths (TMA boxes from shared memory,
// 16-byte stores after a quad transpose, or 4-byte pairs). Measurements: docs/design/attention_sm90.md.
#pragma once
#include "attention/kernels/fmha_fwd_sm90_softmax.cuh"
#include "attention/kernels/fmha_fwd_sm90_traits.cuh"

#if MSLK_HAS_CUTLASS
#include <cutlass/arch/barrier.h>

#include <cmath>
#include <type_traits>

namespace mslk::attention::sm90 {
using namespace cute;

// Chunk c of a stream-K slot: float4s, thread-minor (coalesced); kNT consumer threads a CTA.
template <int D, int kNT>
__device__ __forceinline__ float4* sk_chunk(float4* ws, int slot, int c, int ctid) {
  return ws + (int64_t(slot) * stream_k_chunks(D) + c) * kNT + ctid;
}

// A part with kb_lo > 0: O unscaled, the reference maxima and this thread's row sums into slot
// blockIdx.x, then the slot's flag (+ 1: the next slot holds more of this tile).
template <int D, int kWGs, class TO>
__device__ __forceinline__ void stream_k_save(const Args& args, const TO& O_rc, const OnlineSoftmax& sm, int ctid,
                                              int cwg, int kb_hi) {
  constexpr int kNT = 128 * kWGs, kRowChunks = std::decay_t<decltype(size<1>(O_rc))>::value / 4;
  static_assert(2 * kRowChunks + 1 == stream_k_chunks(D), "partial layout");
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    CUTE_UNROLL
    for (int c = 0; c < kRowChunks; ++c)
      __stcg(sk_chunk<D, kNT>(args.sk_ws, blockIdx.x, r * kRowChunks + c, ctid),
             make_float4(O_rc(r, 4 * c), O_rc(r, 4 * c + 1), O_rc(r, 4 * c + 2), O_rc(r, 4 * c + 3)));
  }
  __stcg(sk_chunk<D, kNT>(args.sk_ws, blockIdx.x, 2 * kRowChunks, ctid),
         make_float4(sm.m_i[0], sm.m_i[1], sm.l_i[0], sm.l_i[1]));
  __threadfence();
  named_barrier_sync(kBarTail + cwg, 128);
  if (ctid % 128 == 0)
    flag_release(args.sk_flags + blockIdx.x * kWGs + cwg, args.sk_token + (kb_hi < args.sk.n_kt ? 1 : 0));
}

// The part from key tile 0: merges slots blockIdx.x + 1, ... (written early in those CTAs' tails)
// until a flag says the tile ends there. The count comes from the flags, not from the plan:
// recomputing each CTA's range here (64-bit unit math) made ptxas spill in the key loops.
template <int D, int kWGs, class TO>
__device__ __forceinline__ void stream_k_merge(const Args& args, TO& O_rc, OnlineSoftmax& sm, int ctid, int cwg,
                                               int kb_hi) {
  constexpr int kNT = 128 * kWGs, kRowChunks = std::decay_t<decltype(size<1>(O_rc))>::value / 4;
  int slot = blockIdx.x;
#pragma unroll 1
  for (unsigned more = kb_hi < args.sk.n_kt ? 1u : 0u; more != 0;) {
    ++slot;
    more = flag_wait(args.sk_flags + slot * kWGs + cwg, args.sk_token);  // every thread acquires
    named_barrier_sync(kBarTail + cwg, 128);
    if (ctid % 128 == 0) args.sk_flags[slot * kWGs + cwg] = 0;  // cleared for a graph replay (the next launch)
    const float4 ml = __ldcg(sk_chunk<D, kNT>(args.sk_ws, slot, 2 * kRowChunks, ctid));
    const float mb[2] = {ml.x, ml.y}, lb[2] = {ml.z, ml.w};
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      // Both parts relative to their own reference max: rescale to the larger (a part whose
      // rows saw no key has m = -inf, O = 0, l = 0 and weight 0).
      const float mn = fmaxf(sm.m_i[r], mb[r]);
      const float fa = sm.m_i[r] == -INFINITY ? 0.f : fast_exp2(sm.m_i[r] - mn);
      const float fb = mb[r] == -INFINITY ? 0.f : fast_exp2(mb[r] - mn);
      sm.l_i[r] = sm.l_i[r] * fa + lb[r] * fb;
      sm.m_i[r] = mn;
      CUTE_UNROLL
      for (int c = 0; c < kRowChunks; ++c) {
        const float4 o = __ldcg(sk_chunk<D, kNT>(args.sk_ws, slot, r * kRowChunks + c, ctid));
        O_rc(r, 4 * c) = O_rc(r, 4 * c) * fa + o.x * fb;
        O_rc(r, 4 * c + 1) = O_rc(r, 4 * c + 1) * fa + o.y * fb;
        O_rc(r, 4 * c + 2) = O_rc(r, 4 * c + 2) * fa + o.z * fb;
        O_rc(r, 4 * c + 3) = O_rc(r, 4 * c + 3) * fa + o.w * fb;
      }
    }
  }
}

// O / l and LSE = ln(sum exp) of one warpgroup's rows of a work tile; rows with no allowed key get
// O = 0, LSE = -inf. blk / h / r0: the work tile; lq: its query block's rows.
template <typename Element, int D, int C, class TO, class TOc>
__device__ __forceinline__ void store_output(const Args& args, SharedStorage<Element, D, C>& ss, const TO& O_rc,
                                             const TOc& Oc_rc, const OnlineSoftmax& sm, const Block& blk, int h,
                                             int r0, int lq, int ctid, int cwg, int lane) {
  using Tr = Traits<Element, D, C>;
  constexpr int kBM = Tr::kBM;
  const FmhaFwdParams& p = args.p;
  Element* out = static_cast<Element*>(p.out);
  constexpr float kLn2 = 0.6931471805599453f;
  float l_row[2], inv[2];  // a row's sum over its quad's 4 lanes, and 1 / sum (0 for an empty row)
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    float l = sm.l_i[r];
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
      // take it. The stores run on while the warpgroup goes on to its next tile.
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
  // 16-byte store: whole 32-byte sectors and a quarter of the store instructions.
  constexpr int kCols = std::decay_t<decltype(size<1>(O_rc))>::value;
  constexpr int kGroups = kCols / 8;  // groups of four 8-column blocks
  static_assert(kCols % 8 == 0, "whole groups of four 8-column blocks");
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
            l_row[r] > 0.f ? (sm.m_i[r] + log2f(l_row[r])) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
