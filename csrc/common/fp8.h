// FP8 E4M3FN constants and the rounding rule every mslk quantizer follows, on host and device:
// round-to-nearest-even, saturate finite values (and ±inf) to ±448, keep NaN as NaN.
#pragma once

namespace mslk {

constexpr float kFp8E4M3Max = 448.0f;
// get_fp8_constants()'s eps: the floor of block/group/tensor amax (row uses eps_opt).
constexpr float kFp8Eps = 1e-12f;
constexpr float kFp8RowEpsDefault = 1.0f / 512.0f;

}  // namespace mslk
