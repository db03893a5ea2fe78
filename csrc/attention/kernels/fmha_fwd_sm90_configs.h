// Tile configurations of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh). Data, not code.
// BM = 64 * wgs query rows (below). smem = BM*D*2 + stages * 2 (K and V) *
// BN*D*2 bytes (+1 KiB alignment slack and the barriers) must stay <= 227 KiB
// (test/cpp/test_fmha_sm90_layouts.cu checks every row).
// overlap: 1 = intra-warpgroup overlap of the softmax with the GEMMs (S and P live together,
// more registers), 0 = one tile at a time (the simpler order).
// pingpong (needs overlap): the two consumer warpgroups take turns issuing their GEMMs (named
// barriers), so one's softmax runs under the other's GEMMs.
// persistent: 1 = one CTA per SM walking the work tiles (the next tile's Q and K/V load under
// this tile's last GEMM and epilogue), 0 = one CTA per work tile (same code, one trip).
// The first row of a head dim is its default; its first non-persistent row (if any) serves causal
// masks and varlen problems (banded_cfg): a causal work tile's cost grows with its query index (a
// varlen one's with its block's length), and the hardware's block scheduler balances that where a
// static persistent walk does not (H200, 2026-11-30, d128 causal: 450-479 vs 417-447 TFLOP/s;
// dense non-causal: equal). A dynamic scheduler (persistent CTAs taking tiles from a global
// counter, branch wip/dynamic-sched) measured no better (H200, 2026-12-01, two reps, TFLOP/s,
// dynamic vs these rows): d128 causal 518-577 vs 520-522, S8192 568-569 vs 577, varlen causal
// 422-454 vs 438, d64 causal 302-303 vs 320-321, d256 causal 533-536 vs 580-650; dense d128
// 574-577 vs 582-583 (static persistent). MSLK_FMHA_SM90_CFG=<row> forces a row for
// problems of its head dim (other head dims keep theirs). Measured and dropped (twice slower or
// equal, bench/attention/results_tune_fmha_sm90.md): BN 192 at d64 / d128 (-15-20%), 3 stages at
// d128 (-3%). BN must be a wgmma N that CuTe's op selector takes whole (64, 96, 128, 192, 256
// here); other N split into N=16 atoms, which acc_rowcol refuses. FA3's BN 176 (d128) and 80
// (d256), built from the named 64x176x16 / 64x80x16 atoms (mma_sm90_gmma_ext.hpp), were timed and
// dropped (H200, 2026-11-30, one run): 444 vs 500 TFLOP/s at B2 H32 S4096 d128, 523 vs 560 at
// d256, slower causal too; ptxas spilled 28 / 60 bytes in the consumers at 240 registers. BN 176
// again (named N = 176 atom, no spills; 2026-12-01, two runs): 529-536 vs 578-581 dense, 432-437 / 502-506
// (persistent / not) vs 515-530 causal: dropped. Smaller d128 tiles (2026-12-01, two reps):
// BN 96 with 2 / 3 stages 540-551 vs 580-584 dense (3 stages, one CTA a tile: 497-498 vs 522-583
// causal, 496-501 vs 506-514 varlen), BN 64 with 4 stages 500-503: dropped.
// wgs: consumer warpgroups of 64 query rows each (BM = 64 * wgs): 2 (registers 24 / 240, as FA3
// for d128 / d256), 3 (32 / 160, FA3's d64 tile; no ping-pong: three warpgroups interleave on
// the warp schedulers) or 4 (24 / 112: d64 with BN 64 only, S + P + O in 80 registers; the launch
// gives 640 threads 96 registers each, so a larger consumer share waits forever in setmaxnreg:
// at 24 / 120 it hung). d64 with four warpgroups (BM 256: B4 H16 S2048 makes 512 work tiles, 3.9
// rounds of 132 SMs where BM 192's 704 make 5.3) against three (H200, 2026-12-01, two runs):
// 414-427 vs 395-405 TFLOP/s dense, 316-318 vs 294-300 causal (the non-persistent rows).
// Measured and dropped: d64 with two ping-pong warpgroups (365-372 dense, 263-281 causal); d64 with
// three warpgroups and BN 64 (359-363, 272-276); d64 / d128 with two warpgroups and no ping-pong
// (H200, 2026-11-30: 354 vs 349 and 558 vs 562 TFLOP/s non-causal, within noise; causal slower).
// d128 with three consumer warpgroups and BN 64 (BM 192: 2/3 of the K/V bytes a flop, to test
// whether L2 bandwidth limits d128; H200, 2026-12-01, two reps): 555 / 555 vs 568 / 563 at B2 H32
// S4096 (192 does not divide 4096: 3% of rows idle), 563 / 552 vs 610 / 554 at B1 H48 S3072:
// no gain, dropped; L2 bandwidth is not what limits d128. cuDNN's kernels (ncu: 384 threads, 2
// consumer warpgroups of 64 rows, BN 128, no cluster, 232 KB of smem at d128, 134 KB at d64) taken
// as rows (H200, 2026-12-01, two runs of two reps): d128 with three K/V stages 577-584 vs 578-586;
// d64 with two ping-pong warpgroups, BN 128, four stages 363-371 vs 413-432 (row 6 in the same
// runs: 419-445): dropped. cuDNN's d256 kernel is 64x128x256 (BN 128); BN 128 at d256 holds O (128
// registers a thread), S (64) and P (32): with the overlap it spills 316 bytes, BN 96 overlapped 124
// bytes (ptxas, 2026-12-01); one tile at a time (overlap 0) with one K and one V stage (smem: Q 64 KB
// + 128 KB) has no spills but ran 587-613 vs 628-650 TFLOP/s (two runs, B2 H16 S4096): dropped.
// Under sustained load the H200 runs attention at its ~690 W cap (tools/attention/clocks.py): SM
// clocks 1530-1650 MHz at d128 / d256, where cuDNN's d256 kernel ran at 1635 MHz against our 1530
// (its BN 128 reads Q from shared memory half as often a key); at d128 both ran at 1635 MHz.
#pragma once

