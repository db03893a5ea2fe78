// CUDA backend of the FP8 ops: launches the kernels on the current stream and checks the launch.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common/checks.h"
#include "mslk/utils/env.h"
#include "quantize/fp8_quantize.h"
#include "quantize/kernels/fp8_quantize.h"

namespace mslk::quantize {
namespace {

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// Read on every call (tuning and testing switches). A misspelt schedule or team size raises
// ValueError: it must not quietly time or test the default kernels.
Fp8Tuning read_tuning() {
  return read_env([] {
    Fp8Tuning t;
    static_assert(static_cast<int>(Fp8Schedule::kRing) == 7, "the names below are in Fp8Schedule's order");
    t.schedule = static_cast<Fp8Schedule>(env::choice(
        env::Var::kFp8Schedule, {"auto", "oneshot", "staged", "cluster", "bulk", "warp", "hybrid-persistent", "ring"}, 0));
    const int team = env::choice(env::Var::kFp8RowTeam, {"1", "2", "4"}, -1);
    t.row_team = team < 0 ? 0 : 1 << team;
    return t;
  });
}

void cuda_rows(const Fp8TileParams& p) { C10_CUDA_CHECK(fp8_quantize_rows(p, read_tuning(), stream())); }
void cuda_blocks(const Fp8TileParams& p) { C10_CUDA_CHECK(fp8_quantize_blocks(p, read_tuning(), stream())); }
void cuda_groups(const Fp8TileParams& p) { C10_CUDA_CHECK(fp8_quantize_groups(p, read_tuning(), stream())); }
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
