// Argument checks, allocation and shard bookkeeping of the attention-merge ops; the math runs in
// the backend (merge_params.h). Shards may be any views with a unit last stride; shards whose
// strides differ from shard 0's are copied to its layout (a merge of one producer's shards never is).
#include "attention/merge_attentions.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>

#include "common/checks.h"

namespace mslk::attention {
namespace {

Dtype to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return Dtype::kFloat16;
    case at::kBFloat16: return Dtype::kBFloat16;
    default: return Dtype::kFloat32;
  }
}

MergeAttnLayout attn_layout(const Tensor& t) {  // [B, M, G, H, K]
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}
MergeLseLayout lse_layout(const Tensor& t) {  // [B, G, H, M]
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

void check_attn(const Tensor& t, const char* op, const char* arg, at::IntArrayRef shape) {
  check_dtype(t, op, arg, {at::kFloat, at::kHalf, at::kBFloat16});
  TORCH_CHECK_VALUE(t.sizes() == shape, op, ": argument '", arg, "' must have shape ", shape, " ([B, M, G, H, K]), got ",
                    t.sizes());
  check_last_dim_contiguous(t, op, arg);
}
void check_lse(const Tensor& t, const char* op, const char* arg, at::IntArrayRef shape) {
  check_dtype(t, op, arg, {at::kFloat});
  TORCH_CHECK_VALUE(t.sizes() == shape, op, ": argument '", arg, "' must have shape ", shape, " ([B, G, H, M]), got ",
                    t.sizes());
}

// Shards of a list in one common layout (their own when they share strides, else contiguous).
struct ShardList {
  std::vector<Tensor> attn, lse;
};
ShardList normalize(TensorList attn, TensorList lse, const char* op, at::IntArrayRef ashape,
                    at::IntArrayRef lshape) {
  TORCH_CHECK_VALUE(attn.size() == lse.size(), op, ": 'attn_split' and 'lse_split' must hold one tensor per shard, got ",
                    attn.size(), " and ", lse.size());
  TORCH_CHECK_VALUE(!attn.empty(), op, ": needs at least one shard");
  bool same = true;
  for (size_t s = 0; s < attn.size(); ++s) {
    check_attn(attn[s], op, "attn_split", ashape);
    check_lse(lse[s], op, "lse_split", lshape);
    check_same_device(attn[s], attn[0], op, "attn_split", "attn_split[0]");
    check_same_device(lse[s], attn[0], op, "lse_split", "attn_split[0]");
    TORCH_CHECK_TYPE(attn[s].scalar_type() == attn[0].scalar_type(), op,
                     ": every 'attn_split' shard must have one dtype, shard 0 has ", attn[0].scalar_type(),
                     ", shard ", s, " has ", attn[s].scalar_type());
    same = same && attn[s].strides() == attn[0].strides() && lse[s].strides() == lse[0].strides();
  }
  ShardList r;
  for (size_t s = 0; s < attn.size(); ++s) {
    r.attn.push_back(same ? attn[s] : attn[s].contiguous());
    r.lse.push_back(same ? lse[s] : lse[s].contiguous());
  }
  return r;
}

void set_list(MergeShards& sh, const std::vector<Tensor>& attn, const std::vector<Tensor>& lse, size_t first,
              size_t count) {
  sh.stacked = false;
  for (size_t i = 0; i < count; ++i) {
    sh.attn[i] = attn[first + i].const_data_ptr();
    sh.lse[i] = lse[first + i].const_data_ptr<float>();
  }
  sh.a = attn_layout(attn[first]);
  sh.l = lse_layout(lse[first]);
}

void set_stacked(MergeShards& sh, const Tensor& attn, const Tensor& lse) {  // [S, ...]
  sh.stacked = true;
  sh.attn[0] = attn.const_data_ptr();
  sh.lse[0] = lse.const_data_ptr<float>();
  sh.attn_split_stride = attn.stride(0);
  sh.lse_split_stride = lse.stride(0);
  sh.a = attn_layout(attn.select(0, 0));
  sh.l = lse_layout(lse.select(0, 0));
}

}  // namespace

