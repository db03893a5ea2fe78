// CUTLASS 3.x sm90 ptr-array grouped GEMM for kForward and kDgrad of bf16_grouped_params.h (the
// stacked forms: X [total_M, K], W [G, N, K], M_sizes [G] -> out [total_M, N]; and dY [total_M, N],
// W [G, N, K] -> dX [total_M, K], where W[g] is the N-major B operand), one TU per config row
// holding both (see bf16_grouped_configs.h).
//
// No host sync: G is known on the host, so every per-group array the kernel reads (problem
// shapes, A/B/D pointers, strides) is sized on the host and *filled on the device* by
// bf16_grouped_setup_kernel, which prefix-sums M_sizes. CUTLASS gets no host copy of the
// problem shapes (GroupProblemShape's host pointer is null), so the whole call is CUDA-graph
// safe. An empty group gets problem shape (0, N, K): the group tile scheduler gives it zero
// tiles (its per-group tile count is ceil(0 / tile_m) * ... = 0 and it walks past it), and its
// TMA descriptors are never re-targeted because no work tile names it. The same setup launch
// zero-fills the rows past sum(M_sizes) (the contract's tail), which the GEMM never writes.
//
// Mainloop: the collective builder's KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong}
// (TMA + wgmma, float32 accumulation); epilogue: PtrArrayTmaWarpSpecialized* with the default
// linear combination at alpha = 1, beta = 0 and no C operand (ElementC = void).
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
#include "gemm/kernels/bf16_grouped_configs.h"
#include "gemm/kernels/grouped_setup.cuh"

namespace mslk::gemm::detail {

__device__ __forceinline__ long long bf16_grouped_size(const Bf16GroupedParams& p, int64_t g) {
  const long long m = p.m_sizes_int64 ? static_cast<const int64_t*>(p.m_sizes)[g]
                                      : static_cast<long long>(static_cast<const int32_t*>(p.m_sizes)[g]);
  return m < 0 ? 0 : m;  // the contract: a negative size counts as 0
}

// Every block prefix-sums the G sizes (scan_group_rows of grouped_setup.cuh; G is
// small next to the GEMM); block 0 writes the per-group arguments, and all blocks together
// zero rows [min(sum, total_M), total_M) of out. Group g owns rows
// [min(S_g, total_M), min(S_g + m_g, total_M)) with S_g the sum of the (non-negative) earlier
// sizes: the same cut at total_M as the SIMT kernel.
template <class Shape, class ElementAB, class ElementD, class StrideA, class StrideB, class StrideD>
__global__ void __launch_bounds__(kGroupSetupThreads)
    bf16_grouped_setup_kernel(const Bf16GroupedParams p, Shape* shapes, const ElementAB** a_ptrs,
                              const ElementAB** b_ptrs, ElementD** d_ptrs, StrideA* a_strides, StrideB* b_strides,
                              StrideD* d_strides) {
  if (p.descs != nullptr) {  // the list forms: groups given one by one
    for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < p.G;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const Bf16GroupDesc dg = p.descs[g];
      shapes[g] = Shape(static_cast<int>(dg.m), static_cast<int>(dg.n), static_cast<int>(dg.k));
      a_ptrs[g] = static_cast<const ElementAB*>(dg.a);
      b_ptrs[g] = static_cast<const ElementAB*>(dg.b);
      d_ptrs[g] = static_cast<ElementD*>(dg.d);
      StrideA sa{};
      cute::get<0>(sa) = dg.lda;
      a_strides[g] = sa;
      StrideB sb{};
      set_leading(sb, dg.ldb);
      b_strides[g] = sb;
      StrideD sd{};
      cute::get<0>(sd) = dg.ldd;
      d_strides[g] = sd;
    }
    return;
  }
  const auto* x = static_cast<const ElementAB*>(p.x);
  const auto* w = static_cast<const ElementAB*>(p.w);
  auto* out = static_cast<ElementD*>(p.out);
  // kDgrad: dX_g [m, K] = dY_g [m, N] @ W[g] [N, K]: GEMM n = K, k = N, out rows of K columns.
  const bool dgrad = p.mode == Bf16GroupedMode::kDgrad;
  const int64_t ncols = dgrad ? p.K : p.N, kdim = dgrad ? p.N : p.K;
  const long long sum = scan_group_rows(
      p.G, p.total_M, [&](int64_t g) { return bf16_grouped_size(p, g); },
      [&](int64_t g, long long start, long long end) {
        if (blockIdx.x != 0) return;
        shapes[g] = Shape(static_cast<int>(end - start), static_cast<int>(ncols), static_cast<int>(kdim));
        a_ptrs[g] = x + start * p.ldx;
        b_ptrs[g] = w + g * p.w_gs;
        d_ptrs[g] = out + start * ncols;
        StrideA sa{};
        cute::get<0>(sa) = p.ldx;
        a_strides[g] = sa;
        StrideB sb{};
        set_leading(sb, p.ldw);  // K-major B (forward): stride of n; N-major B (dgrad): stride of k
        b_strides[g] = sb;
        StrideD sd{};
        cute::get<0>(sd) = ncols;
        d_strides[g] = sd;
      });
  zero_tail_rows(out, min(sum, static_cast<long long>(p.total_M)), p.total_M, ncols);
}

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kDgrad>
struct CutlassBf16Grouped {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  using ElementAB = cutlass::bfloat16_t;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;     // X rows [M_g, K], K contiguous
  // forward: W[g] [N, K] is B (n, k) with k contiguous; dgrad: W[g] is B (k = its N, n = its K)
  // with n contiguous (bf16 wgmma reads an N-major B from shared memory)
  using LayoutB = cute::conditional_t<kDgrad, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using LayoutD = cutlass::layout::RowMajor;     // out rows [M_g, N]
  static constexpr int kAlign = 8;               // elements: 16 bytes, TMA's rule

  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<kCooperative, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlign, ElementD, LayoutD*,
      kAlign, EpilogueSchedule>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA*, kAlign, ElementAB, LayoutB*, kAlign,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;

