// Argument checks, output allocation and parameter setup of the FP8 ops; the backend (CPU
// reference or CUDA) does the arithmetic. Both backends therefore see identical inputs.
#include "quantize/fp8_quantize.h"

#include <ATen/core/DimVector.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>

#include "common/checks.h"
#include "common/fp8.h"

namespace mslk::quantize {
namespace {

constexpr auto kFp8 = at::kFloat8_e4m3fn;

Dtype dtype_of(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return Dtype::kFloat32;
    case at::kHalf: return Dtype::kFloat16;
    default: return Dtype::kBFloat16;
  }
}

void check_input(const Tensor& t, const char* op, const char* arg) {
  check_dtype(t, op, arg, {at::kBFloat16, at::kHalf, at::kFloat});
  check_last_dim_contiguous(t, op, arg);
}

// The stride of a's leading dims (all but the last) taken as one dim, when they collapse into one
// (size-1 dims ignored); false when they do not. *stride is left alone when no leading dim exceeds 1.
bool leading_stride(const Tensor& a, int64_t* stride) {
  bool seen = false;
  int64_t expect = 0;
  for (int64_t d = a.dim() - 2; d >= 0; --d) {
    const int64_t n = a.size(d);
    if (n == 1) continue;
    if (!seen) *stride = a.stride(d), seen = true;
    else if (a.stride(d) != expect) return false;
    expect = a.stride(d) * n;
  }
  return true;
}

// [..., K] as rows [R, K] with unit column stride: the input's own memory when the leading dims
// collapse (what a.reshape({R, K}) would view, without making the view: a dispatcher round trip
// and a TensorImpl per call), else a contiguous copy, held in `copy` while the rows are used.
struct RowsOf {
  Rows rows;
  Tensor copy;
};

RowsOf as_rows(const Tensor& a) {
  const int64_t K = a.dim() == 0 ? 1 : a.size(-1);
  const int64_t R = K == 0 ? c10::multiply_integers(a.sizes().begin(), a.sizes().end() - 1) : a.numel() / K;
  int64_t stride = K;
  if ((K <= 1 || a.stride(-1) == 1) && leading_stride(a, &stride))
    return {{a.data_ptr(), dtype_of(a), R, K, R <= 1 ? K : stride}, Tensor()};
  Tensor v = a.reshape({R, K});
  if (K > 1 && v.stride(1) != 1) v = v.contiguous();
  return {{v.data_ptr(), dtype_of(v), R, K, R <= 1 ? K : v.stride(0)}, v};
}

// t as a 1-D vector of unit stride: t itself when it is one (reshape({-1}).contiguous() would
// return a view of it), else that.
Tensor flat(const Tensor& t) {
  if (t.dim() == 1 && (t.size(0) <= 1 || t.stride(0) == 1)) return t;
  return t.reshape({-1}).contiguous();
}

// Block sizes and row alignments beyond this are no real layout, and past it the tile counts
// and padded widths would overflow int64.
constexpr int64_t kMaxTile = int64_t(1) << 31;

void check_tile(int64_t v, const char* op, const char* arg) {
  check_positive(v, op, arg);
  TORCH_CHECK_VALUE(v <= kMaxTile, op, ": argument '", arg, "' must be at most 2**31, got ", v);
}

// A one-value tensor that must be a positive number (NaN fails too).
void check_positive_scalar(const Tensor& t, const char* op, const char* arg) {
  if (!t.is_cpu()) return;
  const double v = t.item<double>();
  TORCH_CHECK_VALUE(v > 0, op, ": argument '", arg, "' must be positive, got ", v);
}

// scale_ub as one float32 on the input's device (the kernels read it there). Its sign is checked
// only when it lies on the CPU: reading a device value would cost a host sync.
std::optional<Tensor> prepare_ub(const std::optional<Tensor>& ub, const Tensor& ref, const char* op) {
  if (!ub) return std::nullopt;
  TORCH_CHECK_VALUE(ub->numel() == 1, op, ": argument 'scale_ub' must hold one value, got shape ", ub->sizes());
  check_dtype(*ub, op, "scale_ub", {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf});
  check_positive_scalar(*ub, op, "scale_ub");
  return ub->to(ref.device(), at::kFloat).reshape({1}).contiguous();
}

// CPU m_sizes: every size non-negative and the sizes together within x's M rows.
void check_segments(const Tensor& m_sizes, int64_t M, const char* op) {
  const Tensor s = m_sizes.to(at::kLong).contiguous();
  const int64_t* v = s.data_ptr<int64_t>();
  int64_t sum = 0;
  for (int64_t g = 0; g < s.numel(); ++g) {
    TORCH_CHECK_VALUE(v[g] >= 0, op, ": argument 'm_sizes' must be non-negative, got m_sizes[", g, "] = ", v[g]);
    TORCH_CHECK_VALUE(v[g] <= M - sum, op, ": argument 'm_sizes' must sum to at most x.size(0) = ", M,
                      ", got more by m_sizes[", g, "] = ", v[g]);
    sum += v[g];
  }
}

const float* ptr_or_null(const std::optional<Tensor>& t) { return t ? t->data_ptr<float>() : nullptr; }

Fp8TileParams tile_params(const Rows& rows, const Tensor& xq, const Tensor& scale, int64_t out_stride,
                          int64_t tile_m, int64_t tile_k, int64_t ssm, int64_t ssk,
                          const std::optional<Tensor>& ub, float eps) {
  Fp8TileParams p{};
  p.in = rows;
  p.out = static_cast<uint8_t*>(xq.data_ptr());
  p.out_stride = out_stride;
  p.scale = scale.data_ptr<float>();
  p.tile_m = tile_m;
  p.tile_k = tile_k;
  p.scale_stride_m = ssm;
  p.scale_stride_k = ssk;
  p.scale_ub = ptr_or_null(ub);
  p.eps = eps;
  return p;
}

TensorPair to_output_device(Tensor xq, Tensor scale, std::optional<at::Device> dev) {
  if (dev) return {xq.to(*dev), scale.to(*dev)};
  return {std::move(xq), std::move(scale)};
}

at::IntArrayRef leading_shape(const Tensor& a) {
  return a.dim() == 0 ? at::IntArrayRef() : a.sizes().slice(0, a.dim() - 1);
}

}  // namespace

