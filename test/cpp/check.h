// Minimal test harness (no GoogleTest on the GPU machine): failures print and are counted;
// main returns mslk_test::summary() (non-zero on any failure).
#pragma once

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>

namespace mslk_test {
inline int& failures() {
  static int n = 0;
  return n;
}
inline int& checks() {
  static int n = 0;
  return n;
}
inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  std::fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what.c_str());
}
inline int summary(const char* name) {
  std::printf("%s: %d checks, %d failures\n", name, checks(), failures());
  return failures() == 0 ? 0 : 1;
}
template <typename A, typename B>
std::string describe(const char* ea, const char* eb, const A& a, const B& b) {
  std::ostringstream ss;
  ss << ea << " == " << eb << " (got " << a << " vs " << b << ")";
  return ss.str();
}
}  // namespace mslk_test

#undef CHECK  // some library headers define their own
#define CHECK(COND)                                                  \
  do {                                                               \
    ++mslk_test::checks();                                           \
    if (!(COND)) mslk_test::fail(__FILE__, __LINE__, "CHECK(" #COND ")"); \
  } while (0)

#define CHECK_EQ(A, B)                                                                 \
  do {                                                                                 \
    ++mslk_test::checks();                                                             \
    const auto _a = (A); /* copies: A may refer into a temporary */                    \
    const auto _b = (B);                                                               \
    if (!(_a == _b)) mslk_test::fail(__FILE__, __LINE__, mslk_test::describe(#A, #B, _a, _b)); \
  } while (0)

// EXPR must throw an exception whose what() contains SUBSTR.
#define CHECK_THROWS(EXPR, SUBSTR)                                                        \
  do {                                                                                    \
    ++mslk_test::checks();                                                                \
    bool _thrown = false;                                                                 \
    try {                                                                                 \
      (void)(EXPR);                                                                       \
    } catch (const std::exception& _e) {                                                  \
      _thrown = true;                                                                     \
      if (std::string(_e.what()).find(SUBSTR) == std::string::npos)                       \
        mslk_test::fail(__FILE__, __LINE__,                                               \
                        std::string(#EXPR " threw without '") + SUBSTR + "': " + _e.what()); \
    }                                                                                     \
    if (!_thrown) mslk_test::fail(__FILE__, __LINE__, #EXPR " did not throw");            \
  } while (0)
