// The grouped rowwise FP8 ops (f8f8bf16_rowwise_grouped, _cat, _stacked, _dynamic, _grouped_mm):
// argument checks and the choice between the backend's device-side grouped GEMM and one GEMM a
// group (fp8_rowwise_glue.h).
//
// Grouped forms whose group sizes live in a tensor, grouped along M (_grouped_stacked with
// M_sizes, the 2D x 3D _grouped_mm with offsets), go to the backend's device-side grouped GEMM
// (no host sync, CUDA-graph safe; group-size values are then not validated). Where it does not
// apply (the CPU reference, unaligned operands, the other _grouped_mm layouts) the sizes are read
// to the host and one GEMM runs per group. f8f8bf16_rowwise_grouped_dynamic needs no sync (it
// runs the full batch and zeroes the rows past zero_start_index_M on the device).
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>
#include <vector>

#include "common/checks.h"
#include "gemm/fp8_rowwise.h"
#include "gemm/fp8_rowwise_glue.h"
#include "gemm/grouped_glue.h"

namespace mslk::gemm {
using namespace rowwise_glue;
namespace {


// Group sizes / offsets to the host (see the note at the top of the file).
std::vector<int64_t> host_ints(const Tensor& t, const char* op, const char* arg, const Tensor& ref) {
  check_dtype(t, op, arg, {at::kInt, at::kLong});
  check_dim(t, op, arg, 1, 1);
  check_same_device(t, ref, op, arg, "XQ");
  Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Groups along M on the device (see the note at the top). out [total_M, N] contiguous bf16;
// xs [total_M], ws [G * N] float32 vectors. Returns false when the backend cannot take it.
bool try_device_grouped(const RowwiseBackend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& xs,
                        const Tensor& ws, const Tensor& sizes, bool ends, const Tensor& out, const char* op,
                        const char* arg) {
  if (!be.grouped || !out.is_contiguous()) return false;
  check_dtype(sizes, op, arg, {at::kInt, at::kLong});
  check_dim(sizes, op, arg, 1, 1);
  check_same_device(sizes, XQ, op, arg, "XQ");
  const int64_t G = WQ.size(0);
  TORCH_CHECK_VALUE(sizes.size(0) == G, op, ": argument '", arg, "' must hold one size per group (", G,
                    "), got shape ", sizes.sizes());
  const Tensor sz = sizes.contiguous();
  const int64_t total_M = XQ.size(0);
  Fp8GroupedParams p =
      fp8_grouped_params(XQ, total_M > 1 ? XQ.stride(0) : XQ.size(1), total_M, WQ, xs, ws, sz, out);
  p.sizes_are_ends = ends;
  p.fast_accum = true;
  return be.grouped(p);
}


void check_lists(TensorList XQ, TensorList WQ, TensorList xs, TensorList ws, const char* op) {
  const size_t G = XQ.size();
  TORCH_CHECK_VALUE(WQ.size() == G && xs.size() == G && ws.size() == G, op,
                    ": 'XQ', 'WQ', 'x_scale' and 'w_scale' must hold one tensor per group, got ", XQ.size(), ", ",
                    WQ.size(), ", ", xs.size(), " and ", ws.size(), " tensors");
  for (size_t g = 0; g < G; ++g) {
    check_fp8(XQ[g], op, "XQ");
    check_fp8(WQ[g], op, "WQ");
    check_dim(XQ[g], op, "XQ", 2, 2);
    check_dim(WQ[g], op, "WQ", 2, 2);
    check_same_device(XQ[g], XQ[0], op, "XQ", "XQ[0]");
    check_same_device(WQ[g], XQ[0], op, "WQ", "XQ");
    TORCH_CHECK_VALUE(WQ[g].size(1) == XQ[g].size(1), op, ": group ", g,
                      ": 'XQ' and 'WQ' must have the same K, got shapes ", XQ[g].sizes(), " and ", WQ[g].sizes());
  }
}

void run_group(const RowwiseBackend& b, const Tensor& X, const Tensor& W, const Tensor& xs, const Tensor& ws,
               const Tensor& out2d, const char* op) {
  const Tensor xv = scale_vec(xs, X.size(0), X, op, "x_scale", "one per row of XQ");
  const Tensor wv = scale_vec(ws, W.size(0), X, op, "w_scale", "one per row of WQ");
  gemm(b, X.unsqueeze(0), W.unsqueeze(0), xv, wv, std::nullopt, out2d.unsqueeze(0), true);
}

// The list forms in one device-side grouped launch: descriptors built here (sizes are known on the
// host), copied to the device from pinned memory without a sync. False: some group breaks TMA's
// rules (or K == 0), nothing was launched, and the caller loops over the groups.
bool try_device_list(const RowwiseBackend& be, TensorList XQ, TensorList WQ, TensorList x_scale,
                     TensorList w_scale, const std::vector<Tensor>& outs, const char* op) {
  if (!be.grouped) return false;
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  std::vector<Fp8GroupDesc> descs;  // scale copies made below are stream-ordered: safe to free on return
  int64_t total_m = 0;
  for (size_t g = 0; g < XQ.size(); ++g) {
    const int64_t m = XQ[g].size(0), n = WQ[g].size(0), k = XQ[g].size(1);
    const Tensor xv = scale_vec(x_scale[g], m, XQ[g], op, "x_scale", "one per row of XQ");
    const Tensor wv = scale_vec(w_scale[g], n, XQ[g], op, "w_scale", "one per row of WQ");
    if (m == 0 || n == 0) continue;
    Fp8GroupDesc d{};
    d.a = static_cast<const uint8_t*>(XQ[g].const_data_ptr());
    d.b = static_cast<const uint8_t*>(WQ[g].const_data_ptr());
    d.d = outs[g].data_ptr();
    d.xs = xv.const_data_ptr<float>();
    d.ws = wv.const_data_ptr<float>();
    d.m = m, d.n = n, d.k = k;
    d.lda = m > 1 ? XQ[g].stride(0) : k;
    d.ldb = n > 1 ? WQ[g].stride(0) : k;
    d.ldd = m > 1 ? outs[g].stride(0) : n;
    const bool ok = k > 0 && k % 16 == 0 && d.lda % 16 == 0 && d.ldb % 16 == 0 && d.ldd % 8 == 0 && aligned(d.a) &&
                    aligned(d.b) && aligned(d.d) && aligned(d.ws) && m <= INT32_MAX && n <= INT32_MAX &&
                    k <= INT32_MAX;
    if (!ok) return false;
    descs.push_back(d);
    total_m += m;
  }
  if (descs.empty()) return true;  // every group is empty
  const int64_t bytes = static_cast<int64_t>(descs.size() * sizeof(Fp8GroupDesc));
  Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), descs.data(), static_cast<size_t>(bytes));
  const Tensor dev = host.to(XQ[0].device(), /*non_blocking=*/true);  // pinned: no sync, kept alive until copied
  Fp8GroupedParams p;
  p.descs = static_cast<const Fp8GroupDesc*>(dev.const_data_ptr());
  p.G = static_cast<int64_t>(descs.size());
  p.total_M = total_m;
  p.fast_accum = true;
  return be.grouped(p);
}

}  // namespace

