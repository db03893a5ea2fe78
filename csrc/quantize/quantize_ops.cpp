// Schemas of the quantization domain. torch.ops.triton.* keep the spec's names for the ops the
// reference wrote in Triton; the kernels behind them are ours (CUDA C++ and a CPU reference).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(triton, m) {
  m.def(
      "quantize_fp8_row(Tensor a, Tensor? scale_ub=None, Tensor? zero_start_index_M=None, "
      "bool use_triton=True, Device? output_device=None, int? align_rows_to=None, "
      "float? eps_opt=0.001953125) -> (Tensor, Tensor)");
  m.def(
      "quantize_fp8_block(Tensor x, int block_m=256, int block_k=256, Tensor? scale_ub=None, "
      "bool use_triton=True, Device? output_device=None, bool k_major=True) -> (Tensor, Tensor)");
  m.def("quantize_fp8_tensor(Tensor a, bool use_triton=True) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  m.def(
      "quantize_fp8_group(Tensor x, int group_size=128, Tensor? scale_ub=None, Tensor? m_sizes=None, "
      "bool k_major=True) -> (Tensor, Tensor)");
  m.def("dequantize_fp8_row(Tensor xq, Tensor x_scale) -> Tensor");
  m.def("dequantize_fp8_block(Tensor xq, Tensor x_scale, int block_m=256, int block_k=256) -> Tensor");
}
