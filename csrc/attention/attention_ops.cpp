// Schemas of the attention domain.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // Reference (exact, unfused) attention forward: the CPU/general fallback behind
  // mslk.attention.fmha.reference.FwOp.
  //   q [B, Mq, H, K], k [B, Mkv, H, K], v [B, Mkv, H, Kv] (last dim stride 1, other strides
  //   arbitrary), bias: None or a float tensor broadcastable to [B, H, Mq, Mkv] (additive, -inf
  //   masks). Returns out [B, Mq, H, Kv] (dtype output_dtype, default q.dtype) and the natural-log
  //   LSE [B, H, Mq] (float32; float64 for float64 inputs). Rows with every key masked give
  //   out = 0 and lse = -inf.
  m.def(
      "fmha_reference_fwd(Tensor q, Tensor k, Tensor v, Tensor? bias=None, float scale=1.0, "
      "ScalarType? output_dtype=None) -> (Tensor, Tensor)");
}
