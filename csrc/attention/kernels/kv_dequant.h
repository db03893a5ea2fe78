// Dequantization of quantized K/V cache rows (INT4 with per-group fp16 scale / shift, FP8 E4M3
// rowwise with fp16 scale / shift or an fp32 scale) into a float row: the format of the split-K
// decode op's quantized caches (docs/design/attention_decode.md). Torch-free: one element rule for
// the CPU reference loop and the CUDA kernel, so both give the same bits.
//
// Row layouts (int32 words, little-endian bytes):
//   INT4, G groups: [G scale/shift words][D / 8 data words]. Scale/shift word g: fp16 scale in the
//     low 16 bits, fp16 shift in the high 16; element i is nibble i of the data (byte i / 2, the
//     low nibble for even i), unsigned 0..15, in group i / (D / G); value = q * scale + shift.
//   FP8: [D / 4 data words], element i is byte i, an E4M3 (fn) value; the row's scale/shift sits
//     in a separate tensor: an int32 word as above (value = x * scale + shift) or an fp32 scale
//     (value = x * scale).
// q * scale is exact in float32 for fp16 scales (4 x 11 significant bits), so the one rounding is
// the add: a fused multiply-add gives the same result on the device.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MSLK_KVQ_FN __host__ __device__ __forceinline__
#else
#define MSLK_KVQ_FN inline
#endif

namespace mslk::attention {

struct KvDequantParams {
  const int32_t* cache;      // rows x words, row r at cache + r * cache_stride
  int64_t rows, cache_stride;
  int64_t head_dim;          // D, the elements of one dequantized row
  int num_groups;            // INT4: G >= 1; FP8: 0
  const void* scale_shift;   // FP8 only: one int32 (fp16 pair) or float32 per row
  int64_t ss_stride;         // in elements of scale_shift
  bool fp32_scales;          // FP8: scale_shift is float32 (scale only)
  void* out;                 // rows x D, contiguous
};

// Data words of a row, each dequantized by one kv_dequant_word call.
MSLK_KVQ_FN int64_t kv_dequant_words(const KvDequantParams& p) {
  return p.num_groups > 0 ? p.head_dim / 8 : p.head_dim / 4;
}

MSLK_KVQ_FN float kvq_bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 bits to float (exact).
MSLK_KVQ_FN float kvq_half_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1Fu) return kvq_bits_to_float(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return kvq_bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
  const float mag = float(man) * (1.0f / 16777216.0f);  // subnormal: man * 2^-24
  return sign ? -mag : mag;
}

// E4M3 "fn" (no infinities; S.1111.111 is NaN) bits to float (exact).
MSLK_KVQ_FN float kvq_e4m3_to_float(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 24, exp = (b >> 3) & 0xFu, man = b & 0x7u;
  if (exp == 0xFu && man == 0x7u) return kvq_bits_to_float(sign | 0x7FC00000u);
  if (exp != 0) return kvq_bits_to_float(sign | ((exp + 120u) << 23) | (man << 20));
  const float mag = float(man) * (1.0f / 512.0f);  // subnormal: man * 2^-9
  return sign ? -mag : mag;
}

// Elements of data word w of `row`, passed to store(element index in the row, value).
template <class Store>
MSLK_KVQ_FN void kv_dequant_word(const KvDequantParams& p, int64_t row, int64_t w, Store&& store) {
  const int32_t* src = p.cache + row * p.cache_stride;
  if (p.num_groups > 0) {
    const uint32_t word = uint32_t(src[p.num_groups + w]);
    const int64_t group_len = p.head_dim / p.num_groups;
    for (int j = 0; j < 8; ++j) {
      const int64_t i = 8 * w + j;
      const uint32_t ss = uint32_t(src[i / group_len]);
      const float q = float((word >> (4 * j)) & 0xFu);
      store(i, q * kvq_half_to_float(ss & 0xFFFFu) + kvq_half_to_float(ss >> 16));
    }
    return;
  }
  const uint32_t word = uint32_t(src[w]);
  float scale, shift = 0.0f;
  if (p.fp32_scales) {
    scale = static_cast<const float*>(p.scale_shift)[row * p.ss_stride];
  } else {
    const uint32_t ss = uint32_t(static_cast<const int32_t*>(p.scale_shift)[row * p.ss_stride]);
    scale = kvq_half_to_float(ss & 0xFFFFu);
    shift = kvq_half_to_float(ss >> 16);
  }
  for (int j = 0; j < 4; ++j) store(4 * w + j, kvq_e4m3_to_float((word >> (8 * j)) & 0xFFu) * scale + shift);
}

// float32 out (CPU reference; the glue casts to the requested dtype).
inline void kv_dequant_host(const KvDequantParams& p) {
  const int64_t words = kv_dequant_words(p);
  float* out = static_cast<float*>(p.out);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t w = 0; w < words; ++w)
      kv_dequant_word(p, r, w, [&](int64_t i, float x) { out[r * p.head_dim + i] = x; });
}

}  // namespace mslk::attention

#if defined(MSLK_WITH_CUDA) || defined(__CUDACC__)
#include <cuda_runtime.h>

namespace mslk::attention {
// out_dtype: 0 float16, 1 bfloat16, 2 float32. Launches on `stream`; returns the launch error.
cudaError_t kv_dequant_cuda(const KvDequantParams& p, int out_dtype, cudaStream_t stream);
}  // namespace mslk::attention
#endif
