// Head-dim dispatch of the split-K decode attention (fmha_decode.h); its split and tile
// heuristics live in fmha_decode_plan.cpp (host code, built without CUDA too).
#include "attention/kernels/fmha_decode.h"

#include <algorithm>

namespace mslk::attention {

cudaError_t fmha_decode_splits(const FmhaDecodeParams& p, cudaStream_t stream) {
  const int d = std::max(p.K, p.Kv);
  if (d <= 0 || d > 256 || p.K % 8 != 0 || p.Kv % 8 != 0) return cudaErrorInvalidValue;
  if (p.kv_quant != kKvPlain) {
    if (p.K != p.Kv) return cudaErrorInvalidValue;
    if (p.kv_fold) {
      const bool regs = p.kv_regs && p.kv_quant == kKvFp8 && p.K == p.Kv && (d == 64 || d == 128) && p.kv_vec16 &&
                        p.tile_cfg == 2;
      if (regs) return d == 64 ? fmha_decode_regs_d64(p, stream) : fmha_decode_regs_d128(p, stream);
      if (d <= 64) return fmha_decode_fold_d64(p, stream);
      if (d <= 128) return fmha_decode_fold_d128(p, stream);
      return fmha_decode_fold_d256(p, stream);
    }
    if (d <= 64) return fmha_decode_quant_d64(p, stream);
    if (d <= 128) return fmha_decode_quant_d128(p, stream);
    return fmha_decode_quant_d256(p, stream);
  }
  if (d <= 64) return fmha_decode_d64(p, stream);
  if (d <= 128) return fmha_decode_d128(p, stream);
  return fmha_decode_d256(p, stream);
}

}  // namespace mslk::attention
