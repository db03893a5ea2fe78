// CUTLASS 3.x sm90 rowwise FP8 GEMM, one instantiation per generated TU (see
// fp8_rowwise_configs.h). Mainloop: the collective builder's warp-specialized TMA + wgmma
// mainloop (cooperative or ping-pong); fast accumulation uses the FP8FastAccum schedules, the
// default ones promote the wgmma accumulator into float32 registers every few k-blocks.
// Epilogue: an EVT computing D = bf16(fma(x_scale[m], w_scale[n] * acc, bias[n])), where a
// null bias pointer reads as 0 (the broadcast's null_default). No C operand is read.
// kSwap: the GEMM runs as out^T[N, M] = W[N, K] X[M, K]^T (W is CUTLASS's A, X its B, out^T a
// column-major D, which is out itself); x_scale then broadcasts along the GEMM's columns and
// w_scale / bias along its rows. Small M fills a narrow tile_n instead of 64 mostly-empty rows.
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "gemm/kernels/cutlass_launch.cuh"
#include "gemm/kernels/cutlass_swizzle.h"
#include "gemm/kernels/fp8_rowwise.h"
#include "gemm/kernels/fp8_rowwise_configs.h"

namespace mslk::gemm::detail {

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast, bool kSwap>
struct CutlassRowwise {
  using ElementA = cutlass::float_e4m3_t;
  using ElementB = cutlass::float_e4m3_t;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;     // [M, K] (swap: W [N, K]), K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // [N, K] (swap: X [M, K]), K contiguous
  using LayoutD = cute::conditional_t<kSwap, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int kAlignAB = 16;  // elements: 16 bytes
  static constexpr int kAlignD = 8;

  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<
      kCooperative,
      cute::conditional_t<kFast, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                          cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
      cute::conditional_t<kFast, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum,
                          cutlass::gemm::KernelTmaWarpSpecializedPingpong>>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;

  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  using StrideCol = cute::Stride<cute::_1, cute::_0, int64_t>;  // along the GEMM's rows
  using StrideRow = cute::Stride<cute::_0, cute::_1, int64_t>;  // along the GEMM's columns
  // x_scale rows of a group may start anywhere (alignment 1); w_scale / bias are 16-byte aligned.
  template <int kAlign>
  using AlongM = cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float, float, StrideCol, kAlign>;
  template <int kAlign>
  using AlongN = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float, StrideRow, kAlign>;
  using XScale = cute::conditional_t<kSwap, AlongN<1>, AlongM<1>>;
  using WScale = cute::conditional_t<kSwap, AlongM<4>, AlongN<4>>;
  using Bias = WScale;
  using XStride = cute::conditional_t<kSwap, StrideRow, StrideCol>;
  using WStride = cute::conditional_t<kSwap, StrideCol, StrideRow>;
  using Accum = cutlass::epilogue::fusion::Sm90AccFetch;
  using Mul = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>;
  using ScaledAcc = cutlass::epilogue::fusion::Sm90EVT<Mul, WScale, Accum>;
  using Fma = cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, float, kRound>;
  using Epilogue = cutlass::epilogue::fusion::Sm90EVT<Fma, XScale, ScaledAcc, Bias>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule, Epilogue>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, kAlignAB, ElementB, LayoutB, kAlignAB,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static cudaError_t run(const RowwiseGemmParams& p, cudaStream_t stream) {
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    const auto* x = reinterpret_cast<const cutlass::float_e4m3_t*>(p.a);
    const auto* w = reinterpret_cast<const cutlass::float_e4m3_t*>(p.b);
    StrideA sa = cute::make_stride(kSwap ? p.ldb : p.lda, cute::_1{}, kSwap ? p.batch_b : p.batch_a);
    StrideB sb = cute::make_stride(kSwap ? p.lda : p.ldb, cute::_1{}, kSwap ? p.batch_a : p.batch_b);
    StrideD sd{};
    if constexpr (kSwap) sd = cute::make_stride(cute::_1{}, p.ldd, p.batch_d);  // out^T, column-major
    else sd = cute::make_stride(p.ldd, cute::_1{}, p.batch_d);
    const StrideC sc = sd;
    const int gm = static_cast<int>(kSwap ? p.N : p.M), gn = static_cast<int>(kSwap ? p.M : p.N);

    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {gm, gn, static_cast<int>(p.K), static_cast<int>(p.L)},
        {kSwap ? w : x, sa, kSwap ? x : w, sb},
        {{}, nullptr, sc, static_cast<ElementD*>(p.out), sd}};
    XStride xs{};
    WStride ws{}, bs{};
    cute::get<2>(xs) = p.batch_xs;
    cute::get<2>(ws) = p.batch_ws;
    cute::get<2>(bs) = p.bias ? p.batch_bias : 0;
    args.epilogue.thread = {
        {p.x_scale, 0.f, xs},            // x_scale
        {{p.w_scale, 0.f, ws}, {}, {}},  // w_scale * acc
        {p.bias, 0.f, bs},               // bias (null: 0)
        {}};                             // fma
    args.scheduler.max_swizzle_size = cutlass_swizzle(p.tuning, p.swizzle);
    return run_cutlass_universal<Gemm>(args, stream);
  }
};

}  // namespace mslk::gemm::detail

// Defines fp8_rowwise_cutlass<ID> for row ID of the config table.
#define MSLK_FP8_ROWWISE_INSTANTIATE(ID)                                                               \
  namespace mslk::gemm {                                                                               \
  template <>                                                                                          \
  cudaError_t fp8_rowwise_cutlass<ID>(const RowwiseGemmParams& p, cudaStream_t s) {                    \
    constexpr TileConfig c = kFp8RowwiseConfigs[ID];                                                   \
    return detail::CutlassRowwise<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative, \
                                  c.fast_accum, c.swap>::run(p, s);                                    \
  }                                                                                                    \
  }
