// Argument checks, output allocation and shape logic of the BF16 grouped GEMM ops. Every op
// reduces to calls of the backend's single contract (bf16_grouped_params.h), so the CPU
// reference and the CUDA kernels see identical inputs. Group sizes stay on the device: the
// CUDA path never syncs (CUDA-graph safe); their values are validated only on CPU tensors.
//
// CUDA kernel today: a tiled SIMT kernel (kernels/bf16_grouped_simt.cu), correct but far from
// the tensor-core rate; a CUTLASS sm90 ptr-array grouped kernel is the planned replacement.
#include "gemm/bf16_grouped.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

#include "common/checks.h"
#include "gemm/grouped_glue.h"

namespace mslk::gemm {
namespace {

void check_bf16(const Tensor& t, const char* op, const char* arg, int64_t dims) {
  check_dtype(t, op, arg, {at::kBFloat16});
  check_dim(t, op, arg, dims, dims);
  check_last_dim_contiguous(t, op, arg);
}

// A unit last stride, and the row stride a kernel can use (rows of a size-1 dim: packed).
int64_t row_stride(const Tensor& t, int dim) { return t.size(dim) > 1 ? t.stride(dim) : t.size(-1); }

// Group sizes: 1-D int32/int64 with G values on X's device; values checked when host-visible.
Tensor check_sizes(const Bf16GroupedBackend& b, const Tensor& ms, int64_t G, int64_t total, const Tensor& X,
                   const char* op, const char* arg, int64_t cap = -1) {
  check_dtype(ms, op, arg, {at::kInt, at::kLong});
  check_dim(ms, op, arg, 1, 1);
  check_same_device(ms, X, op, arg, "X");
  TORCH_CHECK_VALUE(ms.size(0) == G, op, ": argument '", arg, "' must hold one size per group (", G, "), got shape ",
                    ms.sizes());
  Tensor c = ms.contiguous();
  if (b.sizes_on_host) {
    const Tensor l = c.to(at::kLong);
    const int64_t* v = l.const_data_ptr<int64_t>();
    int64_t sum = 0;
    for (int64_t g = 0; g < G; ++g) {
      TORCH_CHECK_VALUE(v[g] >= 0, op, ": argument '", arg, "' must be non-negative, got ", v[g], " for group ", g);
      if (cap >= 0) continue;
      sum += v[g];
    }
    TORCH_CHECK_VALUE(cap >= 0 || sum <= total, op, ": argument '", arg, "' sums to ", sum, ", more than the ",
                      total, " rows of 'X'");
  }
  return c;
}

void check_cuda_grid(const Bf16GroupedBackend& b, int64_t G, const char* op) {
  TORCH_CHECK_VALUE(b.sizes_on_host || G <= 65535, op, ": at most 65535 groups are supported on CUDA, got ", G);
}

Tensor take_out(const std::optional<Tensor>& out, at::IntArrayRef shape, const Tensor& X, const char* op,
                const char* arg, at::ScalarType dtype) {
  if (!out) return at::empty(shape, X.options().dtype(dtype));
  check_dtype(*out, op, arg, {dtype});
  check_same_device(*out, X, op, arg, "X");
  TORCH_CHECK_VALUE(out->sizes() == shape, op, ": argument '", arg, "' must have shape ", shape, ", got ",
                    out->sizes());
  TORCH_CHECK_VALUE(out->is_contiguous(), op, ": argument '", arg, "' must be contiguous, got strides ",
                    out->strides());
  return *out;
}

void check_num_sms(std::optional<int64_t> num_sms, const char* op) {
  TORCH_CHECK_VALUE(!num_sms || *num_sms > 0, op, ": argument 'num_sms' must be positive when given, got ",
                    *num_sms);
}

void set_sizes(Bf16GroupedParams& p, const Tensor& ms) {
  p.m_sizes = ms.const_data_ptr();
  p.m_sizes_int64 = ms.scalar_type() == at::kLong;
}

// One forward GEMM of a single group (the list forms): X [M, K], W [N, K] -> out [M, N].
void run_single(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& out) {
  Bf16GroupedParams p;
  p.mode = Bf16GroupedMode::kForward;
  p.x = X.const_data_ptr(), p.w = W.const_data_ptr(), p.out = out.data_ptr();
  p.G = 1, p.total_M = X.size(0), p.N = W.size(0), p.K = X.size(1);
  p.ldx = row_stride(X, 0), p.ldw = row_stride(W, 0), p.w_gs = 0;
  b.run(p);
}

// The list forms in one grouped launch (see Bf16GroupedBackend::list): descriptors built here,
// copied to the device from pinned memory without a sync. False when the backend has no such path,
// a group breaks TMA's rules (16-byte bases and row strides) or has K == 0.
bool try_list(const Bf16GroupedBackend& b, TensorList X, TensorList W, const std::vector<Tensor>& outs) {
  if (!b.list) return false;
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  std::vector<Bf16GroupDesc> descs;
  int64_t total_m = 0;
  for (size_t g = 0; g < X.size(); ++g) {
    const int64_t m = X[g].size(0), n = W[g].size(0), k = X[g].size(1);
    if (m == 0 || n == 0) continue;
    Bf16GroupDesc d{X[g].const_data_ptr(), W[g].const_data_ptr(), outs[g].data_ptr(), m, n, k,
                    row_stride(X[g], 0), row_stride(W[g], 0), m > 1 ? outs[g].stride(0) : n};
    if (k == 0 || k % 8 || d.lda % 8 || d.ldb % 8 || d.ldd % 8 || !aligned(d.a) || !aligned(d.b) || !aligned(d.d) ||
        m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
      return false;
    descs.push_back(d);
    total_m += m;
  }
  if (descs.empty()) return true;
  const int64_t bytes = static_cast<int64_t>(descs.size() * sizeof(Bf16GroupDesc));
  Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), descs.data(), static_cast<size_t>(bytes));
  const Tensor dev = host.to(X[0].device(), /*non_blocking=*/true);  // pinned: no sync
  Bf16GroupedParams p;
  p.mode = Bf16GroupedMode::kForward;
  p.descs = static_cast<const Bf16GroupDesc*>(dev.const_data_ptr());
  p.G = static_cast<int64_t>(descs.size());
  p.total_M = total_m;
  return b.list(p);
}

void check_lists(TensorList X, TensorList W, const char* op) {
  TORCH_CHECK_VALUE(X.size() == W.size(), op, ": 'X' and 'W' must hold one tensor per group, got ", X.size(),
                    " and ", W.size(), " tensors");
  for (size_t g = 0; g < X.size(); ++g) {
    check_bf16(X[g], op, "X", 2);
    check_bf16(W[g], op, "W", 2);
    check_same_device(X[g], X[0], op, "X", "X[0]");
    check_same_device(W[g], X[0], op, "W", "X[0]");
    TORCH_CHECK_VALUE(W[g].size(1) == X[g].size(1), op, ": group ", g,
                      ": 'X' [M, K] and 'W' [N, K] must have the same K, got shapes ", X[g].sizes(), " and ",
                      W[g].sizes());
  }
}

}  // namespace

