// include/mslk/moe/moe.h: the native entry points, each a typed dispatcher call of the op with
// the same contract (so the backend follows the inputs' device, exactly as from Python).
#include "mslk/moe/moe.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace mslk::moe {

std::tuple<at::Tensor, at::Tensor, at::Tensor> index_shuffling_torch(const at::Tensor& routing_scores,
                                                                     const std::optional<int64_t>& expert_index_start,
                                                                     const std::optional<int64_t>& expert_index_end,
                                                                     const std::optional<at::Tensor>& valid_token_count,
                                                                     int64_t top_k) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("mslk::index_shuffling", "")
                             .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                                 const at::Tensor&, std::optional<int64_t>, std::optional<int64_t>,
                                 const std::optional<at::Tensor>&, int64_t)>();
  return op.call(routing_scores, expert_index_start, expert_index_end, valid_token_count, top_k);
}

void scatter_add_along_first_dim(at::Tensor dst, at::Tensor src, at::Tensor index) {
  // const Tensor& for the mutated Dst too: typed<> must match the registered kernel's C++ signature.
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("mslk::scatter_add_along_first_dim", "")
                             .typed<void(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  op.call(dst, src, index);
}

}  // namespace mslk::moe
