// Every variant of the Hopper attention backward (kVar* bits of fmha_bwd_sm90_traits.cuh), bf16, for
// tools/attention/fmha_bwd_sm90_check's side-by-side timing; the library instantiates kLibraryVariant only.
#include "attention/kernels/fmha_bwd_dq_tiles.h"
#include "attention/kernels/fmha_bwd_sm90.h"
#include "attention/kernels/fmha_bwd_sm90_launch.cuh"

namespace mslk::attention {
namespace {
template <int V>
cudaError_t main_v(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  if (p.K == 256) return sm90_bwd::launch_d256<cutlass::bfloat16_t>(p, w, stream);  // one variant
  // (BM 128 variants at d128: the same variant with 64-row tiles)
  return p.K == 64 ? sm90_bwd::launch<cutlass::bfloat16_t, 64, V>(p, w, stream)
                   : sm90_bwd::launch<cutlass::bfloat16_t, 128, V & ~(sm90_bwd::kVarBM128 | sm90_bwd::kVarRowSplitDq)>(
                         p, w, stream);
}
}  // namespace

// The variants compared (measured and dropped: kVarBulkDq, kVarKeySplitDq); v = index here: d128 rows /
// tiles (the library's), d64 with key-split dQ on each route, d64 with row-split dQ (kVarRowSplitDq) on
// each route with and without the LSE prefetch (394 and 490: the library's), and the key-split tiles
// route with the warpgroups taking turns issuing their S / dP GEMMs (kVarPingPong).
// The workspace must have room for the tile-contiguous dQ sums (sized with sm90_dq_tiles = 1).
constexpr int kVariantBits[] = {10, 106, 138, 234, 394, 426, 458, 490, 250};
constexpr int kNumSm90BwdVariants = 9;
int fmha_bwd_sm90_variant_bits(int v) { return v >= 0 && v < kNumSm90BwdVariants ? kVariantBits[v] : -1; }
cudaError_t fmha_bwd_sm90_variant(const FmhaBwdParams& p, int v, cudaStream_t stream) {
  static constexpr FmhaBwdMainFn fns[kNumSm90BwdVariants] = {main_v<10>,  main_v<106>, main_v<138>, main_v<234>,
                                                             main_v<394>, main_v<426>, main_v<458>, main_v<490>, main_v<250>};
  if (v < 0 || v >= kNumSm90BwdVariants || !p.is_bf16) return cudaErrorInvalidValue;
  FmhaBwdParams pv = p;
  pv.sm90_dq_tiles = (kVariantBits[v] & sm90_bwd::kVarTileDq) != 0;
  // a tile variant where the tiles do not apply (short sequences, d256) runs the library's variant
  if (pv.sm90_dq_tiles && !dq_tiles_used(pv)) return fmha_bwd_sm90(p, stream);
  return fmha_bwd_with(pv, fns[v], pv.sm90_dq_tiles != 0, stream);
}
}  // namespace mslk::attention
