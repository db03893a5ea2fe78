// Argument checks, output allocation and parameter setup of the MoE ops, shared by the CPU
// reference and the CUDA backend (both therefore see identical, validated inputs).
// Value checks that need the data (ids in range, counts consistent) are done by the CPU
// reference only: on the GPU they would cost a host sync. The CUDA kernels skip rows whose ids
// are out of range instead of writing out of bounds.
#include "moe/moe.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>

#include "common/checks.h"

namespace mslk::moe {
namespace {

Dtype dtype_of(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return Dtype::kFloat32;
    case at::kHalf: return Dtype::kFloat16;
    default: return Dtype::kBFloat16;
  }
}

void check_float(const Tensor& t, const char* op, const char* arg) {
  check_dtype(t, op, arg, {at::kBFloat16, at::kHalf, at::kFloat});
}

void check_contiguous(const Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK_VALUE(t.is_contiguous(), op, ": argument '", arg, "' must be contiguous, got shape ", t.sizes(),
                    " with strides ", t.strides());
}

// A contiguous tensor of exactly `dims` dimensions.
void check_dense(const Tensor& t, const char* op, const char* arg, int64_t dims) {
  check_dim(t, op, arg, dims, dims);
  check_contiguous(t, op, arg);
}

void check_same_dtype(const Tensor& t, const Tensor& ref, const char* op, const char* arg, const char* ref_arg) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), op, ": '", arg, "' must have the dtype of '", ref_arg, "' (",
                   ref.scalar_type(), "), got ", t.scalar_type());
}

void check_index(const Tensor& t, const char* op, const char* arg, const Tensor& ref, const char* ref_arg) {
  check_dtype(t, op, arg, {at::kInt, at::kLong});
  check_dense(t, op, arg, 1);
  check_same_device(t, ref, op, arg, ref_arg);
}

Count count_of(const OptTensor& v, const Tensor& ref, const char* op, const char* arg, const char* ref_arg) {
  if (!v) return {};
  check_dtype(*v, op, arg, {at::kInt, at::kLong});
  TORCH_CHECK_VALUE(v->numel() == 1, op, ": argument '", arg, "' must hold one value, got shape ", v->sizes());
  check_same_device(*v, ref, op, arg, ref_arg);
  return {v->data_ptr(), v->scalar_type() == at::kLong};
}

// scale_ub as one float32 on ref's device; the kernels read it there. Its sign is checked only
// when it lies on the CPU: reading a device value would cost a host sync.
std::optional<Tensor> prepare_ub(const OptTensor& ub, const Tensor& ref, const char* op) {
  if (!ub) return std::nullopt;
  TORCH_CHECK_VALUE(ub->numel() == 1, op, ": argument 'scale_ub' must hold one value, got shape ", ub->sizes());
  check_dtype(*ub, op, "scale_ub", {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf});
  if (ub->is_cpu()) {
    const double v = ub->item<double>();
    TORCH_CHECK_VALUE(v > 0, op, ": argument 'scale_ub' must be positive, got ", v);
  }
  return ub->to(ref.device(), at::kFloat).reshape({1}).contiguous();
}

// An output must not share memory with an input: the kernels read rows the adds already changed.
void check_no_overlap(const Tensor& out, const char* out_arg, const Tensor& in, const char* in_arg, const char* op) {
  const auto st = at::get_overlap_status(out, in);  // TooHard (strided views): not provably shared
  TORCH_CHECK_VALUE(st != at::MemOverlapStatus::Full && st != at::MemOverlapStatus::Partial, op, ": '", out_arg,
                    "' must not share memory with '", in_arg, "'");
}

// On the CPU, every entry of index in [0, n): the message names both arguments. (On CUDA the
// kernels skip out-of-range entries; checking would cost a host sync.)
void check_ids_cpu(const Tensor& index, int64_t n, const char* op, const char* arg, const char* n_arg) {
  if (!index.is_cpu() || index.numel() == 0) return;
  const Tensor v = index.to(at::kLong).contiguous();
  const int64_t* p = v.data_ptr<int64_t>();
  for (int64_t i = 0; i < v.numel(); ++i)
    TORCH_CHECK_VALUE(p[i] >= 0 && p[i] < n, op, ": ", arg, "[", i, "] = ", p[i], " is out of range for '", n_arg,
                      "' with ", n, " rows");
}

// Token rows the kernels add: floating point. Integer rows are accepted too (the reference adds
// any dtype); they take ATen's index_add_ in the glue.
void check_token_dtype(const Tensor& t, const char* op, const char* arg) {
  check_dtype(t, op, arg, {at::kBFloat16, at::kHalf, at::kFloat, at::kInt, at::kLong});
}