std::vector<Tensor> merge_varargs(const MergeBackend& be, TensorList attn, TensorList lse, bool write_lse,
                                  std::optional<at::ScalarType> output_dtype, int64_t B, int64_t M, int64_t G,
                                  int64_t H, int64_t Kq) {
  constexpr const char* op = "fmha_merge_attentions_varargs";
  for (auto [v, n] : {std::pair{B, "B"}, {M, "M"}, {G, "G"}, {H, "H"}, {Kq, "Kq"}})
    TORCH_CHECK_VALUE(v >= 0, op, ": argument '", n, "' must be non-negative, got ", v);
  const std::vector<int64_t> ashape{B, M, G, H, Kq}, lshape{B, G, H, M};
  ShardList sl = normalize(attn, lse, op, ashape, lshape);
  const at::ScalarType out_t = output_dtype.value_or(attn[0].scalar_type());
  TORCH_CHECK_TYPE(out_t == at::kFloat || out_t == at::kHalf || out_t == at::kBFloat16, op,
                   ": argument 'output_dtype' must be float32, float16 or bfloat16, got ", out_t);
  c10::OptionalDeviceGuard guard(attn[0].device());
  Tensor out = at::empty(ashape, attn[0].options().dtype(out_t));
  Tensor lse_out = write_lse ? at::empty(lshape, attn[0].options().dtype(at::kFloat)) : Tensor();

  MergeFwdParams p;
  p.S = static_cast<int>(sl.attn.size());
  p.B = B, p.M = M, p.G = G, p.H = H, p.K = Kq;
  p.in_dtype = to_dtype(attn[0].scalar_type());
  p.out_dtype = to_dtype(out_t);
  Tensor stacked_a, stacked_l;  // keep alive through the launch
  if (sl.attn.size() <= static_cast<size_t>(kMergeMaxInline)) {
    set_list(p.in, sl.attn, sl.lse, 0, sl.attn.size());
  } else {
    stacked_a = at::stack(sl.attn), stacked_l = at::stack(sl.lse);
    set_stacked(p.in, stacked_a, stacked_l);
  }
  p.out = out.data_ptr(), p.o = attn_layout(out);
  p.lse_out = write_lse ? lse_out.data_ptr<float>() : nullptr;
  if (write_lse) p.lo = lse_layout(lse_out);
  if (out.numel() > 0 || (write_lse && lse_out.numel() > 0)) be.fwd(p);
  std::vector<Tensor> r{out};
  if (write_lse) r.push_back(lse_out);
  return r;
}

