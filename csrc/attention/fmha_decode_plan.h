// The split-K decode attention's launch plan: how many splits and which tile row of the kernel
// (DecodeCfg in kernels/fmha_decode_kernel.cuh). No torch or CUDA headers.
#pragma once
#include <cstdint>

namespace mslk::attention {

// Split count of the heuristic (kSplitTable in fmha_decode_plan.cpp): enough CTAs for `sms` SMs
// without splits shorter than a few key tiles. pairs = sequences x K/V heads x row chunks; tile_cfg
// the kernel's tile row (how many CTAs share an SM).
int fmha_decode_num_splits(int64_t pairs, int64_t keys, int head_dim, int sms, int tile_cfg);

// The kernel's tile row for a padded head dim (kTileTable in fmha_decode_plan.cpp).
int fmha_decode_tile_cfg(int head_dim);

}  // namespace mslk::attention
