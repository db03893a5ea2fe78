// Masking and online softmax of the Hopper attention forward, over a wgmma accumulator seen as
// (2 rows, columns) a thread (acc_rowcol): the band of allowed keys (BandMask) and the running row
// maxima and sums (OnlineSoftmax). Neither touches O or P beyond the rescale, so a backward or a
// decode kernel over the same accumulator layout can take them as they are.
#pragma once
#include "attention/kernels/fmha_fwd_sm90_device.cuh"

#if MSLK_HAS_CUTLASS
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mslk::attention::sm90 {
using namespace cute;

constexpr float kMaxDrift = 8.f;  // log2 units a row max may pass its softmax reference (FA4's lazy rescale)

// The band on kj - qi of one warpgroup's rows in a work tile (both in [0, 2^31), so the difference
// fits int32; the bounds clamped to int32 keep every comparison exact and the per-element test in
// 32-bit arithmetic).
template <int BN>
struct BandMask {
  int dlo, dhi;      // row qi allows keys [qi + dlo, min(qi + dhi, lk - 1)]
  int n0_lo, n0_hi;  // key tiles starting in [n0_lo, n0_hi] lie wholly inside the band
  int r0, lk;        // the work tile's first query row, the key lane's length

  // A key tile at n0 that crosses the band or the key-lane end (else every element is allowed).
  __device__ __forceinline__ bool needed(int n0) const { return n0 > lk - BN || n0 < n0_lo || n0 > n0_hi; }

  // S = scale * S with the keys outside the band at -inf. Once a row, the bounds as offsets from
  // this thread's first column, so an element costs two compares against a constant column offset
  // (clamped to int32: the offsets compared are in [0, BN)).
  template <class TS, class TC>
  __device__ __forceinline__ void apply(TS& S_rc, const TC& Sc_rc, int n0, const float& scale_log2) const {
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
        const float x = S_rc(r, c) * scale_log2;   // a constant-bank operand: no register
        S_rc(r, c) = j < lo[r] || j > hi[r] ? -INFINITY : x;
      }
    }
  }
};

// A tensor bias over one work tile (kTileCfgs rows with bias): element (row i of the tile, key j of
// the lane) at base + i * sm + j * sn, float32 or the input dtype. Rows and keys past the ends read
// the last one: those scores are masked or never stored.
struct BiasTile {
  const void* base;  // element (bq, h, q0 + r0, k0)
  int64_t sm, sn;
  int rows, lk;
  bool fp32;

  // Pulls the key tile at n0 of this thread's two rows into L1 while its S GEMM runs, so that
  // update_biased's loads wait on L1 rather than L2 (contiguous keys only): lane l of a quad takes
  // the row's 128-byte line l, the quad's lanes together a row's BN keys (two lines of bf16, four
  // of float32).
  template <int BN, class TC>
  __device__ __forceinline__ void prefetch(const TC& Sc_rc, int n0, int lane) const {
    if (sn != 1 || n0 + BN > lk) return;
    const int es = fp32 ? 4 : 2, line = lane % 4;
    if (line * 128 >= BN * es) return;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int64_t i = min(get<0>(Sc_rc(r, 0)), rows - 1);
      ptx::prefetch_l1(static_cast<const char*>(base) + (i * sm + n0) * es + line * 128);
    }
  }
};

// The TMA route of the bias rows (Args::bias_tma): the key tile's bias, b / scale, as the starting
// value of S's accumulator, so that the S GEMM adds Q K^T to it and the softmax is the unbiased one
// (the scale folds into the exponent's FMA, and the bias is read before the GEMM is issued, beside
// the other warpgroup's GEMMs, rather than between the GEMM and the softmax). The tile sits in
// shared memory at `tile` as [BN / 64][BM][64] elements, 128-byte swizzled TMA boxes; row0 is the
// tile row of the warp's first accumulator row. ldmatrix_x4 step q: matrix i is rows
// (8 (i % 2)) .. + 7 of the warp's 16 in key block 2 q + i / 2, so register i holds
// S_rc(i % 2, 4 q + 2 (i / 2)) and the next column (S_rc's columns are 8 (c / 2) + 2 (lane % 4) + c % 2:
// test_fmha_sm90_layouts).
template <typename Element, int BN, int BM, class TS>
__device__ __forceinline__ void bias_into_scores(TS& S_rc, uint32_t tile, int row0, int lane, float inv_scale) {
  static_assert(BN % 16 == 0 && std::decay_t<decltype(size<1>(S_rc))>::value == BN / 4, "BN / 4 S columns a thread");
  const int row = row0 + (lane & 7) + 8 * ((lane >> 3) & 1);
  CUTE_UNROLL
  for (int q = 0; q < BN / 16; ++q) {
    const int b = 2 * q + (lane >> 4);  // 8-key block of this lane's address
    uint32_t r[4];
    ldmatrix_x4(tile + (b / 8) * (BM * 128) + row * 128 + (((b % 8) ^ (row & 7)) << 4), r[0], r[1], r[2], r[3]);
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i) {
      float lo, hi;
      unpack2<Element>(r[i], lo, hi);
      const int h = i % 2, c = 4 * q + 2 * (i / 2);
      S_rc(h, c) = lo * inv_scale;
      S_rc(h, c + 1) = hi * inv_scale;
    }
  }
}

