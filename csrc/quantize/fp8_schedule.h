// MSLK_FP8_SCHEDULE (read on every call; a tuning and testing switch): which kernel schedule the
// FP8 quantizers use. One parser for the kernels' dispatch and the glue, which rejects unknown names.
// Plain C++ (no torch, no CUDA headers).
#pragma once
#include <cstdlib>
#include <cstring>

namespace mslk::quantize {

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

inline constexpr const char* kFp8ScheduleNames = "auto, oneshot, staged, cluster, bulk, warp, hybrid-persistent or ring";

// false for an unknown name (*out untouched).
inline bool parse_fp8_schedule(const char* s, Fp8Schedule* out) {
  if (!s || !*s || !std::strcmp(s, "auto")) return *out = Fp8Schedule::kAuto, true;
  static constexpr struct {
    const char* name;
    Fp8Schedule value;
  } kNames[] = {{"oneshot", Fp8Schedule::kOneshot}, {"staged", Fp8Schedule::kStaged},
                {"cluster", Fp8Schedule::kCluster}, {"bulk", Fp8Schedule::kBulk},
                {"warp", Fp8Schedule::kWarp},       {"hybrid-persistent", Fp8Schedule::kHybridPersistent},
                {"ring", Fp8Schedule::kRing}};
  for (const auto& n : kNames)
    if (!std::strcmp(s, n.name)) return *out = n.value, true;
  return false;
}

// The schedule this call asks for (an unknown name, which the glue rejects first, reads as auto).
inline Fp8Schedule fp8_schedule() {
  Fp8Schedule s = Fp8Schedule::kAuto;
  parse_fp8_schedule(std::getenv("MSLK_FP8_SCHEDULE"), &s);
  return s;
}

// MSLK_FP8_ROW_TEAM (read on every call; a tuning and testing switch): warps a row in the row
// quantizer (fp8_warp_rows.cu). *out = 0 (unset or ""), 1, 2 or 4; false for any other value.
inline bool parse_fp8_row_team(const char* s, int* out) {
  if (!s || !*s) return *out = 0, true;
  for (int g : {1, 2, 4})
    if (s[0] == '0' + g && s[1] == '\0') return *out = g, true;
  return false;
}

// The forced team size, 0 for none (an unknown value, which the glue rejects first, reads as none).
inline int fp8_row_team() {
  int g = 0;
  parse_fp8_row_team(std::getenv("MSLK_FP8_ROW_TEAM"), &g);
  return g;
}

}  // namespace mslk::quantize
