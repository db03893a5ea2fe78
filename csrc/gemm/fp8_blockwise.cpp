// Argument checks and shape logic of the block/group-scaled FP8 GEMM ops (fp8_blockwise.h). Every
// op reduces to calls of the backend's one-GEMM contract, so the CPU reference and the CUDA
// kernel see identical inputs. Scale tensors are the commonest user error here (a K-major grid
// where an MN-major one is due, a wrong block size): their messages name the argument, the
// expected shape and, when the transpose was passed, the quantizer call that writes the right one.
#include "gemm/fp8_blockwise.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include <string>
#include <vector>

#include "common/checks.h"
#include "gemm/dot_out_dtype.h"
#include "gemm/grouped_glue.h"

namespace mslk::gemm {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_fp8_operand(const Tensor& t, const char* op, const char* arg, int64_t lo, int64_t hi) {
  check_dtype(t, op, arg, {at::kFloat8_e4m3fn});
  check_dim(t, op, arg, lo, hi);
  check_last_dim_contiguous(t, op, arg);
}

// A float32 scale tensor of exactly `shape` on XQ's device; `hint` is added when the transposed
// shape came (the layout mix-up a user makes most).
void check_scale(const Tensor& s, at::IntArrayRef shape, const Tensor& ref, const char* op, const char* arg,
                 const std::string& what, const std::string& hint) {
  check_dtype(s, op, arg, {at::kFloat});
  check_same_device(s, ref, op, arg, "XQ");
  if (s.sizes() == shape) return;
  const bool transposed = s.dim() == 2 && shape.size() == 2 && s.size(0) == shape[1] && s.size(1) == shape[0] &&
                          shape[0] != shape[1];
  TORCH_CHECK_VALUE(false, op, ": argument '", arg, "' must have shape ", shape, " (", what, "), got ", s.sizes(),
                    transposed && !hint.empty() ? "; that is the transposed layout: " + hint : std::string());
}

void check_block(int64_t v, const char* op, const char* arg) { check_positive(v, op, arg); }

// One backend call, or the trivial results when a dimension is empty.
void run(const BlockwiseBackend& be, const Tensor& A, const Tensor& B, const Tensor& xs, const Tensor& ws,
         const Tensor& out, int64_t bm, int64_t bn, int64_t bk, const char* op) {
  if (A.size(0) == 0 || B.size(0) == 0) return;
  if (A.size(1) == 0) {  // empty sum
    out.zero_();
    return;
  }
  be.run(BlockwiseCall{A, B, out, xs, ws, bm, bn, bk, op});
}

// XQ [M, K] (a 2-D view of [..., M, K]) times WQ [N, K] with K-major scale grids
// x_scale [ceil(M / bm), ceil(K / bk)], w_scale [ceil(N / bn), ceil(K / bk)].
Tensor block_scaled(const BlockwiseBackend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                    const Tensor& w_scale, int64_t bm, int64_t bn, int64_t bk, const char* op, const char* xa,
                    const char* wa, const char* xsa, const char* wsa, const char* quantizer,
                    at::ScalarType out_type = at::kBFloat16) {
  check_same_device(WQ, XQ, op, wa, xa);
  const int64_t K = XQ.size(-1), N = WQ.size(0);
  TORCH_CHECK_VALUE(WQ.size(1) == K, op, ": '", xa, "' [..., M, K] and '", wa,
                    "' [N, K] must have the same K, got shapes ", XQ.sizes(), " and ", WQ.sizes());
  const int64_t M = c10::multiply_integers(XQ.sizes().begin(), XQ.sizes().end() - 1);
  const std::string hint = std::string("pass the K-major grid that ") + quantizer + " writes";
  check_scale(x_scale, {cdiv(M, bm), cdiv(K, bk)}, XQ, op, xsa,
              "one scale per block of " + std::to_string(bm) + " rows x " + std::to_string(bk) + " K of '" + xa + "'",
              hint);
  check_scale(w_scale, {cdiv(N, bn), cdiv(K, bk)}, XQ, op, wsa,
              "one scale per block of " + std::to_string(bn) + " rows x " + std::to_string(bk) + " K of '" + wa + "'",
              hint);
  c10::OptionalDeviceGuard guard(XQ.device());
  at::DimVector shape(XQ.sizes().begin(), XQ.sizes().end() - 1);
  shape.push_back(N);
  Tensor out = at::empty(shape, XQ.options().dtype(out_type));
  const Tensor A = XQ.dim() == 2 ? XQ : XQ.reshape({M, K});
  run(be, A, WQ, x_scale, w_scale, out.view({M, N}), bm, bn, bk, op);
  return out;
}

}  // namespace