std::tuple<std::vector<Tensor>, std::vector<Tensor>> merge_varargs_backward(
    const MergeBackend& be, TensorList attn, TensorList lse, const Tensor& attn_out, const Tensor& lse_out,
    const Tensor& grad_attn, const std::optional<Tensor>& grad_lse) {
  constexpr const char* op = "merge_attentions_varargs_backward";
  TORCH_CHECK_VALUE(!attn.empty(), op, ": needs at least one shard");
  check_dim(attn[0], op, "attn_split", 5, 5);
  const auto ashape = attn[0].sizes().vec();
  const int64_t B = ashape[0], M = ashape[1], G = ashape[2], H = ashape[3], K = ashape[4];
  const std::vector<int64_t> lshape{B, G, H, M};
  ShardList sl = normalize(attn, lse, op, ashape, lshape);
  check_attn(attn_out, op, "attn_out", ashape);
  check_attn(grad_attn, op, "grad_attn", ashape);
  check_lse(lse_out, op, "lse_out", lshape);
  const bool has_dl = grad_lse.has_value() && grad_lse->defined();
  if (has_dl) check_lse(*grad_lse, op, "grad_lse", lshape);
  TORCH_CHECK_TYPE(grad_attn.scalar_type() == attn_out.scalar_type(), op, ": 'grad_attn' must have the dtype of 'attn_out' (",
                   attn_out.scalar_type(), "), got ", grad_attn.scalar_type());
  check_same_device(attn_out, attn[0], op, "attn_out", "attn_split[0]");
  check_same_device(grad_attn, attn[0], op, "grad_attn", "attn_split[0]");
  check_same_device(lse_out, attn[0], op, "lse_out", "attn_split[0]");
  if (has_dl) check_same_device(*grad_lse, attn[0], op, "grad_lse", "attn_split[0]");
  c10::OptionalDeviceGuard guard(attn[0].device());

  std::vector<Tensor> d_attn, d_lse;
  for (size_t s = 0; s < sl.attn.size(); ++s) {
    d_attn.push_back(at::empty(ashape, attn[0].options()));
    d_lse.push_back(at::empty(lshape, attn[0].options().dtype(at::kFloat)));
  }
  if (attn_out.numel() == 0 && lse_out.numel() == 0) return {d_attn, d_lse};
  // Each shard's gradient needs only the merged outputs: independent chunks of kMergeMaxInline.
  for (size_t first = 0; first < sl.attn.size(); first += kMergeMaxInline) {
    const size_t n = std::min<size_t>(kMergeMaxInline, sl.attn.size() - first);
    MergeBwdParams p;
    p.S = static_cast<int>(n);
    p.B = B, p.M = M, p.G = G, p.H = H, p.K = K;
    p.in_dtype = to_dtype(attn[0].scalar_type());
    p.out_dtype = to_dtype(attn_out.scalar_type());
    set_list(p.in, sl.attn, sl.lse, first, n);
    p.out = attn_out.const_data_ptr(), p.o = attn_layout(attn_out);
    p.d_out = grad_attn.const_data_ptr(), p.d = attn_layout(grad_attn);
    p.lse_out = lse_out.const_data_ptr<float>(), p.lo = lse_layout(lse_out);
    if (has_dl) p.d_lse = grad_lse->const_data_ptr<float>(), p.dl = lse_layout(*grad_lse);
    for (size_t i = 0; i < n; ++i) {
      p.d_attn[i] = d_attn[first + i].data_ptr();
      p.d_lse_s[i] = d_lse[first + i].data_ptr<float>();
    }
    be.bwd(p);
  }
  return {d_attn, d_lse};
}

void merge_into(const MergeBackend& be, const Tensor& attn_out, const std::optional<Tensor>& lse_out,
                const Tensor& attn_split, const Tensor& lse_split) {
  constexpr const char* op = "merge_attentions";
  check_dim(attn_split, op, "attn_split", 6, 6);
  const int64_t S = attn_split.size(0), B = attn_split.size(1), M = attn_split.size(2), G = attn_split.size(3),
                H = attn_split.size(4), K = attn_split.size(5);
  const std::vector<int64_t> ashape{B, M, G, H, K}, lshape{B, G, H, M};
  check_dtype(attn_split, op, "attn_split", {at::kFloat, at::kHalf, at::kBFloat16});
  check_last_dim_contiguous(attn_split, op, "attn_split");
  check_lse(lse_split, op, "lse_split", {S, B, G, H, M});
  TORCH_CHECK_VALUE(S >= 1, op, ": needs at least one shard (attn_split.shape[0] >= 1), got 0");
  check_attn(attn_out, op, "attn_out", ashape);
  const bool has_lse = lse_out.has_value() && lse_out->defined();
  if (has_lse) check_lse(*lse_out, op, "lse_out", lshape);
  check_same_device(lse_split, attn_split, op, "lse_split", "attn_split");
  check_same_device(attn_out, attn_split, op, "attn_out", "attn_split");
  if (has_lse) check_same_device(*lse_out, attn_split, op, "lse_out", "attn_split");
  TORCH_CHECK_VALUE(S <= (int64_t(1) << 30), op, ": too many shards: ", S);
  c10::OptionalDeviceGuard guard(attn_split.device());
  MergeFwdParams p;
  p.S = static_cast<int>(S);
  p.B = B, p.M = M, p.G = G, p.H = H, p.K = K;
  p.in_dtype = to_dtype(attn_split.scalar_type());
  p.out_dtype = to_dtype(attn_out.scalar_type());
  set_stacked(p.in, attn_split, lse_split);
  p.out = attn_out.data_ptr(), p.o = attn_layout(attn_out);
  if (has_lse) p.lse_out = lse_out->data_ptr<float>(), p.lo = lse_layout(*lse_out);
  if (attn_out.numel() > 0 || (has_lse && lse_out->numel() > 0)) be.fwd(p);
}

}  // namespace mslk::attention
