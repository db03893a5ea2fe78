// include/mslk/conv/conv.h: no SM100 kernel is built, so the entry throws with the reason
// torch.ops.mslk.f8f8bf16_conv gives (mslk.utils.unavailable.SM100).
#include "mslk/conv/conv.h"

#include <c10/util/Exception.h>

namespace mslk::conv {

at::Tensor f8f8bf16_conv(at::Tensor, at::Tensor, at::Tensor, std::vector<int64_t>, std::vector<int64_t>,
                         std::vector<int64_t>) {
  TORCH_CHECK(false, "mslk::conv::f8f8bf16_conv: not available on this platform: needs SM100 (NVIDIA Blackwell); "
                     "this build has no Blackwell kernels");
}

}  // namespace mslk::conv
