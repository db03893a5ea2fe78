// Native entry points of the FP4 (MXFP4 / NVFP4) and MX (microscaling FP8 / FP6) GEMMs (spec: "C++ -
// Native GEMM declarations - FP4, INT4 & MX" and "C++ - Native offset-grouped GEMM declarations"),
// with the spec's signatures. This build has no FP4 / MX kernel yet: every one throws
// c10::Error "mslk::gemm::<name>: not available on this platform: this build has no FP4 / MX
// (microscaling) kernels yet", the reason torch.ops.mslk.<name> gives (mslk.gemm._unavailable_ops).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace mslk::gemm {

// Dense: XQ [M, K'] x WQ [N, K'] (K' the packed K) with block scales -> [M, N] bf16.
at::Tensor f4f4bf16(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                    std::optional<at::Tensor> output = std::nullopt,
                    std::optional<at::Tensor> global_scale = std::nullopt, int64_t mxfp4_block_size = 32);
at::Tensor mx8mx4bf16(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                      std::optional<at::Tensor> output = std::nullopt);
at::Tensor mx8mx6bf16(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                      std::optional<at::Tensor> output = std::nullopt);
at::Tensor mx6mx6bf16(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                      std::optional<at::Tensor> output = std::nullopt, int64_t splits = 0);

// Stacked grouped: XQ [total_M, K'], WQ [G, N, K'], M_sizes [G] -> [total_M, N].
at::Tensor f4f4bf16_grouped_stacked(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                    at::Tensor M_sizes, std::optional<at::Tensor> global_scale = std::nullopt,
                                    std::optional<at::Tensor> starting_row_after_padding = std::nullopt,
                                    bool use_mx = true);

// Offset-grouped (offsets [G] delimit the groups): XQ [total_M, K'] x WQ [G, N, K'] (groups along M)
// -> [total_M, N]; or XQ [M, K'] x WQ [N, K'] (groups along K) -> [G, M, N].
at::Tensor mx8mx8bf16_grouped_mm(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                 at::Tensor offsets, std::optional<at::Tensor> output = std::nullopt,
                                 std::optional<int64_t> actual_num_tokens = std::nullopt);
at::Tensor f4f4bf16_grouped_mm(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                               at::Tensor offsets, std::optional<at::Tensor> output = std::nullopt,
                               std::optional<at::Tensor> global_scale = std::nullopt);
at::Tensor f4f4bf16_ultra_grouped_mm(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                     at::Tensor offsets, at::Tensor x_global_scale, at::Tensor w_global_scale,
                                     std::optional<at::Tensor> output = std::nullopt);
at::Tensor mx8mx4bf16_grouped_mm(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                 at::Tensor offsets, std::optional<at::Tensor> output = std::nullopt);

}  // namespace mslk::gemm
