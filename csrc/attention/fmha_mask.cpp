// Dense masks of the fused attention descriptor (fmha_mask.h).
#include "attention/fmha_mask.h"
#include "common/checks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

namespace mslk::attention {
namespace {

std::vector<int64_t> host_values(const at::Tensor& t) {
  auto h = t.to(at::kCPU).to(at::kLong).contiguous();
  const int64_t* p = h.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + h.numel());
}

// [nq, lk] boolean on `device`: key j allowed for the block's query i0 + i (block of lq queries).
at::Tensor block_allowed(int64_t i0, int64_t nq, int64_t lq, int64_t lk, const FmhaMask& m, at::Device device) {
  auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  auto i = at::arange(i0, i0 + nq, opts).unsqueeze(1);
  auto j = at::arange(lk, opts).unsqueeze(0);
  const int64_t shift = (m.kind == 2 || m.kind == 3) ? lk - lq : 0;
  auto d = j - i - shift;
  auto allowed = at::ones({nq, lk}, opts.dtype(at::kBool));
  if (m.kind == 1 || m.kind == 2) allowed = allowed & (d <= 0);
  if (m.window_left >= 0) allowed = allowed & (d >= -m.window_left);
  if (m.window_right >= 0) allowed = allowed & (d <= m.window_right);
  return allowed;
}
}  // namespace

FmhaMask fmha_mask_make(int64_t B, int64_t Mq, int64_t Mkv, const std::optional<at::Tensor>& seqstart_q,
                        const std::optional<at::Tensor>& seqstart_k, const std::optional<at::Tensor>& seqlen_k,
                        int64_t kind, int64_t window_left, int64_t window_right, const char* op) {
  FmhaMask m;
  m.B = B, m.Mq = Mq, m.Mkv = Mkv, m.kind = kind, m.window_left = window_left, m.window_right = window_right;
  m.varlen = given(seqstart_q);
  const std::vector<int64_t> lens = given(seqlen_k) ? host_values(*seqlen_k) : std::vector<int64_t>{};
  if (m.varlen) {
    const auto sq = host_values(*seqstart_q), sk = host_values(*seqstart_k);
    const int64_t n = int64_t(sq.size()) - 1;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t q0 = sq[s], lq = sq[s + 1] - q0, k0 = sk[s];
      const int64_t lk = lens.empty() ? sk[s + 1] - k0 : lens[s];
      TORCH_CHECK_VALUE(q0 >= 0 && lq >= 0 && q0 + lq <= Mq, op, ": query block ", s, " [", q0, ", ", q0 + lq,
                        ") is outside [0, Mq=", Mq, ")");
      TORCH_CHECK_VALUE(k0 >= 0 && lk >= 0 && k0 + lk <= Mkv, op, ": key lane ", s, " [", k0, ", ", k0 + lk,
                        ") is outside [0, Mkv=", Mkv, ")");
      m.q0.push_back(q0), m.lq.push_back(lq), m.k0.push_back(k0), m.lk.push_back(lk);
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lk = lens.empty() ? Mkv : lens[b];
      TORCH_CHECK_VALUE(lk >= 0 && lk <= Mkv, op, ": seqlen_k[", b, "]=", lk, " is outside [0, Mkv=", Mkv, "]");
      m.q0.push_back(0), m.lq.push_back(Mq), m.k0.push_back(0), m.lk.push_back(lk);
    }
  }
  return m;
}

bool fmha_mask_trivial(const FmhaMask& m) {
  if (m.varlen || m.kind != 0 || m.window_left >= 0 || m.window_right >= 0) return false;
  return std::all_of(m.lk.begin(), m.lk.end(), [&](int64_t lk) { return lk == m.Mkv; });
}

at::Tensor fmha_mask_additive(const FmhaMask& m, int64_t r0, int64_t nr, at::ScalarType dtype, at::Device device) {
  const int64_t Bm = m.varlen ? 1 : m.B;
  auto allowed = at::zeros({Bm, 1, nr, m.Mkv}, at::TensorOptions().dtype(at::kBool).device(device));
  for (size_t s = 0; s < m.lq.size(); ++s) {
    // Rows of block s inside [r0, r0 + nr).
    const int64_t lo = std::max(m.q0[s], r0), hi = std::min(m.q0[s] + m.lq[s], r0 + nr);
    if (hi <= lo || m.lk[s] == 0) continue;
    auto dst = allowed[m.varlen ? 0 : int64_t(s)][0].narrow(0, lo - r0, hi - lo).narrow(1, m.k0[s], m.lk[s]);
    dst.copy_(block_allowed(lo - m.q0[s], hi - lo, m.lq[s], m.lk[s], m, device));
  }
  return at::zeros(allowed.sizes(), allowed.options().dtype(dtype))
      .masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity());
}

}  // namespace mslk::attention
