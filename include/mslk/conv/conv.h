// Native entry point of mslk's FP8 3D convolution (spec: "C++ - Native Conv & MoE declarations"),
// with the spec's signature. Its kernel is an SM100 (Blackwell) one, which this build does not
// make: the call throws c10::Error "mslk::conv::f8f8bf16_conv: not available on this platform:
// needs SM100 (NVIDIA Blackwell); this build has no Blackwell kernels", the reason
// torch.ops.mslk.f8f8bf16_conv gives (mslk.conv).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

namespace mslk::conv {

// activation NDHWC (or NCDHW in channels_last_3d storage) float8_e4m3fn, filter KTRSC (or KCTRS),
// scale [1] float32; padding / stride / dilation three values each (depth, height, width) -> bf16.
at::Tensor f8f8bf16_conv(at::Tensor activation, at::Tensor filter, at::Tensor scale, std::vector<int64_t> padding,
                         std::vector<int64_t> stride, std::vector<int64_t> dilation);

}  // namespace mslk::conv