Tensor f8f8bf16_blockwise(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale, int64_t block_m, int64_t block_n, int64_t block_k) {
  constexpr const char* op = "f8f8bf16_blockwise";
  check_fp8_operand(XQ, op, "XQ", 2, 2);
  check_fp8_operand(WQ, op, "WQ", 2, 2);
  check_block(block_m, op, "block_m");
  check_block(block_n, op, "block_n");
  check_block(block_k, op, "block_k");
  return block_scaled(b, XQ, WQ, x_scale, w_scale, block_m, block_n, block_k, op, "XQ", "WQ", "x_scale", "w_scale",
                      "quantize_fp8_block(x, block_m, block_k) (k_major=True)");
}

Tensor matmul_fp8_block(const BlockwiseBackend& b, const Tensor& a, const Tensor& bmat, const Tensor& a_scale,
                        const Tensor& b_scale, int64_t scale_block_m, int64_t scale_block_n, int64_t scale_block_k,
                        std::optional<at::ScalarType> dot_out_dtype, bool /*allow_tf32*/, bool /*fp8_fast_accum*/) {
  constexpr const char* op = "matmul_fp8_block";
  const at::ScalarType out_type = dot_out_dtype_result(dot_out_dtype, op);
  check_fp8_operand(a, op, "a", 2, 64);
  check_fp8_operand(bmat, op, "b", 2, 2);
  check_block(scale_block_m, op, "scale_block_m");
  check_block(scale_block_n, op, "scale_block_n");
  check_block(scale_block_k, op, "scale_block_k");
  return block_scaled(b, a, bmat, a_scale, b_scale, scale_block_m, scale_block_n, scale_block_k, op, "a", "b",
                      "a_scale", "b_scale", "quantize_fp8_block(x, scale_block_m, scale_block_k) (k_major=True)",
                      out_type);
}

