// Reference attention forward, written with ATen ops only (so it runs on any device that ATen
// supports). Registered for CPU in fmha_reference_cpu.cpp and for CUDA in fmha_reference_cuda.cpp.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <tuple>

namespace mslk::attention {
std::tuple<at::Tensor, at::Tensor> fmha_reference_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    double scale, std::optional<at::ScalarType> output_dtype);
}  // namespace mslk::attention
