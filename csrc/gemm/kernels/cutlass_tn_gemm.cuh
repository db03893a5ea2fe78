// One-problem "TN" GEMM on CUTLASS sm90 with a scaled accumulator: D [M, N] (row-major) =
// alpha * (A [M, K] @ B [N, K]^T), both operands K-major, TMA + wgmma, warp-specialized
// (cooperative, or ping-pong for 64-row tiles), persistent tiles; alpha a float or a device pointer to one (CUTLASS's ScaledAcc,
// computed in float32). kColMajorD: D column-major instead (element (m, n) at d[m + n * ldd]),
// so a swapped problem (out^T = W X^T) writes out itself. Instantiated once per kernel TU
// (bf16x9_cutlass.cu, the rows of int8_gemm_configs.h).
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <climits>
#include <cstdint>

#include "gemm/kernels/config_table.h"
#include "gemm/kernels/cutlass_launch.cuh"

namespace mslk::gemm::detail {

template <class ElementAB, class ElementAcc, class ElementD, int TM, int TN, int TK, int CM, int CN,
          bool kCooperative = true, bool kColMajorD = false>
struct CutlassTnGemm {
  static constexpr int kAlignAB = 16 / sizeof(ElementAB);
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using LayoutD = cute::conditional_t<kColMajorD, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using Fusion = cutlass::epilogue::fusion::ScaledAcc<ElementD, float, float>;
  using MainloopSchedule = cute::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, float, void, LayoutD, kAlignD,
      ElementD, LayoutD, kAlignD, EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, cutlass::layout::RowMajor, kAlignAB, ElementAB,
      cutlass::layout::ColumnMajor, kAlignAB, ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // lda / ldb / ldd in elements. cudaErrorNotSupported, having launched nothing, when TMA's rules
  // (16-byte aligned bases and row strides, K % alignment, int32 sizes) or can_implement refuse
  // the problem. N (kColMajorD: M) need not be a multiple of anything.
  static cudaError_t run(const void* a, int64_t lda, const void* b, int64_t ldb, void* d, int64_t ldd, int64_t M,
                         int64_t N, int64_t K, float alpha, const float* alpha_ptr, cudaStream_t stream) {
    using namespace cute;
    const bool ok = M > 0 && M <= INT_MAX - kAlignD && N > 0 && N <= INT_MAX - kAlignD && K > 0 && K <= INT_MAX && K % kAlignAB == 0 &&
                    lda % kAlignAB == 0 && ldb % kAlignAB == 0 && ldd % kAlignD == 0 && aligned(a, 16) &&
                    aligned(b, 16) && aligned(d, 16) && (alpha_ptr == nullptr || aligned(alpha_ptr, 4));
    if (!ok) return cudaErrorNotSupported;
    typename Kernel::StrideA sa = make_stride(lda, _1{}, int64_t(0));
    typename Kernel::StrideB sb = make_stride(ldb, _1{}, int64_t(0));
    typename Kernel::StrideD sd{};
    if constexpr (kColMajorD) sd = make_stride(_1{}, ldd, int64_t(0));
    else sd = make_stride(ldd, _1{}, int64_t(0));
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1},
                                  {static_cast<const ElementAB*>(a), sa, static_cast<const ElementAB*>(b), sb},
                                  {{}, nullptr, sd, static_cast<ElementD*>(d), sd}};
    args.epilogue.thread.alpha = alpha;
    args.epilogue.thread.alpha_ptr = alpha_ptr;
    // Any N (kColMajorD: M): the TMA store clips the last tile along D's contiguous dimension;
    // only ldd must be aligned (checked above).
    typename Gemm::Arguments probe = args;
    auto& contiguous = cute::get<kColMajorD ? 0 : 1>(probe.problem_shape);
    contiguous = static_cast<int>((contiguous + kAlignD - 1) / kAlignD * kAlignD);
    return run_cutlass_universal<Gemm>(args, stream, &probe);
  }
};

}  // namespace mslk::gemm::detail
