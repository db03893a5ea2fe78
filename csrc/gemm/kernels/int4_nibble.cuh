// Helpers of the INT4 kernels (int4_gemm_decode.cu, int4_gemm_mma.cu, int4_gemm_tma.cu,
// int4_gemm_dequant.cu): nibble to float, the group-scale load, the output scaling, and the host
// dispatch over the group-scale element type.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "gemm/kernels/int4_gemm.h"

namespace mslk::gemm::int4 {

// Nibble to float without a conversion instruction: with the nibble's bits (offset-binary: the
// sign bit flipped) ORed into the mantissa of 2^15, whose ulp is 2^-8, the float is
// 2^15 + (q + 8) * 2^(P - 8) for a nibble at bit P (P <= 19); subtracting 2^15 + 8 * 2^(P - 8)
// leaves q * 2^(P - 8) exactly. One LOP3 (the mask and the magic do not overlap, so the AND, the
// sign flip and the exponent are one op) and one FADD a weight; the caller folds 2^(8 - P) into
// the activation or the scale (exact: a power of two). Nibbles at bits 20..31 are read at bits
// 8..16 of w >> 12.
// The XOR-and-exponent constants 2^15 | 8 << P for P = 0, 4, 8, 12, 16, held in registers: a
// LOP3 takes one immediate, so with both the mask and this constant as immediates the compiler
// emitted two LOP3 a weight; with the constant in a register (loop-invariant) it is one.
struct NibMagic {
  uint32_t v[5];
  __device__ __forceinline__ NibMagic() {
    asm volatile("mov.b32 %0, 0x47000008;" : "=r"(v[0]));
    asm volatile("mov.b32 %0, 0x47000080;" : "=r"(v[1]));
    asm volatile("mov.b32 %0, 0x47000800;" : "=r"(v[2]));
    asm volatile("mov.b32 %0, 0x47008000;" : "=r"(v[3]));
    asm volatile("mov.b32 %0, 0x47080000;" : "=r"(v[4]));
  }
};

template <int P>
__device__ __forceinline__ float nib(uint32_t w, const NibMagic& mg) {
  static_assert(P % 4 == 0 && P <= 16, "nibbles are read at bits 0, 4, 8, 12 or 16");
  constexpr float kOff = 32768.f + 8.f * (P >= 8 ? float(1 << (P - 8)) : 1.f / float(1 << (8 - P)));
  uint32_t t;
  // (w & mask) ^ magic: LUT 0x6A = (a & b) ^ c
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(t) : "r"(w), "n"(0xFu << P), "r"(mg.v[P / 4]));
  return __uint_as_float(t) - kOff;
}

// A group scale or zero (S: float, __nv_bfloat16 or __nv_fp8_e4m3) as float.
template <class S>
__device__ __forceinline__ float load_s(const void* s, int64_t i) {
  if constexpr (sizeof(S) == 4) {
    return __ldg(static_cast<const float*>(s) + i);
  } else if constexpr (sizeof(S) == 2) {
    return __bfloat162float(__ldg(static_cast<const __nv_bfloat16*>(s) + i));
  } else {
    __nv_fp8_e4m3 v;
    v.__x = __ldg(reinterpret_cast<const __nv_fp8_storage_t*>(s) + i);
    return float(v);
  }
}

// A float32 sum times the weight row scale (kF8) and the activation row scale (FP8 x).
__device__ __forceinline__ float epilogue(const Int4GemmParams& p, float v, int64_t m, int64_t n) {
  if (p.w_row_scale != nullptr) v *= p.w_row_scale[n];
  if (p.x_scale != nullptr) v *= p.x_scale[m];
  return v;
}

// f(S{}) with S the group-scale element type of `t` (host: picks the kernel instantiation).
template <class F>
auto with_scale_type(Int4Scale t, F&& f) {
  switch (t) {
    case Int4Scale::kF32: return f(float{});
    case Int4Scale::kBF16: return f(__nv_bfloat16{});
    default: return f(__nv_fp8_e4m3{});
  }
}

}  // namespace mslk::gemm::int4