std::vector<Tensor> bf16_grouped(const Bf16GroupedBackend& b, TensorList X, TensorList W) {
  constexpr const char* op = "bf16bf16bf16_grouped";
  check_lists(X, W, op);
  std::vector<Tensor> outs;
  if (X.empty()) return outs;
  c10::OptionalDeviceGuard guard(X[0].device());
  for (size_t g = 0; g < X.size(); ++g) outs.push_back(at::empty({X[g].size(0), W[g].size(0)}, X[g].options()));
  if (try_list(b, X, W, outs)) return outs;
  for (size_t g = 0; g < X.size(); ++g) run_single(b, X[g], W[g], outs[g]);
  return outs;
}

Tensor bf16_grouped_cat(const Bf16GroupedBackend& b, TensorList X, TensorList W) {
  constexpr const char* op = "bf16bf16bf16_grouped_cat";
  check_lists(X, W, op);
  TORCH_CHECK_VALUE(!X.empty(), op, ": argument 'X' (and 'W') must hold at least one group, got empty lists");
  c10::OptionalDeviceGuard guard(X[0].device());
  std::vector<Tensor> parts;
  Tensor out = cat_output(X, W, X[0].options(), op, &parts);
  if (try_list(b, X, W, parts)) return out;
  for (size_t g = 0; g < X.size(); ++g) run_single(b, X[g], W[g], parts[g]);
  return out;
}

Tensor bf16_grouped_dynamic(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& zs) {
  constexpr const char* op = "bf16bf16bf16_grouped_dynamic";
  check_bf16(X, op, "X", 3);
  check_bf16(W, op, "W", 3);
  check_same_device(W, X, op, "W", "X");
  const int64_t G = X.size(0), M = X.size(1), K = X.size(2), N = W.size(1);
  TORCH_CHECK_VALUE(W.size(0) == G && W.size(2) == K, op, ": 'W' must be [G, N, K] for 'X' [G, M, K], got shapes ",
                    X.sizes(), " and ", W.sizes());
  check_cuda_grid(b, G, op);
  const Tensor z = check_sizes(b, zs, G, G * M, X, op, "zero_start_index_M", M);
  c10::OptionalDeviceGuard guard(X.device());
  const Tensor Xc = X.contiguous();  // rows of all groups at one stride
  Tensor out = at::empty({G, M, N}, X.options());
  if (G == 0 || M == 0 || N == 0) return out;
  Bf16GroupedParams p;
  p.mode = Bf16GroupedMode::kForward;
  p.x = Xc.const_data_ptr(), p.w = W.const_data_ptr(), p.out = out.data_ptr();
  set_sizes(p, z);
  p.G = G, p.total_M = G * M, p.N = N, p.K = K, p.fixed_rows = M;
  p.ldx = K, p.ldw = row_stride(W, 1), p.w_gs = W.stride(0);
  b.run(p);
  return out;
}