  static typename Gemm::Arguments make_args(int G, Shape* shapes, const ElementAB** a, StrideA* sa,
                                            const ElementAB** b, StrideB* sb, ElementD** d, StrideD* sd,
                                            int device, int sm_count) {
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {G, shapes, nullptr};  // no host copy of the shapes: they live on the device
    args.mainloop.ptr_A = a;
    args.mainloop.dA = sa;
    args.mainloop.ptr_B = b;
    args.mainloop.dB = sb;
    args.epilogue.thread = {};  // alpha = 1, beta = 0
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
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

    // Host-only checks and sizes first (null per-group arrays: nothing is read here).
    auto probe = make_args(G, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, device, sm_count);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    GroupArrays<Shape, ElementAB, ElementAB, ElementD, StrideA, StrideB, StrideD> arr;
    if ((e = arr.allocate(G, Gemm::get_workspace_size(probe), false, stream)) != cudaSuccess) return e;

    const unsigned blocks = p.descs != nullptr
                                ? static_cast<unsigned>((p.G + kGroupSetupThreads - 1) / kGroupSetupThreads)
                                : setup_blocks(p.total_M * (kDgrad ? p.K : p.N) / 8, sms);
    bf16_grouped_setup_kernel<Shape, ElementAB, ElementD, StrideA, StrideB, StrideD>
        <<<blocks, kGroupSetupThreads, 0, stream>>>(p, arr.shapes, arr.a, arr.b, arr.d, arr.sa, arr.sb, arr.sd);
    return run_after_setup<Gemm>(
        cudaGetLastError(),
        make_args(G, arr.shapes, arr.a, arr.sa, arr.b, arr.sb, arr.d, arr.sd, device, sm_count), arr.workspace,
        arr.buf, stream);
  }
};

}  // namespace mslk::gemm::detail

// Defines bf16_grouped_cutlass<ID> for row ID of the config table.
#define MSLK_BF16_GROUPED_INSTANTIATE(ID)                                                              \
  namespace mslk::gemm {                                                                               \
  template <>                                                                                          \
  cudaError_t bf16_grouped_cutlass<ID>(const Bf16GroupedParams& p, cudaStream_t s) {                   \
    constexpr Bf16GroupedConfig c = kBf16GroupedConfigs[ID];                                           \
    if (p.mode == Bf16GroupedMode::kDgrad)                                                            \
      return detail::CutlassBf16Grouped<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,        \
                                        c.cooperative, true>::run(p, s);                               \
    return detail::CutlassBf16Grouped<c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,          \
                                      c.cooperative, false>::run(p, s);                                \
  }                                                                                                    \
  }