TensorPair quantize_fp8_row(const Fp8Backend& b, const Tensor& a, const std::optional<Tensor>& scale_ub,
                            const std::optional<Tensor>& zero_start_index_M, bool /*use_triton*/,
                            std::optional<at::Device> output_device, std::optional<int64_t> align_rows_to,
                            std::optional<double> eps) {
  constexpr const char* op = "quantize_fp8_row";
  check_input(a, op, "a");
  check_dim(a, op, "a", 1, 64);
  const double eps_opt = eps.value_or(1.0 / 512);  // None: the schema's default
  TORCH_CHECK_VALUE(std::isfinite(eps_opt) && eps_opt > 0, op,
                    ": argument 'eps_opt' must be positive and finite, got ", eps_opt);
  if (align_rows_to) check_tile(*align_rows_to, op, "align_rows_to");
  c10::OptionalDeviceGuard guard(a.device());
  const auto ub = prepare_ub(scale_ub, a, op);
  const RowsOf rows = as_rows(a);
  const int64_t K = rows.rows.K;
  const int64_t K_out = align_rows_to ? (K + *align_rows_to - 1) / *align_rows_to * *align_rows_to : K;

  at::DimVector out_shape(a.sizes());
  out_shape.back() = K_out;
  Tensor xq = at::empty(out_shape, a.options().dtype(kFp8));
  Tensor scale = at::empty(leading_shape(a), a.options().dtype(at::kFloat));
  Fp8TileParams p = tile_params(rows.rows, xq, scale, K_out, 1, K, 1, 0, ub, static_cast<float>(eps_opt));

  std::optional<Tensor> zs;
  if (zero_start_index_M) {
    zs = *zero_start_index_M;
    TORCH_CHECK_VALUE(a.dim() >= 2, op, ": argument 'zero_start_index_M' needs 'a' with at least 2 dimensions ",
                      "(one count per [M, K] matrix), got shape ", a.sizes());
    check_dtype(*zs, op, "zero_start_index_M", {at::kInt, at::kLong});
    check_same_device(*zs, a, op, "zero_start_index_M", "a");
    const int64_t mats = c10::multiply_integers(a.sizes().begin(), a.sizes().end() - 2);
    TORCH_CHECK_VALUE(zs->numel() == mats, op, ": argument 'zero_start_index_M' must hold one count per matrix (",
                      mats, " for 'a' of shape ", a.sizes(), "), got shape ", zs->sizes());
    zs = zs->contiguous();
    p.zero_start = zs->data_ptr();
    p.zero_start_int64 = zs->scalar_type() == at::kLong;
    p.rows_per_matrix = a.size(-2);
  }
  if (rows.rows.M > 0) {
    if (K == 0) {  // an empty row has amax 0: its scale is clamp(0, eps, ub) / 448
      Tensor c = at::full({1}, static_cast<float>(eps_opt), scale.options());
      if (ub) c = at::minimum(c, *ub);
      scale.copy_(at::div(c, kFp8E4M3Max).reshape({}));
    } else {
      b.rows(p);
    }
  }
  return to_output_device(std::move(xq), std::move(scale), output_device);
}