bool is_integral_tokens(const Tensor& t) { return t.scalar_type() == at::kInt || t.scalar_type() == at::kLong; }

void check_expert_range(int64_t start, int64_t end, int64_t E, const char* op, const char* s_arg,
                        const char* e_arg) {
  TORCH_CHECK_VALUE(0 <= start && start <= end && end <= E, op, ": need 0 <= ", s_arg, " <= ", e_arg,
                    " <= E (", E, "), got ", s_arg, "=", start, ", ", e_arg, "=", end);
}

// Integer rows of scatter_add_padded_tokens: the slots' source rows built on the host from the
// counts (a sync on CUDA, on this path only), then ATen's index_add_.
void scatter_padded_aten(const Tensor& in, const Tensor& counts, const Tensor& tok, const Tensor& out,
                         const char* op) {
  const int64_t EP = in.size(0), T = in.size(1), E = counts.numel(), per_rank = E / EP;
  const Tensor c = counts.to(at::kCPU, at::kLong).contiguous();
  const int64_t* cv = c.data_ptr<int64_t>();
  Tensor src = at::empty({T}, c.options());
  int64_t* sv = src.data_ptr<int64_t>();
  int64_t n = 0;
  for (int64_t e = 0; e < E; ++e) {
    TORCH_CHECK_VALUE(cv[e] >= 0, op, ": token_counts[", e, "] = ", cv[e], " is negative");
    TORCH_CHECK_VALUE(cv[e] <= T - n, op, ": the token counts sum past the rows of each rank's block ",
                      "(in_tokens.size(1) = ", T, ") at token_counts[", e, "]");
    for (int64_t k = 0; k < cv[e]; ++k, ++n) sv[n] = (e / per_rank) * T + n;
  }
  const Tensor t = tok.slice(0, 0, n);
  check_ids_cpu(t, out.size(0), op, "token_indices", "out_tokens");
  Tensor o = out;
  o.index_add_(0, t.to(at::kLong), in.reshape({EP * T, in.size(2)}).index_select(0, src.slice(0, 0, n).to(in.device())));
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> index_shuffling(const MoeBackend& b, const Tensor& scores, OptInt start,
                                                   OptInt end, const OptTensor& valid, int64_t top_k) {
  constexpr const char* op = "index_shuffling";
  check_dtype(scores, op, "routing_scores", {at::kBFloat16, at::kFloat});
  check_dim(scores, op, "routing_scores", 2, 2);
  const int64_t T = scores.size(0), E = scores.size(1);
  TORCH_CHECK_VALUE(E >= 1 && E <= kMaxExperts, op, ": the number of experts (routing_scores.size(1)) must be in [1, ",
                    kMaxExperts, "], got ", E);
  TORCH_CHECK_VALUE(top_k >= 1 && top_k <= kMaxTopK && top_k <= E, op, ": 'top_k' must be in [1, min(", kMaxTopK,
                    ", E=", E, ")], got ", top_k);
  TORCH_CHECK_VALUE(T * top_k < (int64_t(1) << 31), op, ": T * top_k must fit in int32, got T=", T,
                    ", top_k=", top_k);
  const int64_t s = start.value_or(0), e = end.value_or(E);
  check_expert_range(s, e, E, op, "expert_index_start", "expert_index_end");
  c10::OptionalDeviceGuard guard(scores.device());
  auto iopt = scores.options().dtype(at::kInt);
  Tensor counts = at::empty({E + 2}, iopt);
  Tensor ei = at::empty({T * top_k}, iopt), ti = at::empty({T * top_k}, iopt);
  Tensor ws;
  IndexShufflingParams p{};
  p.scores = scores.data_ptr();
  p.dtype = dtype_of(scores);
  p.T = T;
  p.E = E;
  p.stride_t = scores.stride(0);
  p.stride_e = scores.stride(1);
  p.expert_start = static_cast<int>(s);
  p.expert_end = static_cast<int>(e);
  p.top_k = static_cast<int>(top_k);
  p.valid = count_of(valid, scores, op, "valid_token_count", "routing_scores");
  p.counts = counts.data_ptr<int32_t>();
  p.expert_indices = ei.data_ptr<int32_t>();
  p.token_indices = ti.data_ptr<int32_t>();
  if (b.needs_workspace) {
    ws = at::empty({index_shuffling_workspace_ints(T, E, top_k)}, iopt);
    p.workspace = ws.data_ptr<int32_t>();
  }
  b.index_shuffling(p);
  return {counts, ei, ti};
}

namespace {
// Mixed int32/int64 index tensors: the int32 one is widened (the kernels read one index type);
// `held` keeps the copy alive while the params point at it.
GatherParams gather_params(const char* op, const Tensor& x, const Tensor& tok, const Tensor& exp,
                           const Tensor& scores, const OptTensor& valid, Tensor& held) {
  check_float(x, op, "x");
  check_dense(x, op, "x", 2);
  check_index(tok, op, "token_indices", x, "x");
  check_index(exp, op, "expert_indices", x, "x");
  TORCH_CHECK_VALUE(tok.numel() == exp.numel(), op, ": 'token_indices' and 'expert_indices' must have the same ",
                    "length, got ", tok.numel(), " and ", exp.numel());
  check_float(scores, op, "scores");
  check_dim(scores, op, "scores", 2, 2);
  check_same_device(scores, x, op, "scores", "x");
  TORCH_CHECK_VALUE(scores.size(0) == x.size(0), op, ": 'scores' must be [T, E] with T = x.size(0) = ", x.size(0),
                    ", got shape ", scores.sizes());
  GatherParams p{};
  p.tok = tok.data_ptr();
  p.exp = exp.data_ptr();
  p.idx64 = tok.scalar_type() == at::kLong;
  if (tok.scalar_type() != exp.scalar_type()) {
    held = (p.idx64 ? exp : tok).to(at::kLong);
    (p.idx64 ? p.exp : p.tok) = held.data_ptr();
    p.idx64 = true;
  }
  p.x = x.data_ptr();
  p.dtype = dtype_of(x);
  p.T = x.size(0);
  p.D = x.size(1);
  p.A = tok.numel();
  p.scores = scores.data_ptr();
  p.score_dtype = dtype_of(scores);
  p.E = scores.size(1);
  p.stride_t = scores.stride(0);
  p.stride_e = scores.stride(1);
  p.valid = count_of(valid, x, op, "valid_token_count", "x");
  return p;
}
}  // namespace

Tensor gather_scale_dense_tokens(const MoeBackend& b, const Tensor& x, const Tensor& tok, const Tensor& exp,
                                 const Tensor& scores, const OptTensor& valid) {
  c10::OptionalDeviceGuard guard(x.device());
  Tensor held;
  GatherParams p = gather_params("gather_scale_dense_tokens", x, tok, exp, scores, valid, held);
  Tensor out = at::empty({p.A, p.D}, x.options());
  p.out = out.data_ptr();
  if (p.A > 0 && p.D > 0) b.gather(p);
  return out;
}

std::tuple<Tensor, Tensor> gather_scale_quant_dense_tokens(const MoeBackend& b, const Tensor& x, const Tensor& tok,
                                                           const Tensor& exp, const Tensor& scores,
                                                           const OptTensor& scale_ub, const OptTensor& valid) {
  constexpr const char* op = "gather_scale_quant_dense_tokens";
  c10::OptionalDeviceGuard guard(x.device());
  Tensor held;
  GatherParams p = gather_params(op, x, tok, exp, scores, valid, held);
  const auto ub = prepare_ub(scale_ub, x, op);
  Tensor out = at::empty({p.A, p.D}, x.options().dtype(at::kFloat8_e4m3fn));
  Tensor scale = at::empty({p.A}, x.options().dtype(at::kFloat));
  p.out = out.data_ptr();
  p.out_scale = scale.data_ptr<float>();
  p.scale_ub = ub ? ub->data_ptr<float>() : nullptr;
  if (p.A > 0) b.gather_quant(p);
  return {out, scale};
}

void scatter_add_dense_tokens(const MoeBackend& b, const Tensor& out, const Tensor& in, const Tensor& tok,
                              const OptTensor& valid) {
  constexpr const char* op = "scatter_add_dense_tokens";
  check_token_dtype(out, op, "out_tokens");
  check_dense(out, op, "out_tokens", 2);
  check_dense(in, op, "in_tokens", 2);
  check_same_device(in, out, op, "in_tokens", "out_tokens");
  check_same_dtype(in, out, op, "in_tokens", "out_tokens");
  TORCH_CHECK_VALUE(in.size(1) == out.size(1), op, ": 'in_tokens' [A, D] and 'out_tokens' [T, D] must have the same D, ",
                    "got shapes ", in.sizes(), " and ", out.sizes());
  check_index(tok, op, "token_indices", out, "out_tokens");
  TORCH_CHECK_VALUE(tok.numel() == in.size(0), op, ": 'token_indices' must have one entry per row of 'in_tokens' (",
                    in.size(0), "), got ", tok.numel());
  check_no_overlap(out, "out_tokens", in, "in_tokens", op);
  check_no_overlap(out, "out_tokens", tok, "token_indices", op);
  c10::OptionalDeviceGuard guard(out.device());
  if (is_integral_tokens(out)) {
    // Integer rows: ATen's index_add_. The valid count is read on the host (a sync on CUDA, on
    // this path only).
    int64_t n = in.size(0);
    if (valid) {
      count_of(valid, out, op, "valid_token_count", "out_tokens");
      n = std::clamp<int64_t>(valid->item<int64_t>(), 0, n);
    }
    const Tensor t = tok.slice(0, 0, n);
    check_ids_cpu(t, out.size(0), op, "token_indices", "out_tokens");
    Tensor o = out;
    o.index_add_(0, t.to(at::kLong), in.slice(0, 0, n));
    return;
  }
  ScatterAddParams p{};
  p.out = out.data_ptr();
  p.in = in.data_ptr();
  p.dtype = dtype_of(out);
  p.N = out.size(0);
  p.D = out.size(1);
  p.A = in.size(0);
  p.tok = tok.data_ptr();
  p.idx64 = tok.scalar_type() == at::kLong;
  p.valid = count_of(valid, out, op, "valid_token_count", "out_tokens");
  if (p.A == 0 || p.D == 0) return;
  Tensor ws;
  if (b.needs_workspace) {
    TORCH_CHECK_VALUE(p.A < (int64_t(1) << 31) && p.N < (int64_t(1) << 31) - 1, op,
                      ": in_tokens.size(0) and out_tokens.size(0) must fit in int32 on CUDA, got ", p.A, " and ", p.N);
    ws = at::empty({scatter_add_dense_workspace_ints(p.A, p.N)}, out.options().dtype(at::kInt));
    p.workspace = ws.data_ptr<int32_t>();
  }
  b.scatter_add(p);
}

void scatter_add_padded_tokens(const MoeBackend& b, const Tensor& in, const Tensor& counts, const Tensor& tok,
                               const Tensor& out) {
  constexpr const char* op = "scatter_add_padded_tokens";
  check_token_dtype(in, op, "in_tokens");
  check_dense(in, op, "in_tokens", 3);
  check_dense(out, op, "out_tokens", 2);
  check_same_device(out, in, op, "out_tokens", "in_tokens");
  check_same_dtype(out, in, op, "out_tokens", "in_tokens");
  const int64_t EP = in.size(0), T = in.size(1), D = in.size(2);
  TORCH_CHECK_VALUE(out.size(1) == D, op, ": 'out_tokens' must be [N, D] with D = in_tokens.size(2) = ", D,
                    ", got shape ", out.sizes());
  check_index(counts, op, "token_counts", in, "in_tokens");
  check_index(tok, op, "token_indices", in, "in_tokens");
  const int64_t E = counts.numel();
  TORCH_CHECK_VALUE(EP >= 1 && E % EP == 0, op, ": the number of experts (token_counts.numel() = ", E,
                    ") must be divisible by the number of ranks (in_tokens.size(0) = ", EP, ")");
  TORCH_CHECK_VALUE(tok.numel() == T, op, ": 'token_indices' must have in_tokens.size(1) = ", T,
                    " entries, got ", tok.numel());
  const int64_t N = out.size(0);  // the spec: T_K is a multiple of the token count
  TORCH_CHECK_VALUE(N > 0 ? T % N == 0 : T == 0, op, ": in_tokens.size(1) (T_K = ", T,
                    ") must be a multiple of the number of tokens (out_tokens.size(0) = ", N, ")");
  check_no_overlap(out, "out_tokens", in, "in_tokens", op);
  c10::OptionalDeviceGuard guard(in.device());
  if (is_integral_tokens(in)) {
    scatter_padded_aten(in, counts, tok, out, op);
    return;
  }
  ScatterPaddedParams p{};
  p.in = in.data_ptr();
  p.dtype = dtype_of(in);
  p.EP = EP;
  p.T = T;
  p.D = D;
  p.E = E;
  p.N = out.size(0);
  p.counts = counts.data_ptr();
  p.counts64 = counts.scalar_type() == at::kLong;
  p.tok = tok.data_ptr();
  p.idx64 = tok.scalar_type() == at::kLong;
  p.out = out.data_ptr();
  Tensor ws;
  if (b.needs_workspace) {
    ws = at::empty({E + 1}, in.options().dtype(at::kLong));
    p.workspace = ws.data_ptr<int64_t>();
  }
  if (T > 0 && D > 0 && E > 0) b.scatter_padded(p);
}

namespace {
struct ShuffleSetup {
  ShufflingParams p;
  Tensor ws, tokens, counts;  // the packed inputs p points at
};

// tokens and token_counts as the kernels read them: packed rows. The spec allows any row stride
// (last dim of stride 1); such inputs are copied here, so the kernels keep one layout.
ShuffleSetup shuffle_params(const MoeBackend& b, const char* op, const Tensor& tokens_in, const Tensor& counts_in,
                            OptInt start, OptInt end, bool padded, bool combine) {
  check_dim(tokens_in, op, "tokens", 2, 2);
  check_last_dim_contiguous(tokens_in, op, "tokens");
  check_dtype(counts_in, op, "token_counts", {at::kInt, at::kLong});
  check_dim(counts_in, op, "token_counts", 2, 2);
  const Tensor tokens = tokens_in.contiguous(), counts = counts_in.contiguous();
  check_same_device(counts, tokens, op, "token_counts", "tokens");
  const int64_t T = tokens.size(0), EP = counts.size(0), E = counts.size(1);
  const int64_t s = start.value_or(0), e = end.value_or(E);
  check_expert_range(s, e, E, op, "expert_start", "expert_end");
  if (padded)
    TORCH_CHECK_VALUE(EP >= 1 && T % EP == 0, op, ": is_padded=True needs tokens.size(0) (", T,
                      ") divisible by the number of ranks (token_counts.size(0) = ", EP, ")");
  if (b.needs_workspace)
    TORCH_CHECK_VALUE(EP * E <= kMaxShufflingCounts, op, ": token_counts [EP, E] may hold at most ",
                      kMaxShufflingCounts, " entries on CUDA, got shape ", counts.sizes());
  ShuffleSetup r{};
  r.tokens = tokens;
  r.counts = counts;
  ShufflingParams& p = r.p;
  p.in = tokens.data_ptr();
  p.T = T;
  p.row_bytes = tokens.size(1) * static_cast<int64_t>(tokens.element_size());
  p.counts = counts.data_ptr();
  p.counts64 = counts.scalar_type() == at::kLong;
  p.EP = EP;
  p.E = E;
  p.expert_start = s;
  p.EG = e - s;
  p.padded = padded;
  p.combine = combine;
  if (b.needs_workspace) {
    r.ws = at::empty({3 * std::max<int64_t>(EP * p.EG, 1)}, tokens.options().dtype(at::kLong));
    p.workspace = r.ws.data_ptr<int64_t>();
  }
  return r;
}
}  // namespace

std::tuple<Tensor, Tensor> combine_shuffling(const MoeBackend& b, const Tensor& tokens, const Tensor& counts,
                                             OptInt start, OptInt end, bool padded) {
  c10::OptionalDeviceGuard guard(tokens.device());
  ShuffleSetup r = shuffle_params(b, "combine_shuffling", tokens, counts, start, end, padded, true);
  Tensor out = b.needs_workspace ? at::empty_like(r.tokens) : at::zeros_like(r.tokens);
  Tensor out_counts = at::empty({r.p.EG + 1}, counts.options());
  r.p.out = out.data_ptr();
  r.p.out_counts = out_counts.data_ptr();
  b.shuffling(r.p);
  return {out, out_counts};
}

Tensor split_shuffling(const MoeBackend& b, const Tensor& tokens, const Tensor& counts, OptInt start, OptInt end,
                       bool padded, bool init_with_zeros) {
  c10::OptionalDeviceGuard guard(tokens.device());
  ShuffleSetup r = shuffle_params(b, "split_shuffling", tokens, counts, start, end, padded, false);
  // The CPU reference always zero-fills the rows it does not write (deterministic results).
  Tensor out = (init_with_zeros || !b.needs_workspace) ? at::zeros_like(r.tokens) : at::empty_like(r.tokens);
  r.p.out = out.data_ptr();
  b.shuffling(r.p);
  return out;
}

namespace {
SiluMulParams silu_params(const char* op, const Tensor& x0, const Tensor& x1, const OptTensor& valid) {
  check_float(x0, op, "x0");
  check_dim(x0, op, "x0", 2, 2);
  check_last_dim_contiguous(x0, op, "x0");
  check_last_dim_contiguous(x1, op, "x1");
  check_same_device(x1, x0, op, "x1", "x0");
  check_same_dtype(x1, x0, op, "x1", "x0");
  TORCH_CHECK_VALUE(x1.sizes() == x0.sizes(), op, ": 'x0' and 'x1' must have the same shape, got ", x0.sizes(),
                    " and ", x1.sizes());
  SiluMulParams p{};
  p.x0 = x0.data_ptr();
  p.x1 = x1.data_ptr();
  p.dtype = dtype_of(x0);
  p.T = x0.size(0);
  p.D = x0.size(1);
  p.stride0 = p.T <= 1 ? p.D : x0.stride(0);
  p.stride1 = p.T <= 1 ? p.D : x1.stride(0);
  p.valid = count_of(valid, x0, op, "valid_token_count", "x0");
  return p;
}
}  // namespace

Tensor silu_mul(const MoeBackend& b, const Tensor& x0, const Tensor& x1, const OptTensor& valid) {
  c10::OptionalDeviceGuard guard(x0.device());
  SiluMulParams p = silu_params("silu_mul", x0, x1, valid);
  Tensor out = at::empty({p.T, p.D}, x0.options());
  p.out = out.data_ptr();
  if (p.T > 0 && p.D > 0) b.silu_mul(p);
  return out;
}

std::tuple<Tensor, Tensor> silu_mul_quant(const MoeBackend& b, const Tensor& x0, const Tensor& x1,
                                          const OptTensor& scale_ub, const OptTensor& valid) {
  constexpr const char* op = "silu_mul_quant";
  c10::OptionalDeviceGuard guard(x0.device());
  SiluMulParams p = silu_params(op, x0, x1, valid);
  const auto ub = prepare_ub(scale_ub, x0, op);
  Tensor out = at::empty({p.T, p.D}, x0.options().dtype(at::kFloat8_e4m3fn));
  Tensor scale = at::empty({p.T}, x0.options().dtype(at::kFloat));
  p.out = out.data_ptr();
  p.out_scale = scale.data_ptr<float>();
  p.scale_ub = ub ? ub->data_ptr<float>() : nullptr;
  if (p.T > 0) b.silu_mul_quant(p);
  return {out, scale};
}

void scatter_add_along_first_dim(const MoeBackend& b, const Tensor& dst, const Tensor& src, const Tensor& index) {
  constexpr const char* op = "scatter_add_along_first_dim";
  check_dim(dst, op, "Dst", 2, 2);
  check_dim(src, op, "Src", 2, 2);
  check_same_device(src, dst, op, "Src", "Dst");
  check_same_device(index, dst, op, "Index", "Dst");
  check_dtype(index, op, "Index", {at::kInt, at::kLong});
  check_dim(index, op, "Index", 1, 1);
  check_same_dtype(src, dst, op, "Src", "Dst");
  TORCH_CHECK_VALUE(src.size(1) == dst.size(1), op, ": 'Src' [M, K] and 'Dst' [N, K] must have the same K, got shapes ",
                    src.sizes(), " and ", dst.sizes());
  TORCH_CHECK_VALUE(index.numel() == src.size(0), op, ": 'Index' must have one entry per row of 'Src' (", src.size(0),
                    "), got ", index.numel());
  check_ids_cpu(index, dst.size(0), op, "Index", "Dst");
  check_no_overlap(dst, "Dst", src, "Src", op);
  c10::OptionalDeviceGuard guard(dst.device());
  const bool fast = dst.is_contiguous() && src.is_contiguous() && index.is_contiguous() &&
                    (dst.scalar_type() == at::kBFloat16 || dst.scalar_type() == at::kHalf ||
                     dst.scalar_type() == at::kFloat);
  if (fast) {
    ScatterFirstDimParams p{};
    p.dst = dst.data_ptr();
    p.src = src.data_ptr();
    p.dtype = dtype_of(dst);
    p.N = dst.size(0);
    p.M = src.size(0);
    p.K = dst.size(1);
    p.index = index.data_ptr();
    p.idx64 = index.scalar_type() == at::kLong;
    if (p.M == 0 || p.K == 0) return;
    if (b.scatter_first_dim(p)) return;
  }
  // Any other layout or dtype: ATen's scatter_add_ (the definition of this op).
  Tensor d = dst;
  d.scatter_add_(0, index.to(at::kLong).unsqueeze(1).expand({-1, src.size(1)}), src);
}

}  // namespace mslk::moe
