// The argument checks and the one-GEMM call that the rowwise FP8 ops (fp8_rowwise.cpp) share with
// their grouped forms (fp8_rowwise_grouped.cpp). Glue only (torch headers).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "gemm/fp8_rowwise.h"

namespace mslk::gemm::rowwise_glue {

void check_fp8(const at::Tensor& t, const char* op, const char* arg);
// A float32 vector of n values with unit stride (copies only when it must).
at::Tensor scale_vec(const at::Tensor& s, int64_t n, const at::Tensor& ref, const char* op, const char* arg,
                     const char* what);
// One backend call: A [L, M, K], B [1 or L, N, K], xs [L*M], ws [N or L*N], bias [N or L*N],
// out [L, M, N] (bf16/fp16, unit stride over n).
void gemm(const RowwiseBackend& be, const at::Tensor& A, const at::Tensor& B, const at::Tensor& xs,
          const at::Tensor& ws, const std::optional<at::Tensor>& bias, const at::Tensor& out, bool fast);
void check_out(const at::Tensor& out, at::IntArrayRef shape, const at::Tensor& ref, const char* op);
// 'XQ' and 'WQ' fp8, of dims [x_lo, x_hi] and [w_lo, w_hi], on one device.
void check_operands(const at::Tensor& XQ, const at::Tensor& WQ, const char* op, int64_t x_lo, int64_t x_hi,
                    int64_t w_lo, int64_t w_hi);

}  // namespace mslk::gemm::rowwise_glue