TensorPair quantize_fp8_block(const Fp8Backend& b, const Tensor& x, int64_t block_m, int64_t block_k,
                              const std::optional<Tensor>& scale_ub, bool /*use_triton*/,
                              std::optional<at::Device> output_device, bool k_major) {
  constexpr const char* op = "quantize_fp8_block";
  check_input(x, op, "x");
  check_dim(x, op, "x", 2, 2);
  check_tile(block_m, op, "block_m");
  check_tile(block_k, op, "block_k");
  c10::OptionalDeviceGuard guard(x.device());
  const auto ub = prepare_ub(scale_ub, x, op);
  const RowsOf rows = as_rows(x);
  const int64_t M = x.size(0), K = x.size(1);
  const int64_t gm = (M + block_m - 1) / block_m, gk = (K + block_k - 1) / block_k;
  Tensor xq = at::empty({M, K}, x.options().dtype(kFp8));
  Tensor scale = at::empty(k_major ? at::DimVector{gm, gk} : at::DimVector{gk, gm}, x.options().dtype(at::kFloat));
  const Fp8TileParams p = tile_params(rows.rows, xq, scale, K, block_m, block_k, k_major ? gk : 1, k_major ? 1 : gm, ub, kFp8Eps);
  if (gm * gk > 0) b.blocks(p);
  return to_output_device(std::move(xq), std::move(scale), output_device);
}

TensorPair quantize_fp8_tensor(const Fp8Backend& b, const Tensor& a, bool /*use_triton*/) {
  constexpr const char* op = "quantize_fp8_tensor";
  check_input(a, op, "a");
  c10::OptionalDeviceGuard guard(a.device());
  const RowsOf rows = as_rows(a);
  Tensor xq = at::empty(a.sizes(), a.options().dtype(kFp8));
  Tensor scale = at::empty({}, a.options().dtype(at::kFloat));
  Tensor scratch = at::empty({1}, a.options().dtype(at::kFloat));
  if (a.numel() == 0) {
    scale.fill_(kFp8Eps / kFp8E4M3Max);
  } else {
    b.tensor(rows.rows, static_cast<uint8_t*>(xq.data_ptr()), scale.data_ptr<float>(), scratch.data_ptr<float>());
  }
  return {xq, scale};
}

TensorPair quantize_fp8_group(const Fp8Backend& b, const Tensor& x, int64_t group_size,
                              const std::optional<Tensor>& scale_ub, const std::optional<Tensor>& m_sizes,
                              bool k_major) {
  constexpr const char* op = "quantize_fp8_group";
  check_input(x, op, "x");
  check_dim(x, op, "x", 1, 64);
  check_positive(group_size, op, "group_size");
  const int64_t K = x.size(-1);
  TORCH_CHECK_VALUE(K % group_size == 0, op, ": the last dimension of 'x' (", K,
                    ") must be divisible by 'group_size' (", group_size, ")");
  TORCH_CHECK_VALUE(k_major || x.dim() == 2, op, ": k_major=False needs a 2-D 'x' [M, K], got shape ", x.sizes());
  TORCH_CHECK_VALUE(!m_sizes || x.dim() == 2, op, ": argument 'm_sizes' needs a 2-D 'x' [total_M, K], got shape ",
                    x.sizes());
  c10::OptionalDeviceGuard guard(x.device());
  const auto ub = prepare_ub(scale_ub, x, op);
  const RowsOf rows = as_rows(x);
  const int64_t M = rows.rows.M, ng = K / group_size;
  Tensor xq = at::empty(x.sizes(), x.options().dtype(kFp8));
  at::DimVector scale_shape(leading_shape(x));
  scale_shape.push_back(ng);
  if (!k_major && !m_sizes) scale_shape = {ng, M};
  Tensor scale = at::empty(scale_shape, x.options().dtype(at::kFloat));
  Fp8TileParams p = tile_params(rows.rows, xq, scale, K, 1, group_size, k_major || m_sizes ? ng : 1,
                                k_major || m_sizes ? 1 : M, ub, kFp8Eps);
  Tensor starts;
  if (m_sizes) {
    check_dtype(*m_sizes, op, "m_sizes", {at::kInt, at::kLong});
    check_dim(*m_sizes, op, "m_sizes", 1, 1);
    check_same_device(*m_sizes, x, op, "m_sizes", "x");
    if (m_sizes->is_cpu()) check_segments(*m_sizes, M, op);
    if (!k_major) {
      // Each group's scales M-major inside its segment. The prefix sums stay on the device; there
      // the sizes cannot be checked without a host sync, so the rule of the grouped GEMMs applies:
      // a negative size counts as 0 and rows past x's end are dropped (starts clamped to [0, M]),
      // which keeps every scale index in bounds.
      const Tensor sizes = at::clamp_min(m_sizes->to(at::kLong), 0);
      starts = at::clamp_max(at::cat({at::zeros({1}, sizes.options()), at::cumsum(sizes, 0)}), M);
      p.seg_starts = starts.data_ptr<int64_t>();
      p.num_segments = static_cast<int>(m_sizes->numel());
    }
  }
  if (M > 0 && ng > 0) b.groups(p);
  return {xq, scale};
}

