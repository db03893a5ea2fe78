// CUTLASS 3.x sm90 block/group-scaled FP8 GEMM, one instantiation per generated TU (see
// fp8_blockwise_configs.h). Mainloop: CUTLASS's warp-specialized TMA + wgmma mainloop with
// blockwise scaling: the wgmma accumulator of each 128-K block is multiplied by
// sfa[m, kb] * sfb[n / 128, kb] and added into float32 registers (the promotion that the per-block
// scales require). A scale per row (granularity 1 along M) serves both the groupwise form and
// any blockwise block_m, which the glue expands per row. Epilogue: D = bf16(acc), no C operand.
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/detail/blockwise_scale_layout.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "gemm/kernels/cutlass_launch.cuh"
#include "gemm/kernels/cutlass_swizzle.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/fp8_blockwise_configs.h"

namespace mslk::gemm::detail {

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative>
struct CutlassBlockwise {
  static_assert(TK == 128, "the scales are applied per 128-K block");
  using ElementA = cutlass::float_e4m3_t;
  using ElementB = cutlass::float_e4m3_t;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;     // XQ [M, K], K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // WQ [N, K], K contiguous
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 16;
  static constexpr int kAlignD = 8;

  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN,
                                                                cute::GMMA::Major::MN>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule =
      cute::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise,
                          cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;

  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  using Convert = cutlass::epilogue::fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, float, kRound>;
  using Epilogue = cutlass::epilogue::fusion::Sm90EVT<Convert, cutlass::epilogue::fusion::Sm90AccFetch>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule, Epilogue>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, cute::tuple<LayoutA, LayoutSFA>, kAlignAB,
      ElementB, cute::tuple<LayoutB, LayoutSFB>, kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static cudaError_t run(const BlockwiseKernelParams& p, cudaStream_t stream) {
    using namespace cute;
    const int M = static_cast<int>(p.M), N = static_cast<int>(p.N), K = static_cast<int>(p.K);
    const int kb = (K + 127) / 128;
    const auto* x = reinterpret_cast<const ElementA*>(p.a);
    const auto* w = reinterpret_cast<const ElementB*>(p.b);
    typename Kernel::StrideA sa = make_stride(p.lda, _1{}, int64_t(0));
    typename Kernel::StrideB sb = make_stride(p.ldb, _1{}, int64_t(0));
    typename Kernel::StrideD sd = make_stride(p.ldd, _1{}, int64_t(0));
    // The scale layouts with the glue's leading dimensions. SFA spans sfa_ld rows (a multiple of
    // 4: TMA's 16-byte rule), of which the first M are used.
    const int lda_s = static_cast<int>(p.sfa_ld), ldb_s = static_cast<int>(p.sfb_ld);
    const LayoutSFA lsfa = make_layout(make_shape(make_shape(_1{}, lda_s), make_shape(Int<128>{}, kb), 1),
                                       make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, lda_s), lda_s * kb));
    const LayoutSFB lsfb =
        make_layout(make_shape(make_shape(Int<128>{}, ldb_s), make_shape(Int<128>{}, kb), 1),
                    make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, ldb_s), ldb_s * kb));

    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  {x, sa, w, sb, p.sfa, lsfa, p.sfb, lsfb},
                                  {{}, nullptr, sd, static_cast<ElementD*>(p.out), sd}};
    args.scheduler.max_swizzle_size = cutlass_swizzle(p.tuning, p.swizzle);
    return run_cutlass_universal<Gemm>(args, stream);
  }
};

}  // namespace mslk::gemm::detail

// Defines fp8_blockwise_cutlass<ID> for row ID of the config table.
#define MSLK_FP8_BLOCKWISE_INSTANTIATE(ID)                                                                 \
  namespace mslk::gemm {                                                                                   \
  template <>                                                                                              \
  cudaError_t fp8_blockwise_cutlass<ID>(const BlockwiseKernelParams& p, cudaStream_t s) {                  \
    constexpr TileConfig c = kFp8BlockwiseConfigs[ID];                                                     \
    return detail::CutlassBlockwise<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative>::run( \
        p, s);                                                                                             \
  }                                                                                                        \
  }
