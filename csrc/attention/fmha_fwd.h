// Torch glue shared by the CPU and CUDA implementations of mslk::fmha_fused_fwd (schema in
// attention_ops.cpp): argument checks and the exact path on ATen ops (the CPU backend; the CUDA
// backend's for float32 / float64 and head dims over 256).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <tuple>

#include "attention/kernels/fmha_dropout.h"

namespace mslk::attention {

struct FmhaFwdArgs {
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& seqstart_q;
  const std::optional<at::Tensor>& seqstart_k;
  const std::optional<at::Tensor>& seqlen_k;
  int64_t max_seqlen_q;
  int64_t mask_kind;
  int64_t window_left;
  int64_t window_right;
  double scale;
  const std::optional<at::Tensor>& block_tables;
  int64_t page_size;
  double dropout_p;
  const std::optional<at::Tensor>& rng_state;
  const char* op = "mslk::fmha_fused_fwd";  // named in the messages (the backward reuses these checks)
};

// Shape, dtype, device, descriptor and dropout checks common to every backend (no device sync).
// Returns the dropout parameters read from rng_state (p = 0: none).
FmhaDropout fmha_fwd_check(const FmhaFwdArgs& a);

// Paged K/V (block_tables given, after fmha_fwd_check) as one padded logical K/V: every lane's pages
// gathered in order, lane s's keys starting at seqstart_k[s] + s * (pages a lane * page_size); a host
// read of block_tables, seqstart_k and seqlen_k.
struct FmhaUnpaged {
  at::Tensor k, v, seqstart_k;
};
FmhaUnpaged fmha_unpage(const FmhaFwdArgs& a);

// The exact forward on ATen ops, on q's device (after fmha_fwd_check): paged K/V gathered into one
// padded logical K/V (a host read of block_tables), then the reference attention in float32
// (float64 for float64) with the mask and dropout of the descriptor. chunked: scores a chunk of
// heads / query rows at a time (bounded memory: the CUDA backend's path for what its kernels do
// not take); else the CPU backend's choice (the whole score matrix unless dropout is on).
std::tuple<at::Tensor, at::Tensor> fmha_fwd_exact(const FmhaFwdArgs& a, const FmhaDropout& drop, bool chunked);

std::tuple<at::Tensor, at::Tensor> fmha_fwd_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t mask_kind, int64_t window_left,
    int64_t window_right, double scale, const std::optional<at::Tensor>& block_tables, int64_t page_size,
    double dropout_p, const std::optional<at::Tensor>& rng_state);

}  // namespace mslk::attention
