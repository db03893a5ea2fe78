// Tile configurations of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh). Data, not code;
// the measurements behind each row and the rows dropped: docs/design/attention_sm90.md.
// BM = 64 * wgs query rows. smem = BM*D*2 + stages * 2 (K and V) * BN*D*2 bytes (+1 KiB alignment
// slack and the barriers) must stay <= 227 KiB (test/cpp/test_fmha_sm90_layouts.cu checks every row).
// BN must be a wgmma N that CuTe's op selector takes whole (64, 96, 128, 192, 256); other N split
// into N = 16 atoms, which acc_rowcol refuses.
// pingpong: the two consumer warpgroups take turns issuing their GEMMs (named barriers), so one's
// softmax runs under the other's GEMMs.
// persistent: 1 = one CTA per SM walking the work tiles (the next tile's Q and K/V load under this
// tile's last GEMM and epilogue), 0 = one CTA per work tile (same code, one trip).
// wgs: consumer warpgroups of 64 query rows each: 2 (registers 24 / 240), 3 (32 / 160, no
// ping-pong: three warpgroups interleave on the warp schedulers) or 4 (24 / 112: BN 64 only, S + P
// + O in 80 registers; the launch's pool is 96 a thread, a larger consumer share hangs setmaxnreg).
// bias: 1 = the row of a head dim for problems with a tensor bias (bias_cfg; the kernel adds it to S
// after the Q K^T GEMM), never picked for problems without one.
// The first row of a head dim is its default; its first non-persistent row serves causal masks and
// varlen problems (banded_cfg): their tiles' costs differ, which the hardware's block scheduler
// balances and a static persistent walk does not. MSLK_FMHA_SM90_CFG=<row> (FmhaFwdTuning::sm90_cfg)
// forces a row for problems of its head dim (the tuning script sweeps them).
#pragma once

namespace mslk::attention::sm90 {

struct TileCfg {
  int d, bn, stages, pingpong, persistent, wgs, bias = 0;
};

inline constexpr TileCfg kTileCfgs[] = {
    {64, 64, 8, 0, 1, 4},    // 0: d64 default: BM 256 makes fewer, fuller rounds than BM 192
    {128, 128, 2, 1, 1, 2},  // 1: d128 default (FA3's tile)
    {256, 64, 2, 1, 1, 2},   // 2: d256 default: BN 64 keeps O, S and P in registers without spills
    {128, 128, 2, 1, 0, 2},  // 3: d128 causal / varlen: one CTA per tile balances unequal tiles
    {64, 64, 8, 0, 0, 4},    // 4: d64 causal / varlen, as row 3
    {256, 64, 2, 1, 0, 2},   // 5: d256 causal / varlen, as row 3
    {64, 128, 4, 0, 1, 3},   // 6: d64 dense alternative (kDenseAlts): BM 192, FA3's d64 tile
    // tensor bias: one CTA per tile (biases come with every mask), two consumer warpgroups (240
    // registers: the bias values join S, P and O)
    {64, 128, 2, 1, 0, 2, 1},   // 7: d64 with a tensor bias
    {128, 128, 2, 1, 0, 2, 1},  // 8: d128 with a tensor bias
    {256, 64, 2, 1, 0, 2, 1},   // 9: d256 with a tensor bias
};
inline constexpr int kNumTileCfgs = sizeof(kTileCfgs) / sizeof(kTileCfgs[0]);

constexpr int default_cfg(int d) {
  for (int i = 0; i < kNumTileCfgs; ++i)
    if (kTileCfgs[i].d == d) return i;
  return -1;
}

// Rows that compete for dense problems (no mask, no varlen, no window) of a head dim: the one with
// the least modelled time wins (dense_cfg in fmha_fwd_sm90.cu): rounds of the persistent walk over
// the SMs x BM x cost, where cost is the measured relative time of a query row; a stream-K tail
// counts its fractional rounds plus kDenseSplitKeyTiles key tiles of a tile (a split's Q load,
// pipeline fill, partial write and merge), else the last round counts whole. The cost and the split
// charge order the measured d64 shapes (docs/design/attention_sm90.md).
struct DenseAlt {
  int d, cfg;
  double cost;
};
inline constexpr DenseAlt kDenseAlts[] = {{64, 0, 1.00}, {64, 6, 0.93}};
inline constexpr double kDenseSplitKeyTiles = 3.0;
inline constexpr int kNumDenseAlts = sizeof(kDenseAlts) / sizeof(kDenseAlts[0]);

// The row for causal masks: the head dim's first non-persistent row, else its default.
constexpr int banded_cfg(int d) {
  for (int i = 0; i < kNumTileCfgs; ++i)
    if (kTileCfgs[i].d == d && kTileCfgs[i].persistent == 0 && kTileCfgs[i].bias == 0) return i;
  return default_cfg(d);
}

// The row for problems with a tensor bias (-1: none for d).
constexpr int bias_cfg(int d) {
  for (int i = 0; i < kNumTileCfgs; ++i)
    if (kTileCfgs[i].d == d && kTileCfgs[i].bias != 0) return i;
  return -1;
}

}  // namespace mslk::attention::sm90