// Running softmax statistics of a thread's two accumulator rows (log2 domain).
struct OnlineSoftmax {
  float m_i[2] = {-INFINITY, -INFINITY};  // running row max, the reference of exp2
  float l_i[2] = {0.f, 0.f};              // running row sum, this thread's columns only
  float alpha[2];                         // rescale factor of O from the last update

  // Scale, mask, online softmax of S (key tile at n0): S becomes exp2(scale * S - m), m_i and l_i
  // advance, alpha[r] = exp2(m_old - m_new) is left for O. A tile that needs no mask keeps S raw:
  // the row max of scale * S is scale * max(S) (scale * min(S) for a negative scale), and the scale
  // folds into the exponent's FFMA, one multiply an element fewer. A masked tile is scaled first
  // (scale * -inf is NaN for scale = 0) and then f = 1.
  template <int BN, class TS, class TC>
  __device__ __forceinline__ void update(TS& S_rc, const TC& Sc_rc, const BandMask<BN>& mask, int n0,
                                         const float& scale_log2) {
    const bool need_mask = mask.needed(n0);
    if (need_mask) mask.apply(S_rc, Sc_rc, n0, scale_log2);
    advance(S_rc, need_mask ? 1.f : scale_log2);  // the multiplier S still needs
  }

  // update() with a tensor bias: S = scale * S + bias (log2 units), then the band's -inf, then f = 1.
  // A row's bias values come from one row pointer: at compile-time offsets from this thread's first
  // key where the bias is contiguous along keys and the tile lies within the lane (the common case),
  // else with each key clamped to the lane.
  template <typename Element, int BN, class TS, class TC>
  __device__ __forceinline__ void update_biased(TS& S_rc, const TC& Sc_rc, const BandMask<BN>& mask, int n0,
                                                const float& scale_log2, const BiasTile& bias) {
    constexpr float kLog2e = 1.4426950408889634f;
    const int col0 = get<1>(Sc_rc(0, 0));
    const bool contiguous = bias.sn == 1 && n0 + BN <= bias.lk;  // uniform over the warpgroup
    auto add_rows = [&](auto elem) __attribute__((always_inline)) {
      using E = decltype(elem);
      const E* base = static_cast<const E*>(bias.base);
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const E* row = base + int64_t(min(get<0>(Sc_rc(r, 0)), bias.rows - 1)) * bias.sm;
        if (contiguous) {
          const E* p = row + n0 + col0;
          CUTE_UNROLL
          for (int c = 0; c < size<1>(S_rc); ++c)
            S_rc(r, c) = fmaf(S_rc(r, c), scale_log2, float(p[get<1>(Sc_rc(r, c)) - col0]) * kLog2e);
        } else {
          CUTE_UNROLL
          for (int c = 0; c < size<1>(S_rc); ++c) {
            const int j = min(n0 + get<1>(Sc_rc(r, c)), bias.lk - 1);
            S_rc(r, c) = fmaf(S_rc(r, c), scale_log2, float(row[int64_t(j) * bias.sn]) * kLog2e);
          }
        }
      }
    };
    if (bias.fp32) add_rows(float{});
    else add_rows(Element{});
    if (mask.needed(n0)) {
      const float one = 1.f;
      mask.apply(S_rc, Sc_rc, n0, one);
    }
    advance(S_rc, 1.f);
  }

  // The rest of an update, S already masked: S = exp2(f * S - m) with the running max and sums.
  template <class TS>
  __device__ __forceinline__ void advance(TS& S_rc, const float f) {
    // Row extremes of both rows at once, two partial chains a row (four independent FMNMX chains
    // instead of two rows one after the other), then the quad's 4 lanes (they share a row).
    // max(f * S) = f * max(S) for f >= 0, f * min(S) for f < 0 (a uniform branch outside the rows).
    constexpr int NC = std::decay_t<decltype(size<1>(S_rc))>::value;
    static_assert(NC % 2 == 0, "column pairs");
    float mx[2];
    auto row_extremes = [&](auto is_max) __attribute__((always_inline)) {
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
  }

  // O *= alpha, row by row; skipped when no row of the warp moved its reference.
  template <class TO>
  __device__ __forceinline__ void rescale(TO& O_rc) const {
    if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(O_rc); ++c) O_rc(r, c) *= alpha[r];
    }
  }
};

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
