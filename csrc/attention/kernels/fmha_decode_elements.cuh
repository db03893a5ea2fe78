// Element rules of the split-K decode kernel over quantized K/V caches (fmha_decode_kernel.cuh):
// eight cache elements to a 16-byte chunk, either dequantized to T by kv_dequant.h's rule (fused)
// or raw in fp16 (folded), and the folded kernel's Q conversion.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "attention/kernels/fmha_sm80_device.cuh"

namespace mslk::attention::decode_detail {

using namespace sm80;  // NOLINT: the shared device helpers

// fp16 bits to float (exact).
__device__ __forceinline__ float half_bits(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }

// Eight elements of a quantized row (kv_dequant.h's rule: value = q * scale + shift in float32, the
// product exact, so one fma rounds as the reference's multiply-add does) packed as four T pairs.
template <typename T>
__device__ __forceinline__ uint4 dequant_fp8x8(uint32_t w0, uint32_t w1, float scale, float shift) {
  uint32_t o[4];
  const uint32_t w[2] = {w0, w1};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    const float2 f = __half22float2(__half2(hr));
    o[i] = Traits<T>::pack(fmaf(f.x, scale, shift), fmaf(f.y, scale, shift));
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
template <typename T>
__device__ __forceinline__ uint4 dequant_int4x8(uint32_t w, float scale, float shift) {
  constexpr uint32_t kMagic = 0x4B000000u;  // 2^23: its mantissa holds the nibble exactly
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float a = __uint_as_float(kMagic | ((w >> (8 * i)) & 0xFu)) - 8388608.0f;
    const float b = __uint_as_float(kMagic | ((w >> (8 * i + 4)) & 0xFu)) - 8388608.0f;
    o[i] = Traits<T>::pack(fmaf(a, scale, shift), fmaf(b, scale, shift));
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Folded caches: eight raw elements as four fp16 pairs, without scale or shift (exact). FP8: E4M3
// pairs in order. INT4: nibbles j and j + 4 of the word in pair j, so the eight columns come out
// as 0 4 1 5 2 6 3 7 (fold_q stores Q's columns in that order; the output undoes it).
// The E4M3 pair in the low 16 bits of w as an fp16 pair, low byte in the low half (one cvt; exact).
__device__ __forceinline__ uint32_t fp8x2_half2(uint32_t w) {
  const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w & 0xFFFFu), __NV_E4M3);
  return uint32_t(hr.x) | (uint32_t(hr.y) << 16);
}
__device__ __forceinline__ uint4 raw_fp8x8(uint32_t w0, uint32_t w1) {
  const uint32_t w[2] = {w0, w1};
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    o[i] = uint32_t(hr.x) | (uint32_t(hr.y) << 16);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
__device__ __forceinline__ uint4 raw_int4x8(uint32_t w) {
  constexpr uint32_t kMagic = 0x64006400u;  // fp16 1024 twice: its mantissa holds a nibble exactly
  const uint32_t magic = kMagic;
  const __half2 bias = *reinterpret_cast<const __half2*>(&magic);
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t x = ((w >> (4 * i)) & 0x000F000Fu) | kMagic;
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&x), bias);  // 1024 + q - 1024: exact
    o[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
// INT4 folded: the column held at stored position c (raw_int4x8's order within each chunk of eight).
__device__ __forceinline__ int int4_fold_col(int c) { return (c & ~7) | ((c & 7) >> 1) | ((c & 1) << 2); }

// Folded caches: the Q tile (ROWS x D of T, swizzled) to fp16 in place, row r times 2^s_r with s_r
// putting its largest |q| in [2^14, 2^15) (exact for every element within 2^28 of it); qmul[r] =
// 2^-s_r * scale_log2 (what the scores take back), qsum[r] = sum(q) * scale_log2 (the shift's term).
// kPerm: chunks stored in raw_int4x8's column order. Each thread converts the chunks it reads.
template <typename T, int D, int ROWS, int THREADS, bool kPerm>
__device__ __forceinline__ void fold_q(T* sQ, float* qmul, float* qsum, float scale_log2, int tid) {
  constexpr int TPR = THREADS / ROWS, CH = D / 8, NC = (CH + TPR - 1) / TPR;
  static_assert(THREADS % ROWS == 0 && TPR <= 32 && 32 % TPR == 0, "threads a Q row");
  const int row = tid / TPR, sub = tid % TPR;
  float x[NC][8];
  float mx = 0.f, sum = 0.f;
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const int c = sub + i * TPR;
#pragma unroll
    for (int j = 0; j < 8; ++j) x[i][j] = 0.f;
    if (c < CH) {
      const uint4 u = *reinterpret_cast<const uint4*>(sQ + swz<D>(row, c * 8));
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        x[i][j] = Traits<T>::to_float(e[j]);
        mx = fmaxf(mx, fabsf(x[i][j]));
        sum += x[i][j];
      }
    }
  }
#pragma unroll
  for (int o = 1; o < TPR; o *= 2) {
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  }
  int ex = 0;
  frexpf(mx, &ex);  // mx < 2^ex
  const int s = mx > 0.f ? min(15 - ex, 126) : 0;
  const float up = ldexpf(1.f, s);
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const int c = sub + i * TPR;
    if (c >= CH) continue;
    uint32_t o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int a = kPerm ? j : 2 * j, b = kPerm ? j + 4 : 2 * j + 1;
      const __half2 h = __floats2half2_rn(x[i][a] * up, x[i][b] * up);
      o[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
    *reinterpret_cast<uint4*>(sQ + swz<D>(row, c * 8)) = make_uint4(o[0], o[1], o[2], o[3]);
  }
  if (sub == 0) {
    qmul[row] = ldexpf(scale_log2, -s);
    qsum[row] = sum * scale_log2;
  }
}

}  // namespace mslk::attention::decode_detail
