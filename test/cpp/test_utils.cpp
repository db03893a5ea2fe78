// Pure C++: rounding helpers and SourceContext (no torch, no GPU).
#include <mslk/utils/source_context.h>
#include <mslk/utils/utils.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "check.h"

using namespace mslk;

// Constant evaluation works (and an overflowing call would fail to compile).
static_assert(nextPowerOf2(1000) == 1024);
static_assert(roundUp(130, 128) == 256);
static_assert(nextPowerOf2OrRoundUp(100, 256, 1024) == 128);

static void test_next_power_of_2() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CHECK_EQ(nextPowerOf2(std::numeric_limits<int64_t>::min()), 1);
  CHECK_EQ(nextPowerOf2(-7), 1);
  CHECK_EQ(nextPowerOf2(0), 1);
  CHECK_EQ(nextPowerOf2(1), 1);
  CHECK_EQ(nextPowerOf2(2), 2);
  CHECK_EQ(nextPowerOf2(3), 4);
  for (int s = 1; s <= 62; ++s) {
    const int64_t p = int64_t{1} << s;
    CHECK_EQ(nextPowerOf2(p), p);
    CHECK_EQ(nextPowerOf2(p - 1), s == 1 ? 1 : p);
    if (s < 62) {
      CHECK_EQ(nextPowerOf2(p + 1), p * 2);
    }
  }
  CHECK_EQ(nextPowerOf2((int64_t{1} << 32) + 1), int64_t{1} << 33);  // the reference's UB range
  CHECK_EQ(nextPowerOf2(kMaxPowerOf2), kMaxPowerOf2);
  CHECK_THROWS(nextPowerOf2(kMaxPowerOf2 + 1), "2^62");
  CHECK_THROWS(nextPowerOf2(kMax), "2^62");
}

static void test_round_up() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CHECK_EQ(roundUp(0, 8), 0);
  CHECK_EQ(roundUp(1, 8), 8);
  CHECK_EQ(roundUp(8, 8), 8);
  CHECK_EQ(roundUp(9, 8), 16);
  CHECK_EQ(roundUp(7, 1), 7);
  CHECK_EQ(roundUp(-5, 4), -4);
  CHECK_EQ(roundUp(-8, 4), -8);
  CHECK_EQ(roundUp(-3, 4), 0);
  CHECK_EQ(roundUp(kMax, 1), kMax);
  CHECK_EQ(roundUp(kMax - 7, 8), kMax - 7);  // 2^63-8 is a multiple of 8
  CHECK_EQ(roundUp(std::numeric_limits<int64_t>::min(), 2), std::numeric_limits<int64_t>::min());
  CHECK_THROWS(roundUp(kMax, 2), "INT64_MAX");
  CHECK_THROWS(roundUp(kMax - 1, 4), "INT64_MAX");
  CHECK_THROWS(roundUp(5, 0), "multiple must be > 0");
  CHECK_THROWS(roundUp(5, -4), "multiple must be > 0");
}

static void test_power_or_round() {
  CHECK_EQ(nextPowerOf2OrRoundUp(1, 256, 1024), 1);
  CHECK_EQ(nextPowerOf2OrRoundUp(600, 256, 1024), 1024);
  CHECK_EQ(nextPowerOf2OrRoundUp(1023, 256, 1024), 1024);
  CHECK_EQ(nextPowerOf2OrRoundUp(1024, 256, 1024), 1024);
  CHECK_EQ(nextPowerOf2OrRoundUp(1025, 256, 1024), 1280);
  CHECK_EQ(nextPowerOf2OrRoundUp(5000, 256, 1024), 5120);
}

static int line_of_context = 0;
static mslk::utils::SourceContext make_context() {
  line_of_context = __LINE__ + 1;
  return SOURCE_CONTEXT_CURRENT(my_kernel);
}

static void test_source_context() {
  const auto ctx = make_context();
  CHECK_EQ(std::string(ctx.summary), "my_kernel");
  CHECK(ctx.template_.empty());
  CHECK(std::string(ctx.dsa_file_descriptor_).find("test_utils.cpp") != std::string::npos);
  CHECK_EQ(static_cast<int>(ctx.location.line()), line_of_context);
  const std::string d = ctx.description();
  CHECK(d.find("test_utils.cpp(" + std::to_string(line_of_context) + ":") != std::string::npos);
  CHECK(d.find("make_context") != std::string::npos);
  CHECK(d.find("[my_kernel]") != std::string::npos);
  const auto other = ctx.withSummary("renamed");
  CHECK_EQ(std::string(other.summary), "renamed");
  CHECK_EQ(other.location.line(), ctx.location.line());
  CHECK(other.description().find("[renamed]") != std::string::npos);
  constexpr auto c = SOURCE_CONTEXT_CURRENT(constexpr_ok);  // usable in constant expressions
  CHECK_EQ(std::string(c.summary), "constexpr_ok");
}

int main() {
  test_next_power_of_2();
  test_round_up();
  test_power_or_round();
  test_source_context();
  return mslk_test::summary("test_utils");
}
