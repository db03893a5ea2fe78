// Attention dropout mask, the same bits on the host (CPU reference, tests) and in the kernels:
// Philox4x32-10 keyed by the 64-bit seed, counter (j / 4, i, bh, offset); word j % 4 of the four
// outputs decides element (i, j). Counter-based, so forward and backward regenerate the mask
// from (seed, offset) without storing it, in any tile order.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MSLK_DROPOUT_FN __host__ __device__ __forceinline__
#else
#define MSLK_DROPOUT_FN inline
#endif

namespace mslk::attention {

struct FmhaDropout {
  float p = 0.f;          // drop probability; 0: no dropout
  uint64_t seed = 0;      // rng_state[0]
  uint64_t offset = 0;    // rng_state[1] (its low 32 bits enter the counter)
  uint32_t threshold = 0; // keep iff bits >= threshold (fmha_dropout_threshold(p))
  float rescale = 1.f;    // 1 / (1 - p)
};

MSLK_DROPOUT_FN uint32_t fmha_dropout_threshold(float p) {
  const double t = double(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xffffffffu : uint32_t(t);
}

MSLK_DROPOUT_FN FmhaDropout fmha_dropout_make(float p, uint64_t seed, uint64_t offset) {
  FmhaDropout d;
  d.p = p;
  d.seed = seed;
  d.offset = offset;
  d.threshold = fmha_dropout_threshold(p);
  d.rescale = p > 0.f && p < 1.f ? 1.f / (1.f - p) : 1.f;
  return d;
}

MSLK_DROPOUT_FN void fmha_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t r = uint64_t(a) * b;
  hi = uint32_t(r >> 32);
  lo = uint32_t(r);
}

// Philox4x32 with 10 rounds (Salmon et al., SC'11).
MSLK_DROPOUT_FN void fmha_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                                 uint32_t (&out)[4]) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    fmha_mulhilo(0xD2511F53u, c0, hi0, lo0);
    fmha_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// Keep bits of elements (i, 4 * j4 .. 4 * j4 + 3) of head bh: bit e set iff element 4 * j4 + e is kept.
MSLK_DROPOUT_FN uint32_t fmha_dropout_keep4(const FmhaDropout& d, int64_t bh, int64_t i, int64_t j4) {
  uint32_t w[4];
  fmha_philox(uint32_t(j4), uint32_t(i), uint32_t(bh), uint32_t(d.offset), uint32_t(d.seed), uint32_t(d.seed >> 32),
              w);
  return uint32_t(w[0] >= d.threshold) | uint32_t(w[1] >= d.threshold) << 1 | uint32_t(w[2] >= d.threshold) << 2 |
         uint32_t(w[3] >= d.threshold) << 3;
}

MSLK_DROPOUT_FN bool fmha_dropout_keep(const FmhaDropout& d, int64_t bh, int64_t i, int64_t j) {
  return (fmha_dropout_keep4(d, bh, i, j >> 2) >> (j & 3)) & 1u;
}

}  // namespace mslk::attention
