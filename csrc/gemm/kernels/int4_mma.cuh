// The tensor-core pieces of the INT4 decode kernels (int4_gemm_mma.cu, int4_gemm_tma.cu): nibble
// pairs to exact 16-bit float MMA operands, the activations in the same k order, and the
// m16n8k16 MMA. Design notes: docs/design/int4_gemm.md.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace mslk::gemm::int4 {

// Element type of the MMA: bf16 for bf16 activations, f16 for FP8 ones (E4M3 converts to f16
// exactly; q in -8..7 is exact in both).
template <bool kF16>
struct MmaType {
  // (nibble pair) ^ kMagic = the 16-bit float 2^E + (q + 8), 2^E with a unit ulp: bf16 128, f16 1024
  static constexpr uint32_t kMagic = kF16 ? 0x64086408u : 0x43084308u;
  static constexpr uint32_t kOnes = kF16 ? 0x3C003C00u : 0x3F803F80u;  // (1, 1)
};

// (w >> 4i) nibble pair {i, i + 4} -> q pair, exact: one LOP3 ((a & b) ^ c, c in a register) and,
// for f16, one packed subtract of 2^E + 8. bf16 keeps the pair as 136 + q (exact) and the tile
// subtracts 136 * sum(x) once in float32 (kFold): x . (136 + q) is within a few float32 ulps of
// 136 * sum |x|, far below the bf16 output's rounding (f16, for FP8 activations, would carry
// 1032 * sum |x|: it subtracts per pair).
template <bool kF16>
inline constexpr bool kFold = !kF16;
template <bool kF16>
__device__ __forceinline__ uint32_t q_pair(uint32_t w, uint32_t magic) {
  uint32_t t;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(t) : "r"(w), "n"(0x000F000Fu), "r"(magic));
  if constexpr (kFold<kF16>) {
    return t;
  } else if constexpr (kF16) {
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&t), __half2half2(__ushort_as_half(0x6408)));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __nv_bfloat162 v =
        __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&t), __bfloat162bfloat162(__ushort_as_bfloat16(0x4308)));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

template <bool kF16>
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The 8 activations of one word's weights (as stored: bf16 16 bytes, E4M3 8 bytes) as the B pairs
// {x_i, x_(i+4)}, i = 0..3, the order q_pair gives the weights.
__device__ __forceinline__ void x_pairs(uint4 u, uint32_t (&b)[4]) {
  b[0] = __byte_perm(u.x, u.z, 0x5410);  // {x0, x4}
  b[1] = __byte_perm(u.x, u.z, 0x7632);  // {x1, x5}
  b[2] = __byte_perm(u.y, u.w, 0x5410);  // {x2, x6}
  b[3] = __byte_perm(u.y, u.w, 0x7632);  // {x3, x7}
}
__device__ __forceinline__ void x_pairs(uint2 u, uint32_t (&b)[4]) {
  const uint32_t p01 = __byte_perm(u.x, u.y, 0x5140), p23 = __byte_perm(u.x, u.y, 0x7362);  // x0 x4 x1 x5, ...
  const uint32_t h[4] = {p01 & 0xFFFFu, p01 >> 16, p23 & 0xFFFFu, p23 >> 16};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(h[i]), __NV_E4M3);
    b[i] = uint32_t(r.x) | (uint32_t(r.y) << 16);
  }
}

// One 128-k tile's products for kRp blocks of 16 weight rows and MG tiles of 8 activation rows:
// wv[rp][h] the lane's 16 bytes (weights 32c .. 32c + 31) of rows r + 8h of block rp; xfrag(j, mg,
// b) fills the B pairs of word j's activations for tile mg (x_pairs). dq += the q products;
// dx += the activation sums (an all-ones A) when `sums` (the zero term, and bf16's 136 fold).
template <bool kF16, int kRp, int MG, class XFrag>
__device__ __forceinline__ void tile_products(const uint4 (&wv)[kRp][2], XFrag&& xfrag, uint32_t magic, bool sums,
                                              float (&dq)[kRp][MG][4], float (&dx)[MG][4]) {
  const uint32_t ones = MmaType<kF16>::kOnes;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t qv[kRp][2][4];  // q pairs {e, e + 4} of word j: [rp][h][e]
#pragma unroll
    for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t w = reinterpret_cast<const uint32_t*>(&wv[rp][h])[j];
#pragma unroll
        for (int e = 0; e < 4; ++e) qv[rp][h][e] = q_pair<kF16>(w >> (4 * e), magic);
      }
#pragma unroll
    for (int mg = 0; mg < MG; ++mg) {
      uint32_t xb[4];
      xfrag(j, mg, xb);
      // two k16 steps a word: pairs {0, 1} then {2, 3}; A = {row r, row r + 8} x {k, k + 8}
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp) {
        mma<kF16>(dq[rp][mg], qv[rp][0][0], qv[rp][1][0], qv[rp][0][1], qv[rp][1][1], xb[0], xb[1]);
        mma<kF16>(dq[rp][mg], qv[rp][0][2], qv[rp][1][2], qv[rp][0][3], qv[rp][1][3], xb[2], xb[3]);
      }
      if (sums) {
        mma<kF16>(dx[mg], ones, ones, ones, ones, xb[0], xb[1]);
        mma<kF16>(dx[mg], ones, ones, ones, ones, xb[2], xb[3]);
      }
    }
  }
}

}  // namespace mslk::gemm::int4
