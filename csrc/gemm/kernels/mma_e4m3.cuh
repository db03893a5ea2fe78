// mma.sync m16n8k32 with E4M3 operands and float32 accumulation (sm_89+), the one home of the
// warp-level FP8 MMA that the decode-shape GEMMs (rowwise skinny, block/group-scaled decode) use.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k32"; g = lane / 4, t = lane % 4; a .b32
// register holds 4 consecutive k, lowest k in the low byte):
//   A regs a0..a3: (row g, k 4t..4t+3), (row g+8, k 4t..), (row g, k 16+4t..), (row g+8, k 16+4t..)
//   B regs b0, b1: (k 4t..4t+3, col g), (k 16+4t.., col g)
//   C/D c0..c3:    (row g, col 2t), (row g, col 2t+1), (row g+8, col 2t), (row g+8, col 2t+1)
// The sum over k does not care which physical k a logical k slot holds as long as A and B agree,
// so both decode kernels feed a lane's 16 contiguous bytes of a row (physical k 16t .. 16t+15 of
// a 64-k step) to two MMAs: MMA h (0, 1) takes bytes 8h..8h+3 as logical k 4t.. and 8h+4..8h+7
// as logical k 16+4t.., and B the same bytes of token row g (mma_e4m3_x2).
//
// On sm_90 ptxas lowers each MMA to exact E4M3 -> f16 conversions, two HMMA.16816.F32 and float32
// adds into C: the products are exact and the sum is float32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace mslk::gemm {

// d += A * B with the fragments above.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // e4m3 MMA needs sm_89+; the dispatchers never launch these kernels there
#endif
}

// One 64-k step of a 16-row block against one n8 tile of tokens: lo / hi are the lane's 16 bytes
// of rows g and g + 8, b the same 16 bytes (same physical k) of token row g.
__device__ __forceinline__ void mma_e4m3_x2(float (&d)[4], const uint4& lo, const uint4& hi, const uint4& b) {
  mma_e4m3(d, lo.x, hi.x, lo.y, hi.y, b.x, b.y);  // h = 0: bytes 0..7 of the lane's 16
  mma_e4m3(d, lo.z, hi.z, lo.w, hi.w, b.z, b.w);  // h = 1: bytes 8..15
}

}  // namespace mslk::gemm
