// mslk::fmha_decode_splitk: argument checks shared by every backend, and the CPU implementation,
// which expands the K/V heads to the query heads and runs the exact fused-forward reference
// (fmha_decode_exact, in float32; quantized caches: dequantized to q's dtype first). The split count
// does not change the result, so the CPU ignores it.
#include "attention/fmha_decode.h"
#include "attention/fmha_decode_plan.h"
#include "attention/fmha_decode_quant.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "attention/fmha_fwd.h"
#include "common/checks.h"

namespace mslk::attention {

at::ScalarType fmha_decode_check(const FmhaDecodeArgs& a) {
  const char* op = kDecodeOp;
  check_dim(a.q, op, "q", 5, 5);
  check_dim(a.k, op, "k", 4, 4);
  check_dim(a.v, op, "v", 4, 4);
  TORCH_CHECK_VALUE(a.q.size(3) >= 1, op, ": q must hold at least one query head per K/V head (q.shape[3] >= 1), "
                    "got shape ", a.q.sizes());
  TORCH_CHECK_VALUE(a.num_splits >= 0 && a.num_splits <= kDecodeMaxSplits, op, ": num_splits must be in [0, ",
                    kDecodeMaxSplits, "] (0: heuristic), got ", a.num_splits);
  // Every check of the fused forward, on the group's first query head ([B, Mq, Hkv, K], a view).
  fmha_fwd_check({a.q.select(3, 0), a.k, a.v, std::nullopt, a.seqstart_q, a.seqstart_k, a.seqlen_k, a.max_seqlen_q,
                  a.mask_kind, a.window_left, a.window_right, a.scale, a.block_tables, a.page_size, 0.0, std::nullopt,
                  op});
  check_last_dim_contiguous(a.q, op, "q");
  const at::ScalarType out = a.output_dtype.value_or(a.q.scalar_type());
  TORCH_CHECK_TYPE(out == at::kHalf || out == at::kBFloat16 || out == at::kFloat || out == at::kDouble, op,
                   ": argument 'output_dtype' must be float16, bfloat16, float32 or float64, got ", out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> fmha_decode_exact(const FmhaDecodeArgs& a, at::ScalarType out_dtype,
                                                     int64_t max_copy_bytes) {
  const at::Tensor &q = a.q, &k = a.k, &v = a.v;
  const int64_t B = q.size(0), Mq = q.size(1), Hkv = q.size(2), R = q.size(3);
  const auto acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  // K/V heads a call: all of them, or as many as keep the expanded K/V copy near max_copy_bytes
  const int64_t per_head = (k.numel() + v.numel()) / std::max<int64_t>(Hkv, 1) * R * int64_t(at::elementSize(acc));
  const int64_t step = max_copy_bytes <= 0 ? std::max<int64_t>(Hkv, 1)
                                           : std::clamp<int64_t>(max_copy_bytes / std::max<int64_t>(per_head, 1), 1,
                                                                 std::max<int64_t>(Hkv, 1));
  std::vector<at::Tensor> outs, lses;
  for (int64_t h0 = 0;; h0 += step) {  // at least one call (no K/V heads: empty results)
    const int64_t n = std::min(step, Hkv - h0);
    auto heads = [&](const at::Tensor& x) {  // [B, M, n, D] -> [B, M, n * R, D], float
      return x.narrow(2, h0, n).to(acc).unsqueeze(3).expand({x.size(0), x.size(1), n, R, x.size(3)}).reshape(
          {x.size(0), x.size(1), n * R, x.size(3)});
    };
    const at::Tensor qh = q.narrow(2, h0, n).to(acc).reshape({B, Mq, n * R, q.size(4)}), kh = heads(k), vh = heads(v);
    const std::optional<at::Tensor> none;
    auto [out, lse] = fmha_fwd_exact({qh, kh, vh, none, a.seqstart_q, a.seqstart_k, a.seqlen_k, a.max_seqlen_q,
                                      a.mask_kind, a.window_left, a.window_right, a.scale, a.block_tables, a.page_size,
                                      0.0, none, kDecodeOp},
                                     FmhaDropout{}, max_copy_bytes > 0);
    outs.push_back(out.reshape({B, Mq, n, R, v.size(3)}));
    lses.push_back(lse.reshape({B, n, R, Mq}));
    if (h0 + n >= Hkv) break;
  }
  auto out = outs.size() == 1 ? outs[0] : at::cat(outs, 2);
  return {out.to(out_dtype), lses.size() == 1 ? lses[0] : at::cat(lses, 1)};
}

namespace {

std::tuple<at::Tensor, at::Tensor> fmha_decode_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& seqstart_q,
    const std::optional<at::Tensor>& seqstart_k, const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q,
    int64_t mask_kind, int64_t window_left, int64_t window_right, double scale,
    const std::optional<at::Tensor>& block_tables, int64_t page_size, int64_t num_splits,
    std::optional<at::ScalarType> output_dtype, const std::optional<at::Tensor>& k_scale_shift,
    const std::optional<at::Tensor>& v_scale_shift) {
  if (decode_kv_quantized(k, v, k_scale_shift, v_scale_shift)) {
    // Quantized caches: the exact reference of their dequantization, then the unquantized path.
    const DecodeKvQuant f = decode_kv_quant_check(q, k, v, k_scale_shift, v_scale_shift, kDecodeOp);
    auto [kd, vd] = decode_kv_dequantize(q, k, v, k_scale_shift, v_scale_shift, f);
    return fmha_decode_cpu(q, kd, vd, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, mask_kind, window_left,
                           window_right, scale, block_tables, page_size, num_splits, output_dtype, std::nullopt,
                           std::nullopt);
  }
  const FmhaDecodeArgs a{q,           k,     v,            seqstart_q, seqstart_k, seqlen_k,  max_seqlen_q, mask_kind,
                         window_left, window_right, scale, block_tables, page_size,  num_splits, output_dtype};
  return fmha_decode_exact(a, fmha_decode_check(a), 0);
}

int64_t num_splits_op(int64_t pairs, int64_t keys, int64_t head_dim, int64_t sms, int64_t tile_cfg) {
  TORCH_CHECK_VALUE(pairs >= 0 && keys >= 0 && head_dim > 0 && sms > 0 && tile_cfg >= -1 && tile_cfg <= 3,
                    "fmha_decode_num_splits: expected pairs >= 0, keys >= 0, head_dim > 0, sms > 0 and tile_cfg in "
                    "-1..3; got pairs=", pairs, ", keys=", keys, ", head_dim=", head_dim, ", sms=", sms,
                    ", tile_cfg=", tile_cfg);
  const int d = int(std::min<int64_t>(head_dim, 1 << 20));
  const int row = tile_cfg >= 0 ? int(tile_cfg) : fmha_decode_tile_cfg(d);
  return fmha_decode_num_splits(pairs, keys, d, int(std::min<int64_t>(sms, 1 << 20)), row);
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_decode_splitk", &mslk::attention::fmha_decode_cpu); }
TORCH_LIBRARY_IMPL(mslk, CompositeImplicitAutograd, m) {
  m.impl("fmha_decode_num_splits", &mslk::attention::num_splits_op);
}
