// CUTLASS 3.x sm90 ptr-array grouped GEMM for kWgrad of bf16_grouped_params.h:
//   dW[g] [N, K] = dY_g^T @ X_g over the rows of group g, dY [total_M, N], X [total_M, K].
// Per group: GEMM m = N, n = K, k = m_g (the group's rows), A = dY_g^T (M-major: n contiguous),
// B = X_g (N-major: k contiguous); bf16 wgmma reads both MN-major from shared memory.
// Like the forward (bf16_grouped_cutlass.cuh) every per-group argument is written on the device
// from M_sizes (no host sync). A group with no rows would run tiles with zero k-blocks (their
// accumulators never written), so it gets no tiles (shape (0, K, 0)); a second small launch then
// zeroes its dW[g] unless the call accumulates into a float32 output (which stays as it was).
// Output variants: bf16 (round), float32 (store), float32 accumulated into (beta = 1, C = D).
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <cstdint>

#include "gemm/kernels/cutlass_swizzle.h"
#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_wgrad_configs.h"
#include "gemm/kernels/grouped_setup.cuh"

namespace mslk::gemm::detail {

enum class WgradOut { kBf16, kF32, kF32Accum };

__device__ __forceinline__ long long wgrad_group_size(const Bf16GroupedParams& p, int64_t g) {
  const long long m = p.m_sizes_int64 ? static_cast<const int64_t*>(p.m_sizes)[g]
                                      : static_cast<long long>(static_cast<const int32_t*>(p.m_sizes)[g]);
  return m < 0 ? 0 : m;
}

template <class Shape, class ElementD, class StrideA, class StrideB, class StrideD>
__global__ void __launch_bounds__(kGroupSetupThreads)
    bf16_wgrad_setup_kernel(const Bf16GroupedParams p, Shape* shapes, const cutlass::bfloat16_t** a_ptrs,
                            const cutlass::bfloat16_t** b_ptrs, ElementD** d_ptrs, StrideA* a_strides,
                            StrideB* b_strides, StrideD* d_strides) {
  const auto* dy = static_cast<const cutlass::bfloat16_t*>(p.x);
  const auto* x = static_cast<const cutlass::bfloat16_t*>(p.w);
  auto* out = static_cast<ElementD*>(p.out);
  scan_group_rows(
      p.G, p.total_M, [&](int64_t g) { return wgrad_group_size(p, g); },
      [&](int64_t g, long long start, long long end) {
        if (blockIdx.x != 0) return;
        const int rows = static_cast<int>(end - start);
        shapes[g] = rows > 0 ? Shape(static_cast<int>(p.N), static_cast<int>(p.K), rows)
                             : Shape(0, static_cast<int>(p.K), 0);  // no tiles (see the top)
        a_ptrs[g] = dy + start * p.ldx;
        b_ptrs[g] = x + start * p.ldw;
        d_ptrs[g] = out + g * p.N * p.K;
        StrideA sa{};
        set_leading(sa, p.ldx);  // A (n, r): n contiguous, rows ldx apart
        a_strides[g] = sa;
        StrideB sb{};
        set_leading(sb, p.ldw);  // B (k, r): k contiguous, rows ldw apart
        b_strides[g] = sb;
        StrideD sd{};
        cute::get<0>(sd) = p.K;
        d_strides[g] = sd;
      });
}

// dW[g] = 0 for the groups the GEMM gave no tiles (one block per group).
template <class Shape, class ElementD>
__global__ void __launch_bounds__(256) bf16_wgrad_zero_empty_kernel(const Shape* shapes, ElementD* out, int64_t nk) {
  const int64_t g = blockIdx.x;
  if (cute::get<0>(shapes[g]) != 0) return;
  for (int64_t i = threadIdx.x; i < nk; i += blockDim.x) out[g * nk + i] = ElementD(0);
}

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, WgradOut kOut>
struct CutlassBf16Wgrad {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  using ElementAB = cutlass::bfloat16_t;
  using ElementD = cute::conditional_t<kOut == WgradOut::kBf16, cutlass::bfloat16_t, float>;
  using ElementC = cute::conditional_t<kOut == WgradOut::kF32Accum, float, void>;
  using LayoutA = cutlass::layout::ColumnMajor;  // dY_g^T (n, r): n contiguous
  using LayoutB = cutlass::layout::RowMajor;     // X_g (k, r): k contiguous
  using LayoutD = cutlass::layout::RowMajor;     // dW[g] [N, K]
  static constexpr int kAlignAB = 8;             // 16 bytes
  static constexpr int kAlignD = 16 / sizeof(ElementD);

  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<kCooperative, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, LayoutD*, kAlignD, ElementD,
      LayoutD*, kAlignD, EpilogueSchedule>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA*, kAlignAB, ElementAB, LayoutB*,
      kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideC = typename Kernel::InternalStrideC;
  using StrideD = typename Kernel::InternalStrideD;

