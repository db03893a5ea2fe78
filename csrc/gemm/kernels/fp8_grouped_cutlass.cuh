// CUTLASS 3.x sm90 ptr-array grouped GEMM for the device-side grouped FP8 contract
// (gemm/fp8_grouped_params.h), one instantiation per generated TU (see fp8_grouped_configs.h).
//
// No host sync: G is known on the host, so every per-group array (problem shapes; A, B, D and
// scale pointers; strides) is sized on the host and filled on the device by
// fp8_grouped_setup_kernel from the group sizes. CUTLASS gets no host copy of the problem
// shapes, so the call is CUDA-graph safe. An empty group gets shape (0, N, K): the grouped tile
// scheduler gives it no tiles. The setup launch also zeroes the rows past the last group.
//
// Mainloop: KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong}[FP8FastAccum] (TMA + wgmma;
// without fast accumulation the builder's FP8 mainloop promotes the accumulator to float32
// registers every few k-blocks). Epilogue: an EVT D = bf16(x_scale[m] * (w_scale[n] * acc)) whose
// two broadcasts read per-group pointer arrays (CUTLASS's array-of-pointers broadcasts).
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <algorithm>
#include <cstdint>

#include "gemm/kernels/cutlass_swizzle.h"
#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_grouped_configs.h"
#include "gemm/kernels/grouped_setup.cuh"

