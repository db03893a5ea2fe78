// include/mslk/gemm/fp4_mx_gemm.h: no FP4 / MX kernel is built yet, so every entry throws, naming
// itself, with the reason torch.ops.mslk's same-name op gives (mslk.utils.unavailable.FP4).
#include "mslk/gemm/fp4_mx_gemm.h"

#include <c10/util/Exception.h>

namespace mslk::gemm {
namespace {

using T = at::Tensor;
using OT = std::optional<at::Tensor>;

[[noreturn]] void unavailable(const char* name) {
  TORCH_CHECK(false, "mslk::gemm::", name,
              ": not available on this platform: this build has no FP4 / MX (microscaling) kernels yet");
}

}  // namespace

T f4f4bf16(T, T, T, T, OT, OT, int64_t) { unavailable("f4f4bf16"); }
T mx8mx4bf16(T, T, T, T, OT) { unavailable("mx8mx4bf16"); }
T mx8mx6bf16(T, T, T, T, OT) { unavailable("mx8mx6bf16"); }
T mx6mx6bf16(T, T, T, T, OT, int64_t) { unavailable("mx6mx6bf16"); }
T f4f4bf16_grouped_stacked(T, T, T, T, T, OT, OT, bool) { unavailable("f4f4bf16_grouped_stacked"); }
T mx8mx8bf16_grouped_mm(T, T, T, T, T, OT, std::optional<int64_t>) { unavailable("mx8mx8bf16_grouped_mm"); }
T f4f4bf16_grouped_mm(T, T, T, T, T, OT, OT) { unavailable("f4f4bf16_grouped_mm"); }
T f4f4bf16_ultra_grouped_mm(T, T, T, T, T, T, T, OT) { unavailable("f4f4bf16_ultra_grouped_mm"); }
T mx8mx4bf16_grouped_mm(T, T, T, T, T, OT) { unavailable("mx8mx4bf16_grouped_mm"); }

}  // namespace mslk::gemm
