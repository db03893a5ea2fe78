// Quantized K/V caches of mslk::fmha_decode_splitk (fmha_decode_quant.h).
#include "attention/fmha_decode_quant.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "common/checks.h"

namespace mslk::attention {
namespace {

void check_scale_shift(const at::Tensor& ss, const at::Tensor& cache, const char* op, const char* arg) {
  check_dtype(ss, op, arg, {at::kInt, at::kFloat});
  check_same_device(ss, cache, op, arg, "k");
  const auto lead = cache.sizes().slice(0, 3);
  const bool ok = ss.sizes() == lead || (ss.dim() == 4 && ss.size(3) == 1 && ss.sizes().slice(0, 3) == lead);
  TORCH_CHECK_VALUE(ok, op, ": argument '", arg, "' must hold one entry per cache row, shape ", lead,
                    " (or with a trailing 1), got ", ss.sizes());
}

}  // namespace

bool decode_kv_quantized(const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& k_scale_shift,
                         const std::optional<at::Tensor>& v_scale_shift) {
  return k.scalar_type() == at::kInt || v.scalar_type() == at::kInt || given(k_scale_shift) || given(v_scale_shift);
}

DecodeKvQuant decode_kv_quant_check(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const std::optional<at::Tensor>& k_scale_shift,
                                    const std::optional<at::Tensor>& v_scale_shift, const char* op) {
  check_dim(q, op, "q", 5, 5);
  check_dtype(q, op, "q", {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble});  // the dequantized dtype
  check_dim(k, op, "k", 4, 4);
  check_dim(v, op, "v", 4, 4);
  check_dtype(k, op, "k", {at::kInt});
  check_dtype(v, op, "v", {at::kInt});
  check_same_device(k, q, op, "k", "q");
  check_same_device(v, q, op, "v", "q");
  TORCH_CHECK_VALUE(k.sizes() == v.sizes(), op, ": quantized caches 'k' and 'v' must have one shape, got ",
                    k.sizes(), " and ", v.sizes());
  check_last_dim_contiguous(k, op, "k");
  check_last_dim_contiguous(v, op, "v");
  DecodeKvQuant f{};
  f.head_dim = q.size(4);
  const int64_t D = f.head_dim, W = k.size(3);
  TORCH_CHECK_VALUE(given(k_scale_shift) == given(v_scale_shift), op,
                    ": FP8 caches need both 'k_scale_shift' and 'v_scale_shift' (INT4 caches neither)");
  f.fp8 = given(k_scale_shift);
  if (f.fp8) {
    TORCH_CHECK_VALUE(4 * W == D, op, ": FP8 cache 'k' must have a last dim of head dim ", D, " // 4 (",
                      "q.shape[-1] / 4), got ", W);
    check_scale_shift(*k_scale_shift, k, op, "k_scale_shift");
    check_scale_shift(*v_scale_shift, v, op, "v_scale_shift");
    TORCH_CHECK_TYPE(k_scale_shift->scalar_type() == v_scale_shift->scalar_type(), op,
                     ": 'k_scale_shift' and 'v_scale_shift' must share a dtype, got ", k_scale_shift->scalar_type(),
                     " and ", v_scale_shift->scalar_type());
    f.fp32_scales = k_scale_shift->scalar_type() == at::kFloat;
  } else {
    const int64_t G = W - D / 8;
    TORCH_CHECK_VALUE(D % 8 == 0 && (G == 1 || G == 2 || G == 4 || G == 8) && D % G == 0, op,
                      ": INT4 cache 'k' must have a last dim of head dim ", D, " // 8 + G with G in (1, 2, 4, 8) "
                      "dividing the head dim, got ", W, " (FP8 caches need k_scale_shift / v_scale_shift)");
    f.groups = int(G);
  }
  return f;
}

std::pair<at::Tensor, at::Tensor> decode_kv_dequantize(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                       const std::optional<at::Tensor>& k_scale_shift,
                                                       const std::optional<at::Tensor>& v_scale_shift,
                                                       const DecodeKvQuant& f) {
  const at::ScalarType dt = q.scalar_type();
  if (f.fp8) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mslk::dequantize_kv_fp8", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType)>();
    return {op.call(k, *k_scale_shift, dt), op.call(v, *v_scale_shift, dt)};
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mslk::dequantize_kv_int4", "")
                       .typed<at::Tensor(const at::Tensor&, int64_t, at::ScalarType)>();
  return {op.call(k, f.groups, dt), op.call(v, f.groups, dt)};
}

at::Tensor decode_kv_logical(const at::Tensor& q, const at::Tensor& cache, int64_t head_dim) {
  return at::empty({head_dim}, q.options()).expand({cache.size(0), cache.size(1), cache.size(2), head_dim});
}

}  // namespace mslk::attention