namespace mslk::gemm::detail {

// m_g of the contract: a count, or the difference of cumulative ends; negatives count as 0.
__device__ __forceinline__ long long fp8_group_rows(const Fp8GroupedParams& p, int64_t g) {
  auto at = [&](int64_t i) -> long long {
    return p.sizes_int64 ? static_cast<long long>(static_cast<const int64_t*>(p.sizes)[i])
                         : static_cast<long long>(static_cast<const int32_t*>(p.sizes)[i]);
  };
  const long long m = p.sizes_are_ends ? at(g) - (g > 0 ? at(g - 1) : 0) : at(g);
  return m < 0 ? 0 : m;
}

template <class Shape, class StrideA, class StrideB, class StrideD>
using Fp8GroupArrays = GroupArrays<Shape, cutlass::float_e4m3_t, cutlass::float_e4m3_t, cutlass::bfloat16_t, StrideA,
                                   StrideB, StrideD>;

// Groups known on the host (descriptors): copied into the arrays. Otherwise every block scans
// the G sizes (scan_group_rows); block 0 writes the per-group arguments and all blocks zero the
// rows [min(sum, total_M), total_M) of out.
template <class Shape, class StrideA, class StrideB, class StrideD>
__global__ void __launch_bounds__(kGroupSetupThreads)
    fp8_grouped_setup_kernel(const Fp8GroupedParams p, Fp8GroupArrays<Shape, StrideA, StrideB, StrideD> arr) {
  auto put = [&](int64_t g, const uint8_t* a, const uint8_t* b, void* d, const float* xs, const float* ws,
                 int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd) {
    arr.shapes[g] = Shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
    arr.a[g] = reinterpret_cast<const cutlass::float_e4m3_t*>(a);
    arr.b[g] = reinterpret_cast<const cutlass::float_e4m3_t*>(b);
    arr.d[g] = static_cast<cutlass::bfloat16_t*>(d);
    arr.xs[g] = xs;
    arr.ws[g] = ws;
    StrideA sa{};
    cute::get<0>(sa) = lda;
    arr.sa[g] = sa;
    StrideB sb{};
    cute::get<0>(sb) = ldb;
    arr.sb[g] = sb;
    StrideD sd{};
    cute::get<0>(sd) = ldd;
    arr.sd[g] = sd;
  };
  if (p.descs != nullptr) {
    for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < p.G;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const Fp8GroupDesc dg = p.descs[g];
      put(g, dg.a, dg.b, dg.d, dg.xs, dg.ws, dg.m, dg.n, dg.k, dg.lda, dg.ldb, dg.ldd);
    }
    return;
  }
  auto* out = static_cast<cutlass::bfloat16_t*>(p.out);
  if (p.fixed_rows > 0) {  // _dynamic: fixed row blocks, rows past each group's count are zero
    const int64_t F = p.fixed_rows;
    for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < p.G;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const long long m = min(fp8_group_rows(p, g), static_cast<long long>(F));
      const int64_t start = g * F;
      put(g, p.x + start * p.ldx, p.w + g * p.w_gs, out + start * p.N, p.x_scale + start, p.w_scale + g * p.N, m,
          p.N, p.K, p.ldx, p.ldw, p.N);
    }
    const int64_t v_row = p.N / 8;  // 16-byte vectors a row (N % 8 == 0)
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total_M * v_row;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
      const int64_t row = i / v_row, g = row / F;
      if (row - g * F >= min(fp8_group_rows(p, g), static_cast<long long>(F)))
        reinterpret_cast<uint4*>(out)[i] = make_uint4(0u, 0u, 0u, 0u);
    }
    return;
  }
  const long long sum = scan_group_rows(
      p.G, p.total_M, [&](int64_t g) { return fp8_group_rows(p, g); },
      [&](int64_t g, long long start, long long end) {
        if (blockIdx.x == 0)
          put(g, p.x + start * p.ldx, p.w + g * p.w_gs, out + start * p.N, p.x_scale + start, p.w_scale + g * p.N,
              end - start, p.N, p.K, p.ldx, p.ldw, p.N);
      });
  zero_tail_rows(out, min(sum, static_cast<long long>(p.total_M)), p.total_M, p.N);
}

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct CutlassFp8Grouped {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  using ElementAB = cutlass::float_e4m3_t;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;     // x rows [m_g, K], K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // w[g] [N, K], K contiguous
  using LayoutD = cutlass::layout::RowMajor;     // out rows [m_g, N]
  static constexpr int kAlignAB = 16;            // elements: 16 bytes
  static constexpr int kAlignD = 8;

  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<
      kCooperative,
      cute::conditional_t<kFast, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>,
      cute::conditional_t<kFast, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;

  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  // Array-of-pointers broadcasts: the group's pointer is taken per tile (its L index), so the
  // batch stride is 0. x_scale rows of a group start anywhere (alignment 1); w_scale per group
  // is 16-byte aligned (N % 4 == 0 and an aligned base are checked by the dispatcher).
  using StrideCol = cute::Stride<cute::_1, cute::_0, int64_t>;
  using StrideRow = cute::Stride<cute::_0, cute::_1, int64_t>;
  using XScale = cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float*, float, StrideCol, 1>;
  using WScale = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float*, float, StrideRow, 4>;
  using Accum = cutlass::epilogue::fusion::Sm90AccFetch;
  using Mul = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>;
  using ScaledAcc = cutlass::epilogue::fusion::Sm90EVT<Mul, WScale, Accum>;
  using MulOut = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElementD, float, kRound>;
  using Epilogue = cutlass::epilogue::fusion::Sm90EVT<MulOut, XScale, ScaledAcc>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, ElementD, LayoutD*,
      kAlignD, EpilogueSchedule, Epilogue>::CollectiveOp;
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
  using StrideD = typename Kernel::InternalStrideD;
  using Arrays = Fp8GroupArrays<Shape, StrideA, StrideB, StrideD>;

  static typename Gemm::Arguments make_args(int G, const Arrays& arr, int device, int sm_count) {
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {G, arr.shapes, nullptr};  // the shapes live on the device only
    args.mainloop.ptr_A = arr.a;
    args.mainloop.dA = arr.sa;
    args.mainloop.ptr_B = arr.b;
    args.mainloop.dB = arr.sb;
    args.epilogue.thread = {
        {arr.xs, 0.f, StrideCol{cute::_1{}, cute::_0{}, int64_t(0)}},                // x_scale of the group
        {{arr.ws, 0.f, StrideRow{cute::_0{}, cute::_1{}, int64_t(0)}}, {}, {}},      // w_scale of the group * acc
        {}};                                                                         // product -> bf16
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
    args.epilogue.ptr_D = arr.d;
    args.epilogue.dD = arr.sd;
    args.hw_info.device_id = device;
    args.hw_info.sm_count = sm_count;
    args.scheduler.max_swizzle_size = cutlass_swizzle(kDefaultSwizzle);
    return args;
  }

  static cudaError_t run(const Fp8GroupedParams& p, cudaStream_t stream) {
    const int G = static_cast<int>(p.G);
    int device = 0, sms = 0;
    cudaError_t e = device_sms(&device, &sms);
    if (e != cudaSuccess) return e;

    // Host-only checks and sizes first (null per-group arrays: nothing is read here).
    const Arrays none{};
    auto probe = make_args(G, none, device, sms);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    Arrays arr;
    if ((e = arr.allocate(G, Gemm::get_workspace_size(probe), true, stream)) != cudaSuccess) return e;

    const unsigned blocks = p.descs != nullptr
                                ? static_cast<unsigned>((p.G + kGroupSetupThreads - 1) / kGroupSetupThreads)
                                : std::max(setup_blocks(p.total_M * p.N / 8, sms),
                                           static_cast<unsigned>((p.G + kGroupSetupThreads - 1) / kGroupSetupThreads));
    fp8_grouped_setup_kernel<Shape, StrideA, StrideB, StrideD><<<blocks, kGroupSetupThreads, 0, stream>>>(p, arr);
    return run_after_setup<Gemm>(cudaGetLastError(), make_args(G, arr, device, sms), arr.workspace, arr.buf, stream);
  }
};

}  // namespace mslk::gemm::detail

// Defines fp8_grouped_cutlass<ID> for row ID of the config table.
#define MSLK_FP8_GROUPED_INSTANTIATE(ID)                                                                    \
  namespace mslk::gemm {                                                                                    \
  template <>                                                                                               \
  cudaError_t fp8_grouped_cutlass<ID>(const Fp8GroupedParams& p, cudaStream_t s) {                          \
    constexpr Fp8GroupedConfig c = kFp8GroupedConfigs[ID];                                                  \
    return detail::CutlassFp8Grouped<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.cooperative, \
                                     c.fast_accum>::run(p, s);                                              \
  }                                                                                                         \
  }
