// Quantized K/V caches of mslk::fmha_decode_splitk (k, v int32 in the layouts of
// kernels/kv_dequant.h): their checks, and their dequantization to q's dtype through the
// mslk::dequantize_kv_* ops, shared by the CPU and CUDA glue.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <utility>

namespace mslk::attention {

struct DecodeKvQuant {
  bool fp8;          // FP8 rows with k/v_scale_shift; else INT4
  int groups;        // INT4 scale/shift words a row (0 for FP8)
  bool fp32_scales;  // FP8: float32 scales (else int32 fp16 scale/shift pairs)
  int64_t head_dim;  // the logical D: q.shape[-1]
};

// Whether the call passes quantized caches (int32 k or v, or a scale/shift tensor): the glue's
// route to decode_kv_quant_check.
bool decode_kv_quantized(const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& k_scale_shift,
                         const std::optional<at::Tensor>& v_scale_shift);

// Checks int32 k, v [B, Mkv, Hkv, W] and the scale/shift tensors against q [B, Mq, Hkv, R, D]; each
// error names the argument. FP8 when the scale/shift tensors are given (W == D / 4, each of shape
// [B, Mkv, Hkv] or that with a trailing 1, int32 or float32 alike), INT4 otherwise (W == D / 8 + G,
// G in 1, 2, 4, 8 dividing D).
DecodeKvQuant decode_kv_quant_check(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const std::optional<at::Tensor>& k_scale_shift,
                                    const std::optional<at::Tensor>& v_scale_shift, const char* op);

// k and v dequantized to q's dtype, [B, Mkv, Hkv, D] (the rule of kv_dequant.h, one rounding).
std::pair<at::Tensor, at::Tensor> decode_kv_dequantize(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                       const std::optional<at::Tensor>& k_scale_shift,
                                                       const std::optional<at::Tensor>& v_scale_shift,
                                                       const DecodeKvQuant& f);

// A stand-in of the dequantized k or v for shape checks: [B, Mkv, Hkv, D] of q's dtype and device,
// broadcast from D elements.
at::Tensor decode_kv_logical(const at::Tensor& q, const at::Tensor& cache, int64_t head_dim);

}  // namespace mslk::attention