std::vector<Tensor> rowwise_grouped(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                                    TensorList w_scale, const char* op) {
  check_lists(XQ, WQ, x_scale, w_scale, op);
  std::vector<Tensor> outs;
  if (XQ.empty()) return outs;
  c10::OptionalDeviceGuard guard(XQ[0].device());
  for (size_t g = 0; g < XQ.size(); ++g)
    outs.push_back(at::empty({XQ[g].size(0), WQ[g].size(0)}, XQ[g].options().dtype(at::kBFloat16)));
  if (try_device_list(b, XQ, WQ, x_scale, w_scale, outs, op)) return outs;
  for (size_t g = 0; g < XQ.size(); ++g) run_group(b, XQ[g], WQ[g], x_scale[g], w_scale[g], outs[g], op);
  return outs;
}

Tensor rowwise_grouped_cat(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                           TensorList w_scale) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_cat";
  check_lists(XQ, WQ, x_scale, w_scale, op);
  TORCH_CHECK_VALUE(!XQ.empty(), op, ": argument 'XQ' (and 'WQ') must hold at least one group, got empty lists");
  c10::OptionalDeviceGuard guard(XQ[0].device());
  std::vector<Tensor> parts;
  Tensor out = cat_output(XQ, WQ, XQ[0].options().dtype(at::kBFloat16), op, &parts);
  if (try_device_list(b, XQ, WQ, x_scale, w_scale, parts, op)) return out;
  for (size_t g = 0; g < XQ.size(); ++g) run_group(b, XQ[g], WQ[g], x_scale[g], w_scale[g], parts[g], op);
  return out;
}

