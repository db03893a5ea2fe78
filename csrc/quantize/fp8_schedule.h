// The FP8 quantizers' tuning switches as a plain struct: the torch glue (fp8_quantize_cuda.cpp)
// reads MSLK_FP8_SCHEDULE and MSLK_FP8_ROW_TEAM on every call and hands the values down; the
// kernel layer reads no environment. Plain C++ (no torch, no CUDA headers).
#pragma once

namespace mslk::quantize {

// In the order of MSLK_FP8_SCHEDULE's names (the glue maps a name's index onto this enum).
enum class Fp8Schedule {
  kAuto,              // unset, "" or "auto": the measured defaults
  kOneshot,           // one CTA a tile, the tile in registers (fp8_reg.cu)
  kStaged,            // persistent CTAs, next tile by cp.async into shared memory (fp8_reg.cu)
  kCluster,           // large blocks over a thread-block cluster (fp8_cluster.cu)
  kBulk,              // rows and K-groups on a bulk-copy ring (fp8_bulk.cu)
  kWarp,              // rows and K-groups of <= 16 KB, one warp a row (fp8_warp_rows.cu)
  kHybridPersistent,  // 256x256 blocks: the register + shared-memory kernel, persistent (fp8_reg.cu)
  kRing,              // 64 / 128 KB blocks: persistent CTAs on a TMA ring of 32 KB chunks (fp8_block_ring.cu)
};

struct Fp8Tuning {
  Fp8Schedule schedule = Fp8Schedule::kAuto;
  int row_team = 0;  // warps a row in fp8_warp_rows.cu: 1, 2 or 4, or 0 for the row-size rule
};

}  // namespace mslk::quantize
