// KernelLauncher: checks the launch shape against the stream's device, builds accessor
// arguments with the launch site in their messages, launches, and reports failures with
// that context. Build-time switches (see the bottom): MSLK_ISOLATE_KERNEL_LAUNCH,
// MSLK_TENSORCHECK; MSLK_MEMCHECK is read by the accessors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDADeviceAssertionHost.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <mslk/utils/bench/kernel_execution_timer.cuh>
#include <mslk/utils/device/cuda_utilities.cuh>
#include <mslk/utils/source_context.h>
#include <mslk/utils/torch/tensor_accessor_builder.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace mslk::utils {

template <typename>
struct is_tensor_accessor_builder : std::false_type {};
template <typename T, size_t N, size_t INB, bool P, template <typename> class PT>
struct is_tensor_accessor_builder<TensorAccessorBuilder<T, N, INB, P, PT>> : std::true_type {};
template <typename T>
inline constexpr bool is_tensor_accessor_builder_v = is_tensor_accessor_builder<T>::value;

// Builders become accessors carrying the launch context; anything else passes through.
template <typename T>
decltype(auto) transform_kernel_arg(const SourceContext& context, T&& arg) {
  if constexpr (is_tensor_accessor_builder_v<std::decay_t<T>>) {
    return arg.build(context.description());
  } else {
    return std::forward<T>(arg);
  }
}

// Value checks (NaN/Inf) on the tensors behind builders; other arguments are ignored.
template <typename T>
void check_kernel_arg(const SourceContext& context, T&& arg) {
  if constexpr (is_tensor_accessor_builder_v<std::decay_t<T>>) {
    arg.checkValues(context.description());
  }
}

namespace detail {
// Converts the built arguments to the kernel's exact parameter types: the cooperative
// launch passes raw pointers to them, so a mismatch (int64_t vs int) would be silent UB.
template <typename... Params, typename Tuple, size_t... I>
auto as_kernel_params(void (*)(Params...), Tuple& args, std::index_sequence<I...>) {
  static_assert(sizeof...(Params) == std::tuple_size_v<Tuple>,
                "kernel argument count differs from the kernel's parameter count");
  return std::tuple<std::decay_t<Params>...>(std::get<I>(args)...);
}
}  // namespace detail

template <bool LaunchCooperative = false, bool EnableDSA = false,
          bool EnableBarrierIsolation = false, bool EnableNaNChecks = false,
          bool EnableExecutionTimer = false>
struct KernelLauncher {
  const SourceContext context;

  constexpr explicit KernelLauncher(const SourceContext& context) noexcept : context(context) {}

  void checkGridSizesInRange(const cudaDeviceProp& props, const dim3& grid) const {
    const unsigned g[3] = {grid.x, grid.y, grid.z};
    for (int i = 0; i < 3; ++i) {
      TORCH_CHECK(g[i] > 0 && g[i] <= static_cast<unsigned>(props.maxGridSize[i]),
                  context.description(), ": grid.", "xyz"[i], " = ", g[i],
                  " is not within the range (0, ", props.maxGridSize[i], "]");
    }
  }

  void checkBlockSizesInRange(const cudaDeviceProp& props, const dim3& block) const {
    const unsigned b[3] = {block.x, block.y, block.z};
    for (int i = 0; i < 3; ++i) {
      TORCH_CHECK(b[i] > 0 && b[i] <= static_cast<unsigned>(props.maxThreadsDim[i]),
                  context.description(), ": block.", "xyz"[i], " = ", b[i],
                  " is not within the range (0, ", props.maxThreadsDim[i], "]");
    }
  }

  void checkThreadCountNotExceeded(const cudaDeviceProp& props, const dim3& grid,
                                   const dim3& block) const {
    const uint64_t per_block = uint64_t{block.x} * block.y * block.z;
    TORCH_CHECK(per_block <= static_cast<uint64_t>(props.maxThreadsPerBlock),
                context.description(), ": block ", block.x, " x ", block.y, " x ", block.z,
                " has ", per_block, " threads, more than the limit of ",
                props.maxThreadsPerBlock);
#ifdef __HIP_PLATFORM_AMD__
    // HIP does not split launches of >= 2^32 threads.
    const uint64_t total = per_block * grid.x * grid.y * grid.z;
    TORCH_CHECK(total < uint64_t{1} << 32, context.description(), ": ", total,
                " threads in total, HIP allows fewer than 2^32");
#else
    (void)grid;
#endif
  }

  void checkSharedMemoryPerBlockNotExceeded(const cudaDeviceProp& props, size_t smem) const {
#ifdef __HIP_PLATFORM_AMD__
    const size_t limit = props.sharedMemPerBlock;  // older ROCm reports 0 for the opt-in limit
#else
    const size_t limit = props.sharedMemPerBlockOptin;
#endif
    TORCH_CHECK(smem <= limit, context.description(), ": requested ", smem,
                " bytes of shared memory per block, the device allows at most ", limit);
  }

  // C10_CUDA_KERNEL_LAUNCH_CHECK with the launch site in the message.
  void kernelLaunchCheck(cudaError_t launch_error = cudaSuccess) const {
    const cudaError_t last = cudaGetLastError();
    const cudaError_t err = launch_error != cudaSuccess ? launch_error : last;
    const bool dsa_failed = c10::cuda::CUDAKernelLaunchRegistry::get_singleton_ref().has_failed();
    if (err == cudaSuccess && !dsa_failed) [[likely]] {
      return;
    }
    TORCH_CHECK(false, context.description(), ": CUDA error: ", cudaGetErrorString(err),
                c10::cuda::get_cuda_check_suffix(), "\n",
                c10::cuda::c10_retrieve_device_side_assertion_info());
  }

