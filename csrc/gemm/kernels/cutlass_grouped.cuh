// The one CUTLASS 3.x sm90 ptr-array grouped GEMM layer. A family (BF16 forward / dgrad, BF16
// wgrad, FP8 rowwise grouped) is a small policy; this layer owns the schedule choice, the
// collective builders, the arguments, the run sequence and the instantiation macro.
//
// No host sync: G is known on the host, so every per-group array the kernel reads (problem
// shapes, operand pointers, strides, scale pointers) is sized on the host and filled on the
// device by the policy's setup. CUTLASS gets no host copy of the problem shapes, so the call
// is CUDA-graph safe. A group with no rows gets a shape the group tile scheduler gives no
// tiles, so its TMA descriptors are never re-targeted.
//
// A policy supplies:
//   Params; ElementA / B / C / D, LayoutA / B / D, kAlignAB, kAlignD, kScales (per-group scale
//   pointer arrays); template <class TileShape> using Fusion (void: the builder's linear
//   combination); epilogue<Layer>(args, arr) (the epilogue's thread arguments and C operand);
//   sm_count(p, sms); setup_blocks(p, sms); setup(p, arr) (device: the per-group puts and any
//   zeroing); after_setup<Layer>(p, arr, stream) (an extra launch, or cudaSuccess).
// Optionally Mainloop<kCooperative, kFast>: its own StrideA / StrideB (the builder's operand
// layout types), Schedule, and set(args.mainloop, arr) for its extra mainloop arguments (the
// block-scaled FP8 family's per-group scale pointers). Params with a `raster` member pick the tile
// walk (2: along N first, else along M first); `tuning.swizzle` sets the walk's swizzle.
//
// The swizzle is set in the kernel params after initialize: CUTLASS derives it from the host
// problem shapes, which this layer never gives it, so it would always be 1. A swizzle s pads each
// group's tile grid to multiples of s (the padding tiles run on zero-filled operands and store
// nothing), so it pays only where groups span many tiles each way.
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
#include <type_traits>

#include "common/device_attrs.h"
#include "gemm/kernels/config_table.h"
#include "gemm/kernels/cutlass_swizzle.h"
#include "gemm/kernels/grouped_setup.cuh"

