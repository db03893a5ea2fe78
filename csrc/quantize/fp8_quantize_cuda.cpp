// CUDA backend of the FP8 ops: launches the kernels on the current stream and checks the launch.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>

#include "quantize/fp8_quantize.h"
#include "quantize/kernels/fp8_quantize.h"

namespace mslk::quantize {
namespace {

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// A misspelt schedule or team size must not quietly time or test the default kernels.
void check_schedule() {
  const char* s = std::getenv("MSLK_FP8_SCHEDULE");
  Fp8Schedule parsed;
  TORCH_CHECK(parse_fp8_schedule(s, &parsed), "MSLK_FP8_SCHEDULE must be ", kFp8ScheduleNames, " (or unset), got '",
              s, "'");
  const char* t = std::getenv("MSLK_FP8_ROW_TEAM");
  int team = 0;
  TORCH_CHECK(parse_fp8_row_team(t, &team), "MSLK_FP8_ROW_TEAM must be 1, 2 or 4 (or unset), got '", t, "'");
}

void cuda_rows(const Fp8TileParams& p) {
  check_schedule();
  C10_CUDA_CHECK(fp8_quantize_rows(p, stream()));
}
void cuda_blocks(const Fp8TileParams& p) {
  check_schedule();
  C10_CUDA_CHECK(fp8_quantize_blocks(p, stream()));
}
void cuda_groups(const Fp8TileParams& p) {
  check_schedule();
  C10_CUDA_CHECK(fp8_quantize_groups(p, stream()));
}
void cuda_tensor(const Rows& in, uint8_t* out, float* scale, float* scratch) {
  C10_CUDA_CHECK(fp8_quantize_tensor(in, out, scale, scratch, stream()));
}
void cuda_dequant(const Fp8DequantParams& p) { C10_CUDA_CHECK(fp8_dequantize(p, stream())); }

constexpr Fp8Backend kCudaBackend{cuda_rows, cuda_blocks, cuda_groups, cuda_tensor, cuda_dequant};
using CudaOps = Fp8Ops<&kCudaBackend>;

}  // namespace
}  // namespace mslk::quantize

TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::quantize::CudaOps::register_triton(m); }
TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::quantize::CudaOps::register_mslk(m); }