  static typename Gemm::Arguments make_args(int G, Shape* shapes, const ElementAB** a, StrideA* sa,
                                            const ElementAB** b, StrideB* sb, ElementD** d, StrideD* sd,
                                            int device, int sm_count) {
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {G, shapes, nullptr};  // the shapes live on the device only
    args.mainloop.ptr_A = a;
    args.mainloop.dA = sa;
    args.mainloop.ptr_B = b;
    args.mainloop.dB = sb;
    args.epilogue.thread.alpha = 1.f;
    if constexpr (kOut == WgradOut::kF32Accum) {
      args.epilogue.thread.beta = 1.f;  // D = acc + C with C = D: accumulate into the output
      args.epilogue.ptr_C = const_cast<const ElementD**>(d);
      static_assert(sizeof(StrideC) == sizeof(StrideD), "C and D strides share one array");
      args.epilogue.dC = reinterpret_cast<StrideC*>(sd);
    } else {
      args.epilogue.thread.beta = 0.f;
      args.epilogue.ptr_C = nullptr;
      args.epilogue.dC = nullptr;
    }
    args.epilogue.ptr_D = d;
    args.epilogue.dD = sd;
    args.hw_info.device_id = device;
    args.hw_info.sm_count = sm_count;
    args.scheduler.max_swizzle_size = cutlass_swizzle(kDefaultSwizzle);
    return args;
  }

  static cudaError_t run(const Bf16GroupedParams& p, cudaStream_t stream) {
    const int G = static_cast<int>(p.G);
    int device = 0, sms = 0;
    cudaError_t e = device_sms(&device, &sms);
    if (e != cudaSuccess) return e;
    const int sm_count = p.num_sms > 0 && p.num_sms < sms ? p.num_sms : sms;
    auto probe = make_args(G, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, device, sm_count);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    GroupArrays<Shape, ElementAB, ElementAB, ElementD, StrideA, StrideB, StrideD> arr;
    if ((e = arr.allocate(G, Gemm::get_workspace_size(probe), false, stream)) != cudaSuccess) return e;

    bf16_wgrad_setup_kernel<Shape, ElementD, StrideA, StrideB, StrideD>
        <<<1, kGroupSetupThreads, 0, stream>>>(p, arr.shapes, arr.a, arr.b, arr.d, arr.sa, arr.sb, arr.sd);
    e = cudaGetLastError();
    if (e == cudaSuccess && kOut != WgradOut::kF32Accum) {
      bf16_wgrad_zero_empty_kernel<Shape, ElementD><<<G, 256, 0, stream>>>(arr.shapes, static_cast<ElementD*>(p.out),
                                                                           p.N * p.K);
      e = cudaGetLastError();
    }
    return run_after_setup<Gemm>(
        e, make_args(G, arr.shapes, arr.a, arr.sa, arr.b, arr.sb, arr.d, arr.sd, device, sm_count), arr.workspace,
        arr.buf, stream);
  }
};

}  // namespace mslk::gemm::detail

// Defines bf16_wgrad_cutlass<ID> for row ID of the config table (all three output variants).
#define MSLK_BF16_WGRAD_INSTANTIATE(ID)                                                                         \
  namespace mslk::gemm {                                                                                        \
  template <>                                                                                                   \
  cudaError_t bf16_wgrad_cutlass<ID>(const Bf16GroupedParams& p, cudaStream_t s) {                              \
    constexpr Bf16WgradConfig c = kBf16WgradConfigs[ID];                                                        \
    using detail::WgradOut;                                                                                     \
    if (!p.out_fp32)                                                                                            \
      return detail::CutlassBf16Wgrad<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative,    \
                                      WgradOut::kBf16>::run(p, s);                                              \
    if (p.accumulate)                                                                                           \
      return detail::CutlassBf16Wgrad<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative,    \
                                      WgradOut::kF32Accum>::run(p, s);                                          \
    return detail::CutlassBf16Wgrad<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative,      \
                                    WgradOut::kF32>::run(p, s);                                                 \
  }                                                                                                             \
  }
