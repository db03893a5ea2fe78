// Tile configurations of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh). Data, not code.
// BM is fixed (two consumer warpgroups x 64 query rows). smem = BM*D*2 + stages * 2 (K and V) *
// BN*D*2 bytes (+1 KiB alignment slack and the barriers) must stay <= 227 KiB
// (test/cpp/test_fmha_sm90_layouts.cu checks every row).
// overlap: 1 = intra-warpgroup overlap of the softmax with the GEMMs (S and P live together,
// more registers), 0 = one tile at a time (the simpler order).
// pingpong (needs overlap): the two consumer warpgroups take turns issuing their GEMMs (named
// barriers), so one's softmax runs under the other's GEMMs.
// persistent: 1 = one CTA per SM walking the work tiles (the next tile's Q and K/V load under
// this tile's last GEMM and epilogue), 0 = one CTA per work tile (same code, one trip).
// The first row of a head dim is its default; later rows are candidates that the benchmark times
// (MSLK_FMHA_SM90_CFG=<row> forces a row for problems of its head dim; other head dims keep their
// default). The defaults ran every CUDA test on the H200 (2026-11-30); the candidates compile and
// pass the layout test, and wait for a GPU run. BN must be a wgmma N that CuTe's op selector
// takes whole (64, 96, 128, 192, 256 here): FA3's 176 (d128) and 80 (d256) split into N=16 atoms,
// which acc_rowcol refuses.
#pragma once

namespace mslk::attention::sm90 {

struct TileCfg {
  int d, bn, stages, overlap, pingpong, persistent;
};

inline constexpr TileCfg kTileCfgs[] = {
    {64, 128, 4, 1, 1, 1},   // 0: d64 default
    {128, 128, 2, 1, 1, 1},  // 1: d128 default
    {256, 64, 2, 1, 1, 1},   // 2: d256 default
    {128, 192, 2, 1, 1, 1},  // 3: candidates
    {128, 128, 3, 1, 1, 1},  // 4
    {128, 128, 2, 1, 1, 0},  // 5
    {64, 192, 3, 1, 1, 1},   // 6
};
inline constexpr int kNumTileCfgs = sizeof(kTileCfgs) / sizeof(kTileCfgs[0]);

constexpr int default_cfg(int d) {
  for (int i = 0; i < kNumTileCfgs; ++i)
    if (kTileCfgs[i].d == d) return i;
  return -1;
}

}  // namespace mslk::attention::sm90
