// Pieces of the FP8 ring kernel (fp8_block_ring.cu; row and K-group versions were measured and
// dropped, docs/design/quantize.md): persistent CTAs of eight warps that stream their input through
// a ring of seven 32 KB shared-memory chunks filled by TMA boxes, each chunk on a "full" mbarrier
// (the TMA bytes) and an "empty" one (all eight warps have moved it into registers; thread 0 then
// refills it). The mbarrier and TMA helpers are common/sm90_ptx.cuh's.
#pragma once
#include "common/sm90_ptx.cuh"
#include "common/tensor_map.h"
#include "quantize/kernels/fp8_device.cuh"

#include <type_traits>

namespace mslk::quantize::ring {

using mslk::cuda::EncodeTiledFn;
using mslk::cuda::encode_tiled_fn;

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kNV = 8;                     // 16-byte vectors a consumer thread holds of a chunk
constexpr int kChunkBytes = kConsumers * kNV * 16;
constexpr int kMaxSlots = 7;               // 224 KB: one CTA an SM
constexpr int kRingBytes = kMaxSlots * kChunkBytes;

template <typename T>
CUtensorMapDataType tensor_map_dtype() {
  return sizeof(T) == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
         : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

}  // namespace mslk::quantize::ring