namespace mslk::attention::sm90 {

struct TileCfg {
  int d, bn, stages, overlap, pingpong, persistent, wgs;
};

inline constexpr TileCfg kTileCfgs[] = {
    {64, 64, 8, 1, 0, 1, 4},    // 0: d64 default: four consumer warpgroups (BM 256, BN 64, 112 registers)
    {128, 128, 2, 1, 1, 1, 2},  // 1: d128 default
    {256, 64, 2, 1, 1, 1, 2},   // 2: d256 default
    {128, 128, 2, 1, 1, 0, 2},  // 3: d128 causal
    {64, 64, 8, 1, 0, 0, 4},    // 4: d64 causal, four consumer warpgroups
    {256, 64, 2, 1, 1, 0, 2},   // 5: d256 causal
    {64, 128, 4, 1, 0, 1, 3},   // 6: d64 dense alternative (kDenseAlts): three consumer warpgroups (BM 192, FA3's d64 tile)
    {64, 128, 4, 1, 0, 0, 3},   // 7: candidate: the same, one CTA per work tile (causal before)
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
// pipeline fill, partial write and merge), else the last round counts whole. d64, BM 256 (row 0)
// vs BM 192 (row 6), H200, 2026-12-01, medians of 5 interleaved reps, TFLOP/s: B4 H16 S2048 413 vs
// 421 (4 rounds vs 5.33 split), B1 H16 S8192 451 vs 487, B2 H32 S4096 443 vs 458 (8 vs 11 whole
// rounds), B1 H4 S2048 101 vs 127 (one round each), B1 H40 S1024 270 vs 280 (1.21 split vs 2),
// B8 H16 S1024 363 vs 342 (4 vs 6 whole rounds: 8 key tiles, no split). Cost 0.93 and 3 key tiles
// order all six as measured.
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
    if (kTileCfgs[i].d == d && kTileCfgs[i].persistent == 0) return i;
  return default_cfg(d);
}

}  // namespace mslk::attention::sm90
