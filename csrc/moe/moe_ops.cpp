// Schemas of the MoE domain (routing and token movement). Deviations from the spec's declared
// schemas, on purpose (see CONTRACTS.md "Known spec/source defects"):
//  - gather_scale_quant_dense_tokens returns (Tensor, Tensor): FP8 rows and fp32 reciprocal scales;
//  - split_shuffling keeps init_with_zeros;
//  - mutated arguments carry their alias annotation (Tensor(a!)), as the dispatcher requires.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  m.def(
      "index_shuffling(Tensor routing_scores, int? expert_index_start=None, int? expert_index_end=None, "
      "Tensor? valid_token_count=None, int top_k=1) -> (Tensor, Tensor, Tensor)");
  m.def(
      "gather_scale_dense_tokens(Tensor x, Tensor token_indices, Tensor expert_indices, Tensor scores, "
      "Tensor? valid_token_count=None) -> Tensor");
  m.def(
      "gather_scale_quant_dense_tokens(Tensor x, Tensor token_indices, Tensor expert_indices, Tensor scores, "
      "Tensor? scale_ub=None, Tensor? valid_token_count=None) -> (Tensor, Tensor)");
  m.def(
      "scatter_add_dense_tokens(Tensor(a!) out_tokens, Tensor in_tokens, Tensor token_indices, "
      "Tensor? valid_token_count=None) -> ()");
  m.def(
      "scatter_add_padded_tokens(Tensor in_tokens, Tensor token_counts, Tensor token_indices, "
      "Tensor(a!) out_tokens) -> ()");
  m.def(
      "combine_shuffling(Tensor tokens, Tensor token_counts, int? expert_start=None, int? expert_end=None, "
      "bool is_padded=False) -> (Tensor, Tensor)");
  m.def(
      "split_shuffling(Tensor tokens, Tensor token_counts, int? expert_start=None, int? expert_end=None, "
      "bool is_padded=False, bool init_with_zeros=False) -> Tensor");
  m.def("silu_mul(Tensor x0, Tensor x1, Tensor? valid_token_count=None) -> Tensor");
  m.def(
      "silu_mul_quant(Tensor x0, Tensor x1, Tensor? scale_ub=None, Tensor? valid_token_count=None) "
      "-> (Tensor, Tensor)");
  m.def("scatter_add_along_first_dim(Tensor(a!) Dst, Tensor Src, Tensor Index) -> ()");
}
