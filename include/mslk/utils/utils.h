// Integer rounding helpers shared by host glue and kernels. Torch-free on purpose: kernel
// TUs include it.
#pragma once

#include <cstdint>
#include <limits>
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <stdexcept>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MSLK_UTILS_HD __host__ __device__
#else
#define MSLK_UTILS_HD
#endif

// Host: throw (a constexpr evaluation that reaches it fails to compile). Device: trap.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MSLK_UTILS_FAIL(kind, msg) __trap()
#else
#define MSLK_UTILS_FAIL(kind, msg) throw std::kind(msg)
#endif

namespace mslk {

// Largest power of two an int64_t holds.
inline constexpr int64_t kMaxPowerOf2 = int64_t{1} << 62;

// Smallest power of two >= num. num <= 1 gives 1. Unlike the reference (UB past 2^31),
// every int64 is defined: num > 2^62 has no representable answer, so it throws
// std::overflow_error on the host (a compile error in constant evaluation) and traps on
// the device, rather than returning a wrong or negative value.
MSLK_UTILS_HD constexpr int64_t nextPowerOf2(int64_t num) {
  if (num <= 1) {
    return 1;
  }
  if (num > kMaxPowerOf2) {
    MSLK_UTILS_FAIL(overflow_error, "mslk::nextPowerOf2: num > 2^62 has no int64 power of two");
  }
  uint64_t v = static_cast<uint64_t>(num) - 1;
  v |= v >> 1;
  v |= v >> 2;
  v |= v >> 4;
  v |= v >> 8;
  v |= v >> 16;
  v |= v >> 32;
  return static_cast<int64_t>(v + 1);
}

// Smallest multiple of `multiple` that is >= num (so negatives round toward zero:
// roundUp(-5, 4) == -4; the reference's (num+m-1)/m*m gives 0 there). multiple <= 0 throws
// std::invalid_argument; a result above INT64_MAX throws std::overflow_error (traps on
// the device).
MSLK_UTILS_HD constexpr int64_t roundUp(int64_t num, int64_t multiple) {
  if (multiple <= 0) {
    MSLK_UTILS_FAIL(invalid_argument, "mslk::roundUp: multiple must be > 0");
  }
  const int64_t rem = num % multiple;  // sign follows num
  if (rem == 0) {
    return num;
  }
  if (rem < 0) {
    return num - rem;
  }
  const int64_t add = multiple - rem;
  if (num > std::numeric_limits<int64_t>::max() - add) {
    MSLK_UTILS_FAIL(overflow_error, "mslk::roundUp: result exceeds INT64_MAX");
  }
  return num + add;
}

// Power-of-two buckets for small sizes (few distinct configs), fixed steps of roundUpTo
// from `threshold` on (powers of two grow too coarse there).
MSLK_UTILS_HD constexpr int64_t nextPowerOf2OrRoundUp(int64_t num, int64_t roundUpTo, int64_t threshold) {
  return num < threshold ? nextPowerOf2(num) : roundUp(num, roundUpTo);
}

}  // namespace mslk

#undef MSLK_UTILS_FAIL
