// mslk::dequantize_kv_int4 / dequantize_kv_fp8: schema, argument checks (each error names the
// argument), and the CPU implementation (the host loop of kernels/kv_dequant.h in float32, then a
// cast to `dtype`).
#include "attention/kv_dequant.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "common/checks.h"

namespace mslk::attention {

KvDequantCall kv_dequant_prepare(const at::Tensor& cache, const std::optional<at::Tensor>& scale_shift,
                                 int64_t num_groups, at::ScalarType dtype, at::ScalarType compute_dtype,
                                 const char* op) {
  check_dtype(cache, op, "cache", {at::kInt});
  check_dim(cache, op, "cache", 1, 8);
  check_last_dim_contiguous(cache, op, "cache");
  TORCH_CHECK_TYPE(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble, op,
                   ": argument 'dtype' must be float16, bfloat16, float32 or float64, got ", dtype);
  const int64_t words = cache.size(-1);
  int64_t D = 0;
  if (num_groups > 0) {
    TORCH_CHECK_VALUE(num_groups == 1 || num_groups == 2 || num_groups == 4 || num_groups == 8, op,
                      ": argument 'num_groups' must be 1, 2, 4 or 8, got ", num_groups);
    TORCH_CHECK_VALUE(words > num_groups, op, ": argument 'cache' must have a last dim of D // 8 + num_groups (",
                      num_groups, " scale/shift words, then the packed nibbles), got last dim ", words);
    D = 8 * (words - num_groups);
    TORCH_CHECK_VALUE(D % num_groups == 0, op, ": argument 'cache': head dim ", D, " (last dim ", words,
                      " - num_groups ", num_groups, ", times 8) is not a multiple of num_groups");
  } else {
    TORCH_CHECK_VALUE(num_groups == 0, op, ": argument 'num_groups' must be >= 0, got ", num_groups);
    D = 4 * words;
    TORCH_CHECK_VALUE(words >= 1, op, ": argument 'cache' must have a last dim of D // 4 >= 1, got ", words);
  }
  at::Tensor ss1d;
  const int64_t rows = cache.numel() / std::max<int64_t>(words, 1);
  if (num_groups == 0) {
    TORCH_CHECK_VALUE(scale_shift.has_value(), op, ": argument 'scale_shift' is required");
    const at::Tensor& ss = *scale_shift;
    check_dtype(ss, op, "scale_shift", {at::kInt, at::kFloat});
    check_same_device(ss, cache, op, "scale_shift", "cache");
    const auto lead = cache.sizes().slice(0, cache.dim() - 1);
    const bool ok = ss.sizes() == lead || (ss.dim() == cache.dim() && ss.size(-1) == 1 &&
                                           ss.sizes().slice(0, ss.dim() - 1) == lead);
    TORCH_CHECK_VALUE(ok, op, ": argument 'scale_shift' must have shape cache.shape[:-1] (", lead,
                      ") or that with a trailing 1, got ", ss.sizes());
    ss1d = ss.reshape({rows});
  }
  KvDequantCall c;
  c.cache2d = cache.reshape({rows, words});
  c.ss1d = ss1d;
  std::vector<int64_t> shape(cache.sizes().begin(), cache.sizes().end());
  shape.back() = D;
  c.out = at::empty(shape, cache.options().dtype(compute_dtype));
  c.params = KvDequantParams{c.cache2d.data_ptr<int32_t>(), rows, rows > 0 ? c.cache2d.stride(0) : words, D,
                             int(num_groups), ss1d.defined() ? ss1d.data_ptr() : nullptr,
                             ss1d.defined() && rows > 0 ? ss1d.stride(0) : 1,
                             ss1d.defined() && ss1d.scalar_type() == at::kFloat, c.out.data_ptr()};
  return c;
}

namespace {

at::Tensor dequant_cpu(const at::Tensor& cache, const std::optional<at::Tensor>& ss, int64_t groups,
                       at::ScalarType dtype, const char* op) {
  KvDequantCall c = kv_dequant_prepare(cache, ss, groups, dtype, at::kFloat, op);
  kv_dequant_host(c.params);
  return c.out.to(dtype);
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // cache int32 [..., D // 8 + num_groups] -> [..., D]
  m.def("dequantize_kv_int4(Tensor cache, int num_groups, ScalarType dtype) -> Tensor");
  // cache int32 [..., D // 4] (E4M3 bytes), scale_shift int32 (fp16 pair) or float32 [...] -> [..., D]
  m.def("dequantize_kv_fp8(Tensor cache, Tensor scale_shift, ScalarType dtype) -> Tensor");
}

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::attention::KvDequantOps<&mslk::attention::dequant_cpu>::register_mslk(m); }