  template <typename KernelFunc, typename StreamType, typename... Args>
  auto launch_kernel(const KernelFunc& kernel, const dim3 grid, const dim3 block,
                     const size_t shared_mem_per_block, const StreamType raw_stream,
                     Args&&... args) const -> std::conditional_t<EnableExecutionTimer, float, void> {
    const c10::cuda::CUDAStream stream = device::to_cuda_stream(raw_stream);
    const c10::cuda::CUDAGuard guard(stream.device_index());  // launch on the stream's device
    const cudaDeviceProp& props = *at::cuda::getDeviceProperties(stream.device_index());

    checkGridSizesInRange(props, grid);
    checkBlockSizesInRange(props, block);
    checkThreadCountNotExceeded(props, grid, block);
    checkSharedMemoryPerBlockNotExceeded(props, shared_mem_per_block);

    if constexpr (EnableNaNChecks) {
      const std::string summary = std::string(context.summary) + " (pre-execution)";
      (check_kernel_arg(context.withSummary(summary), args), ...);
    }

    auto built = [&] {
      if constexpr (EnableDSA) {
        auto& registry = c10::cuda::CUDAKernelLaunchRegistry::get_singleton_ref();
        return std::make_tuple(
            transform_kernel_arg(context, std::forward<Args>(args))...,
            registry.get_uvm_assertions_ptr_for_current_device(),
            registry.insert(context.dsa_file_descriptor_.data(),
                            context.location.function_name(), context.location.line(),
                            context.summary.data(), stream.id()));
      } else {
        return std::make_tuple(transform_kernel_arg(context, std::forward<Args>(args))...);
      }
    }();

    if constexpr (EnableBarrierIsolation) {
      C10_CUDA_CHECK(cudaDeviceSynchronize());  // like CUDA_LAUNCH_BLOCKING=1, for one kernel
    }
    [[maybe_unused]] std::optional<KernelExecutionTimer> timer;
    if constexpr (EnableExecutionTimer) {
      timer.emplace(stream);
      timer->start();
    }

    cudaError_t launch_error = cudaSuccess;
    if constexpr (LaunchCooperative) {
      auto params = detail::as_kernel_params(
          kernel, built, std::make_index_sequence<std::tuple_size_v<decltype(built)>>{});
      auto ptrs = std::apply(
          [](auto&... p) { return std::array<void*, sizeof...(p)>{static_cast<void*>(&p)...}; },
          params);
      launch_error = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), grid,
                                                 block, ptrs.data(), shared_mem_per_block,
                                                 stream.stream());
    } else {
      std::apply(
          [&](auto&&... a) { kernel<<<grid, block, shared_mem_per_block, stream.stream()>>>(a...); },
          built);
    }

    if constexpr (EnableExecutionTimer) {
      timer->stop();
    }
    if constexpr (EnableBarrierIsolation) {
      launch_error = launch_error != cudaSuccess ? launch_error : cudaDeviceSynchronize();
    }
    kernelLaunchCheck(launch_error);

    if constexpr (EnableNaNChecks) {
      const std::string summary = std::string(context.summary) + " (post-execution)";
      (check_kernel_arg(context.withSummary(summary), args), ...);
    }
    if constexpr (EnableExecutionTimer) {
      return timer->elapsedMillis();
    }
  }
};

}  // namespace mslk::utils

// MSLK_ISOLATE_KERNEL_LAUNCH: synchronize the device before and after each launch, so a
// kernel is timed/debugged without overlap from other work.
#ifdef MSLK_ISOLATE_KERNEL_LAUNCH
#define _MSLK_KL_ISOLATE_ true
#else
#define _MSLK_KL_ISOLATE_ false
#endif

// MSLK_TENSORCHECK: scan TA_B/PTA_B tensors for NaN/Inf before and after each launch.
#ifdef MSLK_TENSORCHECK
#define _MSLK_KL_TENSORCHECK_ true
#else
#define _MSLK_KL_TENSORCHECK_ false
#endif

// The immediately-invoked lambda keeps source_location at the caller's line; the outer
// parentheses keep commas harmless inside other macros. Wrap template kernels in
// parentheses: MSLK_LAUNCH_KERNEL((k<float, 4>), ...).
#define _MSLK_LAUNCH_IMPL_(COOP, KERNEL, GRID, BLOCK, SMEM, STREAM, ...)                 \
  ([&] {                                                                                 \
    constexpr auto _mslk_context_ = SOURCE_CONTEXT_CURRENT(KERNEL);                      \
    auto& _mslk_kernel_ = KERNEL;                                                        \
    return mslk::utils::KernelLauncher<COOP, false, _MSLK_KL_ISOLATE_,                   \
                                       _MSLK_KL_TENSORCHECK_>(_mslk_context_)            \
        .launch_kernel(_mslk_kernel_, GRID, BLOCK, SMEM, STREAM __VA_OPT__(, ) __VA_ARGS__); \
  }())

#define MSLK_LAUNCH_KERNEL(KERNEL, GRID, BLOCK, SMEM, STREAM, ...) \
  _MSLK_LAUNCH_IMPL_(false, KERNEL, GRID, BLOCK, SMEM, STREAM __VA_OPT__(, ) __VA_ARGS__)
#define MSLK_LAUNCH_COOPERATIVE_KERNEL(KERNEL, GRID, BLOCK, SMEM, STREAM, ...) \
  _MSLK_LAUNCH_IMPL_(true, KERNEL, GRID, BLOCK, SMEM, STREAM __VA_OPT__(, ) __VA_ARGS__)
