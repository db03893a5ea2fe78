// CPU side of the FP8 rounding rule (see fp8.h); matches the CUDA satfinite conversion bit for bit.
#pragma once
#include <c10/util/Float8_e4m3fn.h>

#include <cmath>

#include "common/fp8.h"

namespace mslk {

inline c10::Float8_e4m3fn to_fp8_e4m3_sat(float v) {
  if (std::isnan(v)) return c10::Float8_e4m3fn(v);
  v = std::fmin(std::fmax(v, -kFp8E4M3Max), kFp8E4M3Max);
  return c10::Float8_e4m3fn(v);  // c10 rounds to nearest even
}

// amax clamp shared by every quantizer: clamp(amax, eps, ub) with ub optional (ub <= 0: none).
inline float clamp_amax(float amax, float eps, const float* ub) {
  float c = std::fmax(amax, eps);
  if (ub) c = std::fmin(c, *ub);
  return c;
}

}  // namespace mslk
