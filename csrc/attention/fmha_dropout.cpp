// Dropout arguments of the fused attention ops and mslk::fmha_dropout_mask (fmha_dropout.h).
#include "attention/fmha_dropout.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include "attention/kernels/fmha_dropout_mask.h"
#include "common/checks.h"

namespace mslk::attention {

namespace {
void check_p(double dropout_p, const char* op) {
  TORCH_CHECK_VALUE(dropout_p >= 0.0 && dropout_p < 1.0, op, ": argument 'dropout_p' must be in [0, 1), got ",
                    dropout_p);
}

FmhaDropout from_rng_state(double dropout_p, const at::Tensor& r, const char* op) {
  TORCH_CHECK_VALUE(r.device().is_cpu(), op, ": argument 'rng_state' must be on the CPU (an int64 tensor [seed, "
                    "offset]), got ", r.device());
  check_dtype(r, op, "rng_state", {at::kLong});
  TORCH_CHECK_VALUE(r.dim() == 1 && r.numel() == 2, op, ": argument 'rng_state' must be [seed, offset] (1-D, 2 "
                    "elements), got shape ", r.sizes());
  auto c = r.contiguous();
  const int64_t* v = c.data_ptr<int64_t>();
  return fmha_dropout_make(float(dropout_p), uint64_t(v[0]), uint64_t(v[1]));
}
}  // namespace

FmhaDropout fmha_dropout_args(double dropout_p, const std::optional<at::Tensor>& rng_state, const char* op) {
  check_p(dropout_p, op);
  if (dropout_p == 0.0) return FmhaDropout{};
  TORCH_CHECK_VALUE(rng_state.has_value() && rng_state->defined(), op, ": dropout_p=", dropout_p,
                    " needs rng_state (an int64 CPU tensor [seed, offset])");
  return from_rng_state(dropout_p, *rng_state, op);
}

at::Tensor fmha_dropout_keep(const FmhaDropout& d, int64_t B, int64_t H, int64_t h0, int64_t nh, int64_t r0,
                             int64_t nr, int64_t Mkv, at::Device device) {
  if (!device.is_cpu()) {
#if defined(MSLK_WITH_CUDA)
    if (device.is_cuda()) return fmha_dropout_keep_cuda(d, B, H, h0, nh, r0, nr, Mkv, device);
#endif
    TORCH_CHECK(false, "mslk::fmha_dropout_mask: no dropout mask for device ", device, " in this build");
  }
  auto out = at::empty({B, nh, nr, Mkv}, at::TensorOptions().dtype(at::kBool));
  fmha_dropout_mask_host({d, out.data_ptr<bool>(), B, H, h0, nh, r0, nr, Mkv});
  return out;
}

namespace {
constexpr const char* kMaskOp = "mslk::fmha_dropout_mask";

// Registered for CPU and CUDA (rng_state decides the dispatch key; `device` where the mask goes).
at::Tensor fmha_dropout_mask_op(const at::Tensor& rng_state, int64_t B, int64_t H, int64_t Mq, int64_t Mkv,
                                double dropout_p, at::Device device) {
  TORCH_CHECK_VALUE(B >= 0 && H >= 0 && Mq >= 0 && Mkv >= 0, kMaskOp, ": B, H, Mq, Mkv must be >= 0; got ", B, ", ",
                    H, ", ", Mq, ", ", Mkv);
  check_p(dropout_p, kMaskOp);
  // Read also at dropout_p = 0 (everything kept), so a bad rng_state never passes silently.
  const FmhaDropout d = from_rng_state(dropout_p, rng_state, kMaskOp);
  return fmha_dropout_keep(d, B, H, 0, H, 0, Mq, Mkv, device);
}
}  // namespace

void register_fmha_dropout_mask(torch::Library& m) { m.impl("fmha_dropout_mask", &fmha_dropout_mask_op); }

}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::attention::register_fmha_dropout_mask(m); }
