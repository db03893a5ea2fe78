// CPU references: call f with a value of the C++ type of a Dtype.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "common/dtype.h"

namespace mslk {

template <typename F>
void with_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::kFloat32: return f(float{});
    case Dtype::kFloat16: return f(c10::Half{});
    case Dtype::kBFloat16: return f(c10::BFloat16{});
  }
}

}  // namespace mslk