namespace {

// kForward (dgrad = false): X [total_M, K], W [G, N, K] -> [total_M, N].
// kDgrad (dgrad = true): X = dY [total_M, N], W [G, N, K] -> [total_M, K].
Tensor stacked_impl(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                    const std::optional<Tensor>& out, std::optional<int64_t> num_sms, bool dgrad, const char* op) {
  check_bf16(X, op, "X", 2);
  check_bf16(W, op, "W", 3);
  check_same_device(W, X, op, "W", "X");
  check_num_sms(num_sms, op);
  const int64_t total_M = X.size(0), G = W.size(0), N = W.size(1), K = W.size(2);
  const int64_t inner = dgrad ? N : K, outer = dgrad ? K : N;
  TORCH_CHECK_VALUE(X.size(1) == inner, op,
                    dgrad ? ": 'X' (dY) [total_M, N] and 'W' [G, N, K] must have the same N, got shapes "
                          : ": 'X' [total_M, K] and 'W' [G, N, K] must have the same K, got shapes ",
                    X.sizes(), " and ", W.sizes());
  check_cuda_grid(b, G, op);
  const Tensor ms = check_sizes(b, M_sizes, G, total_M, X, op, "M_sizes");
  c10::OptionalDeviceGuard guard(X.device());
  // A float32 `out` (forward only) keeps the float32 sums unrounded, so a caller's bias / weight
  // epilogue rounds once (mslk.gemm.triton.grouped_gemm).
  const bool fp32 = !dgrad && out && out->scalar_type() == at::kFloat;
  Tensor y = take_out(out, {total_M, outer}, X, op, "out", fp32 ? at::kFloat : at::kBFloat16);
  if (total_M == 0 || outer == 0) return y;
  if (G == 0) return y.zero_();  // no group: every row is past the groups
  Bf16GroupedParams p;
  p.mode = dgrad ? Bf16GroupedMode::kDgrad : Bf16GroupedMode::kForward;
  p.x = X.const_data_ptr(), p.w = W.const_data_ptr(), p.out = y.data_ptr();
  p.out_fp32 = fp32;
  set_sizes(p, ms);
  p.G = G, p.total_M = total_M, p.N = N, p.K = K;
  p.ldx = row_stride(X, 0), p.ldw = row_stride(W, 1), p.w_gs = W.stride(0);
  p.num_sms = num_sms ? static_cast<int>(*num_sms) : 0;
  b.run(p);
  return y;
}

}  // namespace

Tensor bf16_grouped_stacked(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                            const std::optional<Tensor>& out, std::optional<int64_t> num_sms) {
  return stacked_impl(b, X, W, M_sizes, out, num_sms, false, "bf16bf16bf16_grouped_stacked");
}

Tensor bf16_grouped_grad(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                         const std::optional<Tensor>& out, std::optional<int64_t> num_sms) {
  return stacked_impl(b, X, W, M_sizes, out, num_sms, true, "bf16bf16bf16_grouped_grad");
}

Tensor bf16_grouped_wgrad(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                          const std::optional<Tensor>& output, bool output_accum, std::optional<int64_t> num_sms) {
  constexpr const char* op = "bf16bf16bf16_grouped_wgrad";
  check_bf16(X, op, "X", 2);
  check_bf16(W, op, "W", 2);
  check_same_device(W, X, op, "W", "X");
  check_num_sms(num_sms, op);
  const int64_t total_M = X.size(0), N = X.size(1), K = W.size(1), G = M_sizes.dim() == 1 ? M_sizes.size(0) : -1;
  TORCH_CHECK_VALUE(W.size(0) == total_M, op,
                    ": 'X' (dY) [total_M, N] and 'W' (X) [total_M, K] must have the same rows, got shapes ",
                    X.sizes(), " and ", W.sizes());
  const Tensor ms = check_sizes(b, M_sizes, G, total_M, X, op, "M_sizes");
  check_cuda_grid(b, G, op);
  TORCH_CHECK_VALUE(!output_accum || output.has_value(), op,
                    ": output_accum=True requires a preallocated float32 'output' [G, N, K] to accumulate into");
  c10::OptionalDeviceGuard guard(X.device());
  Tensor dw;
  if (output_accum) {
    dw = take_out(output, {G, N, K}, X, op, "output", at::kFloat);
  } else if (output) {
    check_dtype(*output, op, "output", {at::kBFloat16, at::kFloat});
    dw = take_out(output, {G, N, K}, X, op, "output", output->scalar_type());
  } else {
    dw = at::empty({G, N, K}, X.options());
  }
  if (G == 0 || N == 0 || K == 0) return dw;
  Bf16GroupedParams p;
  p.mode = Bf16GroupedMode::kWgrad;
  p.x = X.const_data_ptr(), p.w = W.const_data_ptr(), p.out = dw.data_ptr();
  p.out_fp32 = dw.scalar_type() == at::kFloat;
  p.accumulate = output_accum;
  set_sizes(p, ms);
  p.G = G, p.total_M = total_M, p.N = N, p.K = K;
  p.ldx = row_stride(X, 0), p.ldw = row_stride(W, 0);
  p.num_sms = num_sms ? static_cast<int>(*num_sms) : 0;
  b.run(p);
  return dw;
}

}  // namespace mslk::gemm
