// The split-K decode attention's launch plan (fmha_decode_plan.h): the split count and the kernel's
// tile row, as data tables. Host code without CUDA, so the op that exposes the split heuristic
// (FwOp.get_split_k) exists in CPU builds too.
#include "attention/fmha_decode_plan.h"

#include <algorithm>
#include <iterator>

namespace mslk::attention {
namespace {

// The split heuristic's data: per padded head dim (first row whose head_dim holds it), the fewest
// keys a split should hold (shorter splits cost more in the merge and the per-CTA prologue than
// they gain) and, per tile row of the kernel (DecodeCfg), the CTAs one SM runs at once (the ring
// takes most of the shared memory: rows 2 and 3 take a half and a third of it).
struct SplitRule {
  int head_dim;
  int min_keys_per_split;
  int ctas_per_sm[4];
};
constexpr SplitRule kSplitTable[] = {
    {64, 512, {1, 1, 2, 3}},
    {128, 256, {1, 1, 2, 3}},
    {256, 128, {1, 1, 1, 1}},
};
constexpr int kMaxSplits = 128;

// The kernel's tile row per padded head dim (fmha_decode_kernel.cuh, DecodeCfg).
struct TileRule {
  int head_dim;
  int tile_cfg;
};
constexpr TileRule kTileTable[] = {{64, 2}, {128, 2}, {256, 0}};

const SplitRule& split_rule(int head_dim) {
  for (const SplitRule& r : kSplitTable)
    if (head_dim <= r.head_dim) return r;
  return kSplitTable[std::size(kSplitTable) - 1];
}

}  // namespace

int fmha_decode_num_splits(int64_t pairs, int64_t keys, int head_dim, int sms, int tile_cfg) {
  const SplitRule& rule = split_rule(head_dim);
  const int64_t target = int64_t(std::max(sms, 1)) * rule.ctas_per_sm[std::clamp(tile_cfg, 0, 3)];
  if (pairs <= 0 || pairs >= target) return 1;
  // One wave: the most splits that still fit beside the other pairs' CTAs.
  const int64_t by_sms = target / pairs;
  const int64_t by_keys = std::max<int64_t>(1, keys / rule.min_keys_per_split);
  return int(std::clamp<int64_t>(std::min(by_sms, by_keys), 1, kMaxSplits));
}

int fmha_decode_tile_cfg(int head_dim) {
  for (const TileRule& r : kTileTable)
    if (head_dim <= r.head_dim) return r.tile_cfg;
  return kTileTable[std::size(kTileTable) - 1].tile_cfg;
}

}  // namespace mslk::attention
