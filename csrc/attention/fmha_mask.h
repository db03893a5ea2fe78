// Dense masks of the fused attention descriptor (mask kind, windows, varlen blocks, seqlen_k) for
// the reference paths of mslk::fmha_fused_fwd / fmha_fused_bwd, built with ATen ops on any device
// and a row range at a time, so a large problem is masked in chunks.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <vector>

namespace mslk::attention {

// The descriptor with its sequence tensors read to the host (one sync) and validated.
struct FmhaMask {
  int64_t B = 0, Mq = 0, Mkv = 0;
  int64_t kind = 0, window_left = -1, window_right = -1;
  bool varlen = false;
  // Per block s: query rows [q0, q0 + lq) (varlen; else batch s, rows [0, Mq)), keys [k0, k0 + lk).
  std::vector<int64_t> q0, lq, k0, lk;
};

// Reads seqstart_q / seqstart_k / seqlen_k (already shape-checked by fmha_fwd_check); a block
// outside [0, Mq) x [0, Mkv) is a ValueError naming op.
FmhaMask fmha_mask_make(int64_t B, int64_t Mq, int64_t Mkv, const std::optional<at::Tensor>& seqstart_q,
                        const std::optional<at::Tensor>& seqstart_k, const std::optional<at::Tensor>& seqlen_k,
                        int64_t kind, int64_t window_left, int64_t window_right, const char* op);

// True when every key is allowed for every query (no mask needed).
bool fmha_mask_trivial(const FmhaMask& m);

// Additive mask (0 allowed, -inf masked) of query rows [r0, r0 + nr): [Bm, 1, nr, Mkv] with
// Bm = 1 for varlen, else B; dtype and device as given.
at::Tensor fmha_mask_additive(const FmhaMask& m, int64_t r0, int64_t nr, at::ScalarType dtype, at::Device device);

}  // namespace mslk::attention
