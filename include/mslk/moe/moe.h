// Native entry points of mslk's MoE routing ops (spec: "C++ - Native Conv & MoE declarations"),
// callable from C++ without Python. Each calls the torch.ops.mslk op of the same contract through
// the dispatcher, so the CPU reference or the CUDA kernel runs by the inputs' device. Link against
// libmslk.so (which registers the ops when it is loaded).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace mslk::moe {

// torch.ops.mslk.index_shuffling: routing_scores [T, E] (bf16 or float32, E <= 512, top_k <= 8)
// -> (counts [E + 2], expert_indices [T * top_k], token_indices [T * top_k]), all int32. Each
// token below valid_token_count[0] (default T) picks its top_k experts (torch.topk order); the
// slots of the experts in [expert_index_start, expert_index_end) come grouped by expert, tokens
// ascending, expert ids relative to expert_index_start, then a zero tail. counts[e] is expert e's
// slot count (0 outside the range), counts[E] = T, counts[E + 1] the total slots.
std::tuple<at::Tensor, at::Tensor, at::Tensor> index_shuffling_torch(const at::Tensor& routing_scores,
                                                                     const std::optional<int64_t>& expert_index_start,
                                                                     const std::optional<int64_t>& expert_index_end,
                                                                     const std::optional<at::Tensor>& valid_token_count,
                                                                     int64_t top_k);

// torch.ops.mslk.scatter_add_along_first_dim, in place: dst[index[i], :] += src[i, :], with dst
// [N, K], src [M, K] of the same dtype, index [M] int32 or int64 (each in [0, N)).
void scatter_add_along_first_dim(at::Tensor dst, at::Tensor src, at::Tensor index);

}  // namespace mslk::moe