Tensor dequantize_fp8_row(const Fp8Backend& b, const Tensor& xq, const Tensor& x_scale) {
  constexpr const char* op = "dequantize_fp8_row";
  check_dtype(xq, op, "xq", {kFp8});
  check_dtype(x_scale, op, "x_scale", {at::kFloat});
  check_dim(xq, op, "xq", 1, 64);
  check_last_dim_contiguous(xq, op, "xq");
  check_same_device(x_scale, xq, op, "x_scale", "xq");
  c10::OptionalDeviceGuard guard(xq.device());
  const RowsOf rows = as_rows(xq);
  TORCH_CHECK_VALUE(x_scale.numel() == rows.rows.M, op, ": argument 'x_scale' must hold one scale per row of 'xq' (",
                    rows.rows.M, " for shape ", xq.sizes(), "), got shape ", x_scale.sizes());
  const Tensor s = flat(x_scale);
  Tensor out = at::empty(xq.sizes(), xq.options().dtype(at::kBFloat16));
  const int64_t K = rows.rows.K;
  const Fp8DequantParams p{static_cast<const uint8_t*>(rows.rows.ptr), rows.rows.M, K, rows.rows.stride,
                           s.data_ptr<float>(), 1, std::max<int64_t>(K, 1), 1, 0, out.data_ptr()};
  b.dequant(p);
  return out;
}

Tensor dequantize_fp8_block(const Fp8Backend& b, const Tensor& xq, const Tensor& x_scale, int64_t block_m,
                            int64_t block_k) {
  constexpr const char* op = "dequantize_fp8_block";
  check_dtype(xq, op, "xq", {kFp8});
  check_dtype(x_scale, op, "x_scale", {at::kFloat});
  check_dim(xq, op, "xq", 2, 2);
  check_last_dim_contiguous(xq, op, "xq");
  check_tile(block_m, op, "block_m");
  check_tile(block_k, op, "block_k");
  check_same_device(x_scale, xq, op, "x_scale", "xq");
  c10::OptionalDeviceGuard guard(xq.device());
  const int64_t M = xq.size(0), K = xq.size(1);
  const int64_t gm = (M + block_m - 1) / block_m, gk = (K + block_k - 1) / block_k;
  TORCH_CHECK_VALUE(x_scale.dim() == 2 && x_scale.size(0) == gm && x_scale.size(1) == gk, op,
                    ": argument 'x_scale' must have shape [", gm, ", ", gk, "] for 'xq' of shape ", xq.sizes(),
                    " and blocks ", block_m, "x", block_k, ", got ", x_scale.sizes());
  const RowsOf rows = as_rows(xq);
  Tensor out = at::empty({M, K}, xq.options().dtype(at::kBFloat16));
  const Fp8DequantParams p{static_cast<const uint8_t*>(rows.rows.ptr), M, K, rows.rows.stride,
                           x_scale.data_ptr<float>(), block_m, block_k, gk > 0 ? x_scale.stride(0) : 0,
                           gk > 0 ? x_scale.stride(1) : 0, out.data_ptr()};
  b.dequant(p);
  return out;
}

}  // namespace mslk::quantize