Tensor f8f8bf16_groupwise(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale) {
  constexpr const char* op = "f8f8bf16_groupwise";
  check_fp8_operand(XQ, op, "XQ", 2, 2);
  check_fp8_operand(WQ, op, "WQ", 2, 2);
  check_same_device(WQ, XQ, op, "WQ", "XQ");
  const int64_t M = XQ.size(0), K = XQ.size(1), N = WQ.size(0), kb = cdiv(K, 128);
  TORCH_CHECK_VALUE(WQ.size(1) == K, op, ": 'XQ' [M, K] and 'WQ' [N, K] must have the same K, got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
  check_scale(x_scale, {kb, M}, XQ, op, "x_scale", "[K/128, M]: MN-major, one scale per row and 128 of K",
              "quantize 'XQ' with quantize_fp8_group(x, 128, k_major=False)");
  check_scale(w_scale, {kb, cdiv(N, 128)}, XQ, op, "w_scale",
              "[K/128, N/128]: MN-major, one scale per 128 x 128 block of 'WQ'",
              "quantize 'WQ' with quantize_fp8_block(w, 128, 128, k_major=False)");
  c10::OptionalDeviceGuard guard(XQ.device());
  Tensor out = at::empty({M, N}, XQ.options().dtype(at::kBFloat16));
  run(b, XQ, WQ, x_scale.t(), w_scale.t(), out, 1, 128, 128, op);
  return out;
}

Tensor f8f8bf16_groupwise_grouped(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ,
                                  const Tensor& x_scale, const Tensor& w_scale, const Tensor& M_sizes) {
  constexpr const char* op = "f8f8bf16_groupwise_grouped";
  check_fp8_operand(XQ, op, "XQ", 2, 2);
  check_fp8_operand(WQ, op, "WQ", 3, 3);
  check_same_device(WQ, XQ, op, "WQ", "XQ");
  const int64_t total_M = XQ.size(0), K = XQ.size(1), G = WQ.size(0), N = WQ.size(1), kb = cdiv(K, 128);
  TORCH_CHECK_VALUE(WQ.size(2) == K, op, ": 'XQ' [total_M, K] and 'WQ' [G, N, K] must have the same K, got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
  check_scale(x_scale, {total_M, kb}, XQ, op, "x_scale",
              "[total_M, K/128], each group's scales M-major inside its rows, as "
              "quantize_fp8_group(x, 128, m_sizes=M_sizes, k_major=False) writes them",
              "");
  TORCH_CHECK_VALUE(x_scale.is_contiguous(), op,
                    ": argument 'x_scale' must be contiguous (its groups' scales are laid out M-major inside "
                    "their segments of the buffer), got strides ",
                    x_scale.strides());
  const at::DimVector ws_shape{G, kb, cdiv(N, 128)};
  check_scale(w_scale, ws_shape, XQ, op, "w_scale", "[G, K/128, N/128]: MN-major 128 x 128 blocks of each group",
              "");
  check_dtype(M_sizes, op, "M_sizes", {at::kInt, at::kLong});
  check_dim(M_sizes, op, "M_sizes", 1, 1);
  check_same_device(M_sizes, XQ, op, "M_sizes", "XQ");
  TORCH_CHECK_VALUE(M_sizes.size(0) == G, op, ": argument 'M_sizes' must hold one size per group (", G,
                    "), got shape ", M_sizes.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  Tensor out = at::empty({total_M, N}, XQ.options().dtype(at::kBFloat16));
  if (b.grouped && total_M > 0 && N > 0 && K > 0) {  // sizes stay on the device: no sync, CUDA-graph safe
    const Tensor sz = M_sizes.contiguous();
    const Tensor ws = w_scale.contiguous();
    Fp8GroupedParams p = fp8_grouped_params(XQ, total_M > 1 ? XQ.stride(0) : K, total_M, WQ, x_scale, ws, sz, out);
    p.xs_rs = kb;
    p.ws_gs = kb * cdiv(N, 128);
    p.fast_accum = false;
    if (b.grouped(p)) return out;
  }
  // The sizes are read to the host: one GEMM per group.
  const Tensor hs = M_sizes.to(at::kCPU, at::kLong).contiguous();
  const int64_t* sizes = hs.const_data_ptr<int64_t>();
  int64_t sum = 0;
  for (int64_t g = 0; g < G; ++g) {
    TORCH_CHECK_VALUE(sizes[g] >= 0, op, ": argument 'M_sizes' must be non-negative, got M_sizes[", g,
                      "] = ", sizes[g]);
    sum += sizes[g];
  }
  TORCH_CHECK_VALUE(sum <= total_M, op, ": argument 'M_sizes' sums to ", sum, ", more than the ", total_M,
                    " rows of 'XQ'");
  if (sum < total_M) out.narrow(0, sum, total_M - sum).zero_();  // rows past every group
  const Tensor xs_flat = x_scale.view({-1});
  int64_t s = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = sizes[g];
    if (m == 0) continue;
    // Group g's scales: [kb, m] MN-major at element s * kb of the buffer.
    const Tensor xs = xs_flat.narrow(0, s * kb, kb * m).view({kb, m}).t();
    run(b, XQ.narrow(0, s, m), WQ[g], xs, w_scale[g].t(), out.narrow(0, s, m), 1, 128, 128, op);
    s += m;
  }
  return out;
}

}  // namespace mslk::gemm
