// The single contract behind every BF16 grouped GEMM op (torch-free: shared by the CPU
// reference and the CUDA kernels). All operands bf16 with unit stride along their last dim.
//
//   kForward: X [total_M, K] (row stride ldx), W [G, N, K] (row stride ldw, group stride
//             w_gs) -> out [total_M, N] (contiguous): out[r] = X[r] @ W[g(r)]^T.
//   kDgrad:   X = dY [total_M, N], W [G, N, K] -> out [total_M, K]: out[r] = X[r] @ W[g(r)].
//   kWgrad:   X = dY [total_M, N], W = X_act [total_M, K] (row stride ldw) -> out [G, N, K]
//             (contiguous): out[g] = X_g^T @ W_g over the rows of group g (zero for an empty
//             group); accumulate: out (float32) += that sum, else out = round(sum).
//
// Groups (kForward / kDgrad / kWgrad): group g owns rows [sum(m[:g]), sum(m[:g+1])) where
// m = m_sizes (int32 or int64, G values, device memory for CUDA). m_sizes == nullptr: one
// group of all total_M rows. Rows past sum(m) are written as zeros (kForward / kDgrad).
// On the device, sizes are not validated (that would need a host sync): a negative size counts
// as 0 and a group is cut at total_M. The host glue validates them on CPU tensors.
// fixed_rows > 0 (the _dynamic layout): group g owns rows [g * fixed_rows, (g+1) * fixed_rows)
// of which the first clamp(m[g], 0, fixed_rows) are computed and the rest are zero.
#pragma once
#include <cstdint>

#include "gemm/gemm_tuning.h"

namespace mslk::gemm {

enum class Bf16GroupedMode : int { kForward = 0, kDgrad = 1, kWgrad = 2 };

// kForward of groups known on the host (the list forms): one GEMM each, d = a @ b^T with
// a [m, k] (row stride lda), b [n, k] (ldb), d [m, n] (ldd); any m, n, k per group.
struct Bf16GroupDesc {
  const void* a;
  const void* b;
  void* d;
  int64_t m, n, k, lda, ldb, ldd;
};

struct Bf16GroupedParams {
  Bf16GroupedMode mode = Bf16GroupedMode::kForward;
  const void* x = nullptr;  // bf16
  const void* w = nullptr;  // bf16
  const void* m_sizes = nullptr;
  bool m_sizes_int64 = false;
  void* out = nullptr;  // bf16, or float32 when out_fp32
  bool out_fp32 = false;
  bool accumulate = false;  // kWgrad only: out (float32) += result
  int64_t G = 1, total_M = 0, N = 0, K = 0;
  int64_t ldx = 0, ldw = 0, w_gs = 0;
  int64_t fixed_rows = 0;
  int num_sms = 0;  // <= 0: all SMs
  GemmTuning tuning;  // forced_row: MSLK_BF16_GROUPED_CONFIG (kForward / kDgrad) or MSLK_BF16_WGRAD_CONFIG
  // Descriptor mode (kForward, the CUDA grouped path only): a device array of G descriptors
  // replaces x, w, out and m_sizes; total_M is the sum of the groups' m (tile heuristic).
  const Bf16GroupDesc* descs = nullptr;
};

}  // namespace mslk::gemm
