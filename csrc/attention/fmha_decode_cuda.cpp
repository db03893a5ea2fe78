// CUDA backend of mslk::fmha_decode_splitk: the split kernel of kernels/fmha_decode_kernel.cuh
// writes each split's float32 O and LSE into a workspace; the last CTA of each (sequence, K/V head)
// merges them into the output (kernels/fmha_decode_merge.cuh; past kMaxMergedSplits splits the
// attention-merge kernel, kernels/merge_attentions.cu, does). No host sync and no allocation but the
// workspace, the merge's counter words and the outputs, so a call can be captured in a CUDA graph.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "attention/fmha_decode.h"
#include "attention/fmha_decode_plan.h"
#include "attention/fmha_decode_quant.h"
#include "attention/fmha_operands.h"
#include "attention/kernels/fmha_decode.h"
#include "attention/kernels/merge_attentions.h"
#include "common/checks.h"
#include "common/device_attrs.h"
#include "mslk/utils/env.h"

namespace mslk::attention {
namespace {

// fmha_prepare_operand for q [B, Mq, Hkv, R, K]: last dim padded to a multiple of 8, 16-byte loadable.
at::Tensor prepare_q(const at::Tensor& x) {
  at::Tensor y = x;
  const int64_t d = x.size(4);
  if (d % 8 != 0) y = at::constant_pad_nd(y, {0, 8 - d % 8}, 0);
  bool ok = reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0 && y.stride(4) == 1;
  for (int i = 0; i < 4; ++i) ok = ok && (y.size(i) == 1 || y.stride(i) % 8 == 0);
  return ok ? y : y.contiguous();
}

// The quantized-cache fields of p (k, v int32 caches; strides in words). kss / vss keep the
// scale/shift views alive until the launch is queued.
void set_quant(FmhaDecodeParams& p, const at::Tensor& k, const at::Tensor& v,
               const std::optional<at::Tensor>& k_scale_shift, const std::optional<at::Tensor>& v_scale_shift,
               const DecodeKvQuant& f, at::Tensor& kss, at::Tensor& vss) {
  p.kv_quant = f.fp8 ? kKvFp8 : kKvInt4;
  p.kv_groups = f.groups;
  p.kv_row_words = int(k.size(3));
  bool vec16 = p.kv_row_words % 4 == 0;
  for (const at::Tensor* t : {&k, &v}) {
    vec16 = vec16 && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0;
    for (int i = 0; i < 3; ++i) vec16 = vec16 && (t->size(i) == 1 || t->stride(i) % 4 == 0);
  }
  p.kv_vec16 = vec16;
  if (f.fp8) {
    kss = k_scale_shift->dim() == 4 ? k_scale_shift->select(3, 0) : *k_scale_shift;
    vss = v_scale_shift->dim() == 4 ? v_scale_shift->select(3, 0) : *v_scale_shift;
    p.k_ss = kss.data_ptr(), p.v_ss = vss.data_ptr();
    p.ks_sb = kss.stride(0), p.ks_sm = kss.stride(1), p.ks_sg = kss.stride(2);
    p.vs_sb = vss.stride(0), p.vs_sm = vss.stride(1), p.vs_sg = vss.stride(2);
    p.ss_fp32 = f.fp32_scales;
  }
}

// The folded quantized-cache kernel's tile row up to d128 (DecodeCfg row 3: three CTAs an SM).
constexpr int kFoldRow = 3;

Dtype merge_dtype(at::ScalarType t) {
  return t == at::kHalf ? Dtype::kFloat16 : t == at::kBFloat16 ? Dtype::kBFloat16 : Dtype::kFloat32;
}

std::tuple<at::Tensor, at::Tensor> fmha_decode_cuda(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t mask_kind, int64_t window_left,
    int64_t window_right, double scale, const std::optional<at::Tensor>& block_tables, int64_t page_size,
    int64_t num_splits, std::optional<at::ScalarType> output_dtype, const std::optional<at::Tensor>& k_scale_shift,
    const std::optional<at::Tensor>& v_scale_shift) {
  const char* op = kDecodeOp;
  const bool quant = decode_kv_quantized(k_in, v_in, k_scale_shift, v_scale_shift);
  DecodeKvQuant qf{};
  bool fold = false, regs = false;
  if (quant) {
    qf = decode_kv_quant_check(q_in, k_in, v_in, k_scale_shift, v_scale_shift, op);
    // auto: folded for FP8 and one-group INT4, fused for other INT4 where the head dim allows, else
    // separate (bench/attention/results_decode_quantized.md). folded falls back to fused for INT4
    // with several groups (their scales differ along the head dim).
    const int route = int(
        read_env([] {
          return env::choice(env::Var::kDecodeKvDequant, {"auto", "separate", "fused", "folded", "registers"}, 0);
        }));
    // One tile row per head dim (the table's), so that fused and separate give the same bits; the
    // folded kernel runs row 3 up to d128 (three CTAs an SM: 0.75-0.86x row 2's time on the H100,
    // bench/attention/results_decode_quantized.md) and also takes row 2 there.
    const int forced = int(read_env([] { return env::integer(env::Var::kDecodeTileCfg, -1, 0, 3); }));
    const int row = fmha_decode_tile_cfg(int(std::max<int64_t>(qf.head_dim, 1)));
    const bool foldable = qf.fp8 || qf.groups == 1;
    const bool row_ok = forced < 0 || forced == row || (foldable && route != 2 && forced == kFoldRow && qf.head_dim <= 128);
    // The kernel dequantizes eight elements at a time, each eight within one INT4 group.
    const bool shape_ok = qf.head_dim % 8 == 0 && qf.head_dim <= 256 && (qf.fp8 || (qf.head_dim / qf.groups) % 8 == 0);
    const bool fused = route >= 2 || (route == 0 && shape_ok && row_ok);
    fold = fused && route != 2 && foldable;
    // registers: folded FP8 read into mma fragments without a ring (fmha_decode_kernel.cuh, kRegs),
    // at head dims 64 and 128 with 16-byte rows on tile row 2; elsewhere the folded kernel.
    regs = fold && route == 4 && qf.fp8 && (qf.head_dim == 64 || qf.head_dim == 128) && (forced < 0 || forced == 2);
    if (!fused) {  // dequantize into q-dtype temporaries, then the unquantized kernel
      auto [kd, vd] = decode_kv_dequantize(q_in, k_in, v_in, k_scale_shift, v_scale_shift, qf);
      return fmha_decode_cuda(q_in, kd, vd, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, mask_kind, window_left,
                              window_right, scale, block_tables, page_size, num_splits, output_dtype, std::nullopt,
                              std::nullopt);
    }
    TORCH_CHECK_VALUE(row_ok, op, ": MSLK_DECODE_KV_DEQUANT=fused / folded run tile row ", row,
                      " for head dim ", qf.head_dim, "; MSLK_DECODE_TILE_CFG=", forced, " cannot be honoured");
    TORCH_CHECK_VALUE(shape_ok, op, ": MSLK_DECODE_KV_DEQUANT=fused / folded need a head dim that is a multiple of 8 and at "
                      "most 256 (INT4: groups of a multiple of 8 elements), got head dim ", qf.head_dim, " with ",
                      qf.groups, " INT4 groups a row");
  }
  // Quantized caches are checked as their dequantized [B, Mkv, Hkv, D] stand-ins.
  const at::Tensor k_chk = quant ? decode_kv_logical(q_in, k_in, qf.head_dim) : k_in;
  const at::Tensor v_chk = quant ? decode_kv_logical(q_in, v_in, qf.head_dim) : v_in;
  const at::ScalarType out_dtype = fmha_decode_check({q_in, k_chk, v_chk, seqstart_q, seqstart_k, seqlen_k,
                                                      max_seqlen_q, mask_kind, window_left, window_right, scale,
                                                      block_tables, page_size, num_splits, output_dtype});
  check_dtype(q_in, op, "q", {at::kHalf, at::kBFloat16});
  TORCH_CHECK_TYPE(out_dtype != at::kDouble, op, ": the CUDA kernel writes float16, bfloat16 or float32 "
                   "(output_dtype), got float64");
  const int64_t B = q_in.size(0), Mq = q_in.size(1), Hkv = q_in.size(2), R = q_in.size(3);
  const int64_t K = q_in.size(4), Kv = v_chk.size(3), Mkv = k_in.size(1);
  if (!quant && (K > 256 || Kv > 256)) {
    // Head dims the kernel does not take (the spec's 512 among them): the exact path on the GPU,
    // a few K/V heads and query rows at a time (float32 K/V and scores near 256 MB a call), the CPU
    // backend's math.
    const int forced = int(read_env([] { return env::integer(env::Var::kDecodeTileCfg, -1, 0, 3); }));
    TORCH_CHECK_VALUE(forced < 0, op, ": MSLK_DECODE_TILE_CFG=", forced, " forces a kernel tile row, and the kernel "
                      "takes head dims up to 256; got K=", K, ", Kv=", Kv, "; unset MSLK_DECODE_TILE_CFG");
    const c10::cuda::CUDAGuard guard(q_in.device());
    return fmha_decode_exact({q_in, k_in, v_in, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, mask_kind, window_left,
                              window_right, scale, block_tables, page_size, num_splits, output_dtype},
                             out_dtype, int64_t(256) << 20);
  }
  TORCH_CHECK_VALUE(K >= 1 && K <= 256 && Kv >= 1 && Kv <= 256, op,
                    ": the CUDA kernel supports head dims 1..256; got K=", K, ", Kv=", Kv);
  TORCH_CHECK_VALUE(Hkv <= 65535, op, ": at most 65535 K/V heads; got ", Hkv);
  TORCH_CHECK_VALUE(Mq < (int64_t(1) << 31) && Mkv < (int64_t(1) << 31), op, ": sequence lengths must be < 2^31");
  const c10::cuda::CUDAGuard guard(q_in.device());

  const bool varlen = given(seqstart_q);
  const int64_t num_seqs = varlen ? seqstart_q->numel() - 1 : B;
  const int64_t lq_max = !varlen || max_seqlen_q < 0 || max_seqlen_q > Mq ? Mq : max_seqlen_q;
  const int64_t chunks = (R * lq_max + 15) / 16;
  TORCH_CHECK_VALUE(num_seqs * chunks <= 65535, op, ": at most 65535 (sequence, 16-row chunk) pairs; got ",
                    num_seqs, " sequences of ", R * lq_max, " rows (query heads per K/V head x queries)");
  const at::Tensor q = prepare_q(q_in);
  const at::Tensor k = quant ? k_in : fmha_prepare_operand(k_in), v = quant ? v_in : fmha_prepare_operand(v_in);
  const int64_t Kvp = quant ? Kv : v.size(3);

  auto out = at::empty({B, Mq, Hkv, R, Kvp}, q.options().dtype(out_dtype));
  auto lse = at::empty({B, Hkv, R, Mq}, q.options().dtype(at::kFloat));
  if (out.numel() == 0 && lse.numel() == 0) return {Kvp == Kv ? out : out.narrow(4, 0, Kv), lse};

  const bool paged = given(block_tables);
  // Keys of one sequence's lane (varlen K/V packs every lane into Mkv).
  const int64_t lane_keys = paged    ? block_tables->size(1) * page_size
                            : varlen ? Mkv / std::max<int64_t>(num_seqs, 1)
                                     : Mkv;
  const int head_dim = int(std::max(q.size(4), Kvp));
  const int forced = int(read_env([] { return env::integer(env::Var::kDecodeTileCfg, -1, 0, 3); }));
  // The quantized-cache kernels have the table's tile row (the folded one also row 3 up to d128; others refused above).
  const int tile_cfg = forced >= 0 && (!quant || fold) ? forced
                       : regs                        ? 2
                       : fold && head_dim <= 128     ? kFoldRow
                                                     : fmha_decode_tile_cfg(head_dim);
  int S = int(num_splits);
  if (S == 0) {
    int dev = 0, sms = 0;
    C10_CUDA_CHECK(mslk::cuda::current_device_sms(&dev, &sms));
    S = fmha_decode_num_splits(num_seqs * Hkv * chunks, lane_keys, head_dim, sms, tile_cfg);
  }
  // Rows outside every query block (varlen) are never written by the split kernel: for the merge
  // pass their LSE starts at -inf, which makes it write O = 0 without reading their O.
  // One split without varlen: the kernel writes out and lse itself (their layouts are a split's
  // o_part / lse_part rows), so no workspace and no merge pass.
  const bool direct = S == 1 && !varlen;
  // Otherwise the split kernel's last CTA of each pair merges the splits (fmha_decode_merge.cuh), and
  // under varlen the kernel also writes the rows outside every query block: no merge pass runs.
  const bool merged = !direct && S <= kMaxMergedSplits && num_seqs > 0 && lq_max > 0;
  const auto f32 = q.options().dtype(at::kFloat);
  at::Tensor o_part, lse_part;
  if (!direct) {
    o_part = at::empty({S, B, Mq, Hkv, R, Kvp}, f32);
    lse_part = varlen && !merged ? at::full({S, B, Hkv, R, Mq}, -std::numeric_limits<float>::infinity(), f32)
                      : at::empty({S, B, Hkv, R, Mq}, f32);
  }

  FmhaDecodeParams p{};
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr();
  p.q_sb = fmha_stride(q, 0), p.q_sm = fmha_stride(q, 1), p.q_sg = fmha_stride(q, 2), p.q_sh = fmha_stride(q, 3);
  p.k_sb = fmha_stride(k, 0), p.k_sm = fmha_stride(k, 1), p.k_sg = fmha_stride(k, 2);
  p.v_sb = fmha_stride(v, 0), p.v_sm = fmha_stride(v, 1), p.v_sg = fmha_stride(v, 2);
  if (direct) {
    p.lse_part = lse.data_ptr<float>();
    p.o_kind = out.scalar_type() == at::kBFloat16 ? 2 : out.scalar_type() == at::kHalf ? 1 : 0;
    if (p.o_kind == 0)
      p.o_part = out.data_ptr<float>();
    else
      p.o_out = out.data_ptr();
  } else {
    p.o_part = o_part.data_ptr<float>(), p.lse_part = lse_part.data_ptr<float>();
  }
  at::Tensor merge_ctr;
  if (merged) {
    // One word a (sequence x row chunk, K/V head) pair. Not cleared: a word counts this launch's
    // splits only under its token, and the last CTA zeroes it.
    merge_ctr = at::empty({num_seqs * chunks * Hkv}, q.options().dtype(at::kLong));
    static std::atomic<uint32_t> launches{0};
    p.merge_ctr = reinterpret_cast<unsigned long long*>(merge_ctr.data_ptr<int64_t>());
    p.merge_token = (0x6d73ull << 32) | (launches.fetch_add(1) + 1u);
    p.merged_out = out.data_ptr();
    p.merged_lse = lse.data_ptr<float>();
    p.merged_kind = out.scalar_type() == at::kBFloat16 ? 2 : out.scalar_type() == at::kHalf ? 1 : 0;
  }
  p.B = int(B), p.Mq = int(Mq), p.Mkv = int(Mkv), p.Hkv = int(Hkv), p.R = int(R);
  p.K = int(q.size(4)), p.Kv = int(Kvp);
  at::Tensor sq, sk, lk, bt;  // keep the descriptor tensors alive until the launch is queued
  if (varlen) {
    sq = seqstart_q->contiguous(), sk = seqstart_k->contiguous();
    p.seqstart_q = sq.data_ptr<int>(), p.seqstart_k = sk.data_ptr<int>();
  }
  if (given(seqlen_k)) lk = seqlen_k->contiguous(), p.seqlen_k = lk.data_ptr<int>();
  p.num_seqs = int(num_seqs);
  if (paged) {  // page values are checked by the kernel (rows outside k/v read as zeros)
    bt = block_tables->contiguous();
    p.block_table = bt.data_ptr<int>();
    p.bt_stride = bt.size(1);
    p.bt_cols = int(bt.size(1));
    p.page_size = int(page_size);
    p.kv_rows = k.size(1);
  }
  p.max_seqlen_q = int(lq_max);
  p.mask_kind = int(mask_kind);
  p.window_left = window_left, p.window_right = window_right;
  p.scale = float(scale);
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  p.num_splits = S;
  p.tile_cfg = tile_cfg;
  at::Tensor kss, vss;
  if (quant) set_quant(p, k, v, k_scale_shift, v_scale_shift, qf, kss, vss);
  p.kv_fold = fold;
  p.kv_regs = regs;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  C10_CUDA_CHECK(fmha_decode_splits(p, stream));
  if (direct || merged) {
    if (Kvp != Kv) out = out.narrow(4, 0, Kv).contiguous();
    return {out, lse};
  }

  // The splits' merge, [S, B, Mq, G = Hkv, H = R, Kvp] -> out, lse (all contiguous).
  MergeFwdParams m;
  m.S = S;
  m.B = B, m.M = Mq, m.G = Hkv, m.H = R, m.K = Kvp;
  m.in_dtype = Dtype::kFloat32, m.out_dtype = merge_dtype(out_dtype);
  m.in.stacked = true;
  m.in.attn[0] = o_part.data_ptr(), m.in.lse[0] = lse_part.data_ptr<float>();
  m.in.attn_split_stride = o_part.stride(0), m.in.lse_split_stride = lse_part.stride(0);
  const MergeAttnLayout a{out.stride(0), out.stride(1), out.stride(2), out.stride(3)};
  const MergeLseLayout l{lse.stride(0), lse.stride(1), lse.stride(2), lse.stride(3)};
  m.in.a = a, m.in.l = l, m.o = a, m.lo = l;  // o_part / lse_part rows are laid out as out / lse
  m.out = out.data_ptr(), m.lse_out = lse.data_ptr<float>();
  C10_CUDA_CHECK(merge_attentions_fwd(m, stream));
  if (Kvp != Kv) out = out.narrow(4, 0, Kv).contiguous();
  return {out, lse};
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { m.impl("fmha_decode_splitk", &mslk::attention::fmha_decode_cuda); }