Tensor rowwise_grouped_stacked(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& M_sizes) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_stacked";
  check_operands(XQ, WQ, op, 2, 2, 3, 3);
  const int64_t total_M = XQ.size(0), K = XQ.size(1), G = WQ.size(0), N = WQ.size(1);
  TORCH_CHECK_VALUE(WQ.size(2) == K, op, ": 'XQ' [total_M, K] and 'WQ' [G, N, K] must have the same K, got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  const Tensor xs = scale_vec(x_scale, total_M, XQ, op, "x_scale", "one per row of XQ");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  if (total_M > 0 && N > 0 && G > 0 && K > 0) {
    Tensor out = at::empty({total_M, N}, XQ.options().dtype(at::kBFloat16));
    if (try_device_grouped(b, XQ, WQ, xs, ws, M_sizes, false, out, op, "M_sizes")) return out;
  }
  const auto sizes = host_ints(M_sizes, op, "M_sizes", XQ);
  TORCH_CHECK_VALUE(static_cast<int64_t>(sizes.size()) == G, op, ": argument 'M_sizes' must hold one size per group (",
                    G, "), got shape ", M_sizes.sizes());
  int64_t sum = 0;
  for (int64_t m : sizes) {
    TORCH_CHECK_VALUE(m >= 0, op, ": argument 'M_sizes' must be non-negative, got ", m);
    sum += m;
  }
  TORCH_CHECK_VALUE(sum <= total_M, op, ": argument 'M_sizes' sums to ", sum, ", more than the ", total_M,
                    " rows of 'XQ'");
  Tensor out = at::empty({total_M, N}, XQ.options().dtype(at::kBFloat16));
  if (sum < total_M) out.narrow(0, sum, total_M - sum).zero_();  // rows past every group
  int64_t r0 = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = sizes[g];
    if (m > 0)
      gemm(b, XQ.narrow(0, r0, m).unsqueeze(0), WQ.narrow(0, g, 1), xs.narrow(0, r0, m), ws.narrow(0, g * N, N),
           std::nullopt, out.narrow(0, r0, m).unsqueeze(0), true);
    r0 += m;
  }
  return out;
}

Tensor rowwise_grouped_dynamic(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& zero_start_index_M, bool zeroing_output_tensor) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_dynamic";
  check_operands(XQ, WQ, op, 3, 3, 3, 3);
  const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), N = WQ.size(1);
  TORCH_CHECK_VALUE(WQ.size(0) == G && WQ.size(2) == K, op,
                    ": 'WQ' must be [G, N, K] for 'XQ' [G, M, K], got shapes ", XQ.sizes(), " and ", WQ.sizes());
  const Tensor& zs = zero_start_index_M;
  check_dtype(zs, op, "zero_start_index_M", {at::kInt, at::kLong});
  check_same_device(zs, XQ, op, "zero_start_index_M", "XQ");
  TORCH_CHECK_VALUE(zs.numel() == G, op, ": argument 'zero_start_index_M' must hold one count per group (", G,
                    "), got shape ", zs.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  Tensor out = at::empty({G, M, N}, XQ.options().dtype(at::kBFloat16));
  // Rows m >= zero_start_index_M[g] are zero (on the device: no host sync). With
  // zeroing_output_tensor=False the reference leaves them unspecified; we zero them anyway.
  (void)zeroing_output_tensor;
  if (b.grouped && G > 0 && M > 0 && N > 0 && K > 0 && (M == 1 || XQ.stride(0) == M * XQ.stride(1))) {
    // Only the first zero_start_index_M[g] rows of each group are computed (device-side grouped GEMM).
    const Tensor zc = zs.contiguous();
    Fp8GroupedParams p =
        fp8_grouped_params(XQ, M > 1 ? XQ.stride(1) : (G > 1 ? XQ.stride(0) : K), G * M, WQ, xs, ws, zc, out);
    p.fixed_rows = M;
    p.fast_accum = true;
    if (b.grouped(p)) return out;
  }
  gemm(b, XQ, WQ, xs, ws, std::nullopt, out, true);
  const Tensor rows = at::arange(M, zs.options().dtype(at::kLong)).view({1, M, 1});
  out.masked_fill_(at::ge(rows, zs.reshape({G, 1, 1}).to(at::kLong)), 0);
  return out;
}

