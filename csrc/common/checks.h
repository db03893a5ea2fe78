// Argument checks for the torch glue: every message names the op, the argument, what was
// expected and what came, so a bad call fails clearly instead of crashing or hanging.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mslk {

// An optional tensor argument that was passed (present and defined).
inline bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

inline std::string dtype_names(std::initializer_list<c10::ScalarType> allowed) {
  std::ostringstream os;
  int i = 0;
  for (auto t : allowed) os << (i++ ? ", " : "") << c10::toString(t);
  return os.str();
}

inline void check_dtype(const at::Tensor& t, const char* op, const char* arg,
                        std::initializer_list<c10::ScalarType> allowed) {
  for (auto a : allowed)
    if (t.scalar_type() == a) return;
  TORCH_CHECK_TYPE(false, op, ": argument '", arg, "' must have dtype ", dtype_names(allowed),
                   ", got ", t.scalar_type());
}

inline void check_dim(const at::Tensor& t, const char* op, const char* arg, int64_t lo, int64_t hi) {
  TORCH_CHECK_VALUE(t.dim() >= lo && t.dim() <= hi, op, ": argument '", arg, "' must have ",
                    lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi),
                    " dimensions, got shape ", t.sizes());
}

inline void check_same_device(const at::Tensor& t, const at::Tensor& ref, const char* op,
                              const char* arg, const char* ref_arg) {
  TORCH_CHECK(t.device() == ref.device(), op, ": argument '", arg, "' must be on the same device as '",
              ref_arg, "' (", ref.device(), "), got ", t.device());
}

// The spec's layout rule: the last dimension has stride 1, the others may be anything.
inline void check_last_dim_contiguous(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK_VALUE(t.dim() == 0 || t.size(-1) <= 1 || t.stride(-1) == 1, op, ": argument '", arg,
                    "' must have stride 1 in its last dimension, got strides ", t.strides());
}

inline void check_positive(int64_t v, const char* op, const char* arg) {
  TORCH_CHECK_VALUE(v > 0, op, ": argument '", arg, "' must be positive, got ", v);
}

// Runs a reader of mslk/utils/env.h and turns a malformed value (std::invalid_argument naming the
// variable) into a ValueError: the glue reads tuning variables only through this.
template <class F>
auto read_env(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

}  // namespace mslk
