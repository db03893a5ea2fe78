// The launch of a one-problem CUTLASS 3.x GemmUniversal kernel (fp8_rowwise_cutlass.cuh,
// fp8_blockwise_cutlass.cuh): the device's SM count, can_implement, the workspace from the
// stream-ordered allocator, then what GemmUniversalAdapter::run does, less the
// cudaFuncSetAttribute of the kernel's (fixed) shared memory on every call: that is set once
// per device.
#pragma once
#include <cutlass/cutlass.h>

#include "common/device_attrs.h"

namespace mslk::gemm::detail {

// Returns cudaErrorNotSupported, having launched nothing, when can_implement refuses `args` (or
// `probe`, when given: the same problem with its output's row length rounded up, because the
// epilogue's check wants N % alignment == 0 where TMA itself only needs aligned row strides).
template <class Gemm>
cudaError_t run_cutlass_universal(typename Gemm::Arguments& args, cudaStream_t stream,
                                  const typename Gemm::Arguments* probe = nullptr) {
  using Kernel = typename Gemm::GemmKernel;
  int device = 0, sms = 0;
  cudaError_t e = mslk::cuda::current_device_sms(&device, &sms);  // read once per device
  if (e != cudaSuccess) return e;
  args.hw_info.device_id = device;
  args.hw_info.sm_count = sms;
  if (Gemm::can_implement(probe ? *probe : args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  const size_t ws_bytes = Gemm::get_workspace_size(args);
  void* workspace = nullptr;
  if (ws_bytes > 0 && (e = cudaMallocAsync(&workspace, ws_bytes, stream)) != cudaSuccess) return e;
  static mslk::cuda::SmemLimitOnce smem_limit;
  constexpr int kSmem = static_cast<int>(Kernel::SharedStorageSize);
  cutlass::Status st = Kernel::initialize_workspace(args, workspace, stream);
  typename Kernel::Params params;
  if (st == cutlass::Status::kSuccess) {
    params = Kernel::to_underlying_arguments(args, workspace);
    if (kSmem >= (48 << 10) && smem_limit.ensure(cutlass::device_kernel<Kernel>, device, kSmem) != cudaSuccess) {
      cudaGetLastError();  // clear it, as the adapter does
      st = cutlass::Status::kErrorInternal;
    }
  }
  if (st == cutlass::Status::kSuccess) st = Gemm::run(params, stream);
  e = cudaGetLastError();
  if (workspace) cudaFreeAsync(workspace, stream);
  if (st != cutlass::Status::kSuccess && e == cudaSuccess) e = cudaErrorLaunchFailure;
  return e;
}

}  // namespace mslk::gemm::detail