Tensor rowwise_grouped_mm(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale, const std::optional<Tensor>& offsets,
                          const std::optional<Tensor>& output) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_mm";
  check_operands(XQ, WQ, op, 2, 3, 2, 3);
  c10::OptionalDeviceGuard guard(XQ.device());
  const bool x3 = XQ.dim() == 3, w3 = WQ.dim() == 3;
  TORCH_CHECK_VALUE(x3 == w3 ? (x3 ? !offsets : offsets.has_value()) : offsets.has_value(), op,
                    x3 && w3 ? ": 'offsets' must be omitted for 3D x 3D (batched) inputs"
                             : ": 'offsets' is required unless 'XQ' and 'WQ' are both 3D");
  auto make_out = [&](at::IntArrayRef shape) {
    if (output) {
      check_out(*output, shape, XQ, op);
      return *output;
    }
    return at::empty(shape, XQ.options().dtype(at::kBFloat16));
  };
  auto ends = [&](int64_t limit, const char* what) {
    auto v = host_ints(*offsets, op, "offsets", XQ);
    int64_t prev = 0;
    for (int64_t e : v) {
      TORCH_CHECK_VALUE(e >= prev && e <= limit, op, ": argument 'offsets' must be non-decreasing cumulative ends ",
                        "of the groups along ", what, ", within [0, ", limit, "], got ", offsets->cpu());
      prev = e;
    }
    return v;
  };
  if (x3 && w3) {  // batched: [G, M, K] x [G, N, K] -> [G, M, N]
    const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), N = WQ.size(1);
    TORCH_CHECK_VALUE(WQ.size(0) == G && WQ.size(2) == K, op, ": 'WQ' must be [G, N, K] for 'XQ' [G, M, K], got ",
                      XQ.sizes(), " and ", WQ.sizes());
    Tensor out = make_out({G, M, N});
    gemm(b, XQ, WQ, scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]"),
         scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]"), std::nullopt, out, true);
    return out;
  }
  if (!x3 && w3) {  // 2D x 3D, groups along M: [total_M, K] x [G, N, K] -> [total_M, N]
    const int64_t TM = XQ.size(0), K = XQ.size(1), G = WQ.size(0), N = WQ.size(1);
    TORCH_CHECK_VALUE(WQ.size(2) == K, op, ": 'XQ' and 'WQ' must have the same K, got ", XQ.sizes(), " and ",
                      WQ.sizes());
    const Tensor xs = scale_vec(x_scale, TM, XQ, op, "x_scale", "one per row of XQ");
    const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
    Tensor out = make_out({TM, N});
    if (TM > 0 && N > 0 && G > 0 && K > 0 && try_device_grouped(b, XQ, WQ, xs, ws, *offsets, true, out, op, "offsets"))
      return out;
    const auto e = ends(TM, "M");
    TORCH_CHECK_VALUE(static_cast<int64_t>(e.size()) == G, op, ": 'offsets' must hold one end per group (", G,
                      "), got ", e.size());
    int64_t r0 = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t m = e[g] - r0;
      if (m > 0)
        gemm(b, XQ.narrow(0, r0, m).unsqueeze(0), WQ.narrow(0, g, 1), xs.narrow(0, r0, m), ws.narrow(0, g * N, N),
             std::nullopt, out.narrow(0, r0, m).unsqueeze(0), true);
      r0 = e[g];
    }
    if (r0 < TM) out.narrow(0, r0, TM - r0).zero_();
    return out;
  }
  if (x3 && !w3) {  // 3D x 2D, groups along N: [G, M, K] x [total_N, K] -> [M, total_N]
    const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), TN = WQ.size(0);
    TORCH_CHECK_VALUE(WQ.size(1) == K, op, ": 'XQ' and 'WQ' must have the same K, got ", XQ.sizes(), " and ",
                      WQ.sizes());
    const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
    const Tensor ws = scale_vec(w_scale, TN, XQ, op, "w_scale", "one per row of WQ");
    const auto e = ends(TN, "N");
    TORCH_CHECK_VALUE(static_cast<int64_t>(e.size()) == G, op, ": 'offsets' must hold one end per group (", G,
                      "), got ", e.size());
    Tensor out = make_out({M, TN});
    int64_t n0 = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t n = e[g] - n0;
      if (n > 0)
        gemm(b, XQ.narrow(0, g, 1), WQ.narrow(0, n0, n).unsqueeze(0), xs.narrow(0, g * M, M), ws.narrow(0, n0, n),
             std::nullopt, out.narrow(1, n0, n).unsqueeze(0), true);
      n0 = e[g];
    }
    if (n0 < TN) out.narrow(1, n0, TN - n0).zero_();
    return out;
  }
  // 2D x 2D, groups along K: [M, total_K] x [N, total_K] -> [G, M, N]
  const int64_t M = XQ.size(0), TK = XQ.size(1), N = WQ.size(0);
  TORCH_CHECK_VALUE(WQ.size(1) == TK, op, ": 'XQ' and 'WQ' must have the same total K, got ", XQ.sizes(), " and ",
                    WQ.sizes());
  const auto e = ends(TK, "K");
  const int64_t G = static_cast<int64_t>(e.size());
  const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  Tensor out = make_out({G, M, N});
  int64_t k0 = 0;
  for (int64_t g = 0; g < G; ++g) {
    gemm(b, XQ.narrow(1, k0, e[g] - k0).unsqueeze(0), WQ.narrow(1, k0, e[g] - k0).unsqueeze(0), xs.narrow(0, g * M, M),
         ws.narrow(0, g * N, N), std::nullopt, out.narrow(0, g, 1), true);
    k0 = e[g];
  }
  return out;
}

}  // namespace mslk::gemm