namespace mslk::gemm::detail {

// Cooperative (two consumer warp groups on one tile) or ping-pong; FP8 fast accumulation or the
// builder's promoted float32 accumulator.
template <bool kCooperative, bool kFast>
struct GroupedSchedule {
  using Mainloop = cute::conditional_t<
      kCooperative,
      cute::conditional_t<kFast, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>,
      cute::conditional_t<kFast, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>>;
  using Epilogue = cute::conditional_t<kCooperative, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                       cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
};

// The mainloop's operand layout types and schedule: the policy's Mainloop when it has one.
template <class Policy, bool kCooperative, bool kFast, class = void>
struct GroupedMainloop {
  using StrideA = typename Policy::LayoutA*;
  using StrideB = typename Policy::LayoutB*;
  using Schedule = typename GroupedSchedule<kCooperative, kFast>::Mainloop;
  static constexpr bool kCustom = false;
};
template <class Policy, bool kCooperative, bool kFast>
struct GroupedMainloop<Policy, kCooperative, kFast,
                       std::void_t<typename Policy::template Mainloop<kCooperative, kFast>::Schedule>>
    : Policy::template Mainloop<kCooperative, kFast> {
  static constexpr bool kCustom = true;
};

// The collective epilogue, with the builder's default fusion when Fusion is void.
template <class TileShape, class ClusterShape, class EC, class LD, int kAlign, class ED, class Schedule, class Fusion>
struct GroupedEpilogue {
  using type = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, EC, LD*, kAlign, ED, LD*, kAlign, Schedule,
      Fusion>::CollectiveOp;
};
template <class TileShape, class ClusterShape, class EC, class LD, int kAlign, class ED, class Schedule>
struct GroupedEpilogue<TileShape, ClusterShape, EC, LD, kAlign, ED, Schedule, void> {
  using type = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, EC, LD*, kAlign, ED, LD*, kAlign,
      Schedule>::CollectiveOp;
};

template <class P, class = void>
struct HasRaster : std::false_type {};
template <class P>
struct HasRaster<P, std::void_t<decltype(std::declval<const P&>().raster)>> : std::true_type {};

template <class Policy, class Arrays>
__global__ void __launch_bounds__(kGroupSetupThreads) grouped_setup_kernel(const typename Policy::Params p, Arrays arr) {
  Policy::setup(p, arr);
}

template <class Policy, int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct CutlassGrouped {
  using Params = typename Policy::Params;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  using ElementA = typename Policy::ElementA;
  using ElementB = typename Policy::ElementB;
  using ElementD = typename Policy::ElementD;
  using LayoutD = typename Policy::LayoutD;
  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using Schedule = GroupedSchedule<kCooperative, kFast>;
  using Main = GroupedMainloop<Policy, kCooperative, kFast>;

  using CollectiveEpilogue =
      typename GroupedEpilogue<TileShape, ClusterShape, typename Policy::ElementC, LayoutD, Policy::kAlignD, ElementD,
                               typename Schedule::Epilogue, typename Policy::template Fusion<TileShape>>::type;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, typename Main::StrideA, Policy::kAlignAB,
      ElementB, typename Main::StrideB, Policy::kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Main::Schedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideC = typename Kernel::InternalStrideC;
  using StrideD = typename Kernel::InternalStrideD;
  using Arrays = GroupArrays<Shape, ElementA, ElementB, ElementD, StrideA, StrideB, StrideD>;

  static typename Gemm::Arguments make_args(const Params& p, int G, const Arrays& arr, int device, int sm_count) {
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {G, arr.shapes, nullptr};  // no host copy of the shapes: they live on the device
    args.mainloop.ptr_A = arr.a;
    args.mainloop.dA = arr.sa;
    args.mainloop.ptr_B = arr.b;
    args.mainloop.dB = arr.sb;
    if constexpr (Main::kCustom) Main::set(args.mainloop, arr);
    Policy::template epilogue<CutlassGrouped>(args, arr);
    args.epilogue.ptr_D = arr.d;
    args.epilogue.dD = arr.sd;
    args.hw_info.device_id = device;
    args.hw_info.sm_count = sm_count;
    using RasterOption = decltype(args.scheduler.raster_order);
    int raster = 0;
    if constexpr (HasRaster<Params>::value) raster = p.raster;
    args.scheduler.raster_order = raster == 2 ? RasterOption::AlongN : RasterOption::AlongM;
    return args;
  }

  // SM count, host-only probe (null per-group arrays: nothing is read), can_implement, the one
  // scratch allocation, the setup launch (and the policy's extra one), then the GEMM.
  static cudaError_t run(const Params& p, cudaStream_t stream) {
    const int G = static_cast<int>(p.G);
    int device = 0, sms = 0;
    cudaError_t e = mslk::cuda::current_device_sms(&device, &sms);  // read once per device
    if (e != cudaSuccess) return e;
    const int sm_count = Policy::sm_count(p, sms);
    const Arrays none{};
    auto probe = make_args(p, G, none, device, sm_count);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    Arrays arr;
    if ((e = arr.allocate(G, Gemm::get_workspace_size(probe), Policy::kScales, stream)) != cudaSuccess) return e;
    grouped_setup_kernel<Policy, Arrays><<<Policy::setup_blocks(p, sms), kGroupSetupThreads, 0, stream>>>(p, arr);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = Policy::template after_setup<CutlassGrouped>(p, arr, stream);
    return run_after_setup<Gemm>(e, make_args(p, G, arr, device, sm_count), cutlass_swizzle(p.tuning), arr.workspace,
                                 arr.buf, stream);
  }
};

// Blocks of a setup launch over groups given one by one (one thread a group).
inline unsigned group_blocks(int64_t G) {
  return static_cast<unsigned>((G + kGroupSetupThreads - 1) / kGroupSetupThreads);
}

}  // namespace mslk::gemm::detail

// Defines FN<ID> (a family's entry for row ID of TABLE): ROW<tile, cluster, schedule, fast_accum>
// picks the family's variant for the call and runs it.
#define MSLK_CUTLASS_GROUPED_INSTANTIATE(FN, PARAMS, TABLE, ROW, ID)                                             \
  namespace mslk::gemm {                                                                                         \
  template <>                                                                                                    \
  cudaError_t FN<ID>(const PARAMS& p, cudaStream_t s) {                                                          \
    constexpr TileConfig c = TABLE[ID];                                                                          \
    return detail::ROW<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative, c.fast_accum>::run( \
        p, s);                                                                                                   \
  }                                                                                                              \
  }
