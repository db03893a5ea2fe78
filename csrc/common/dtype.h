// The input dtypes the kernels take, shared by every domain's parameter structs (plain C++:
// included by torch glue, CPU references and CUDA kernels alike).
#pragma once

namespace mslk {

enum class Dtype : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

}  // namespace mslk
