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

#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped_configs.h"

namespace mslk::gemm::detail {

constexpr int kSetupThreads = 256;

__device__ __forceinline__ long long bf16_grouped_size(const Bf16GroupedParams& p, int64_t g) {
  const long long m = p.m_sizes_int64 ? static_cast<const int64_t*>(p.m_sizes)[g]
                                      : static_cast<long long>(static_cast<const int32_t*>(p.m_sizes)[g]);
  return m < 0 ? 0 : m;  // the contract: a negative size counts as 0
}

// The one dynamic (leading-dimension) stride of a 2-D operand stride: mode 0 or mode 1, whichever
// is not the static unit stride.
template <class S>
__device__ __forceinline__ void set_leading(S& s, int64_t ld) {
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value)
    cute::get<1>(s) = ld;
  else
    cute::get<0>(s) = ld;
}

// Every block prefix-sums the G sizes (a block-wide scan, kSetupThreads groups per step; G is
// small next to the GEMM); block 0 writes the per-group arguments, and all blocks together
// zero rows [min(sum, total_M), total_M) of out. Group g owns rows
// [min(S_g, total_M), min(S_g + m_g, total_M)) with S_g the sum of the (non-negative) earlier
// sizes: the same cut at total_M as the SIMT kernel.
template <class Shape, class ElementAB, class ElementD, class StrideA, class StrideB, class StrideD>
__global__ void __launch_bounds__(kSetupThreads)
    bf16_grouped_setup_kernel(const Bf16GroupedParams p, Shape* shapes, const ElementAB** a_ptrs,
                              const ElementAB** b_ptrs, ElementD** d_ptrs, StrideA* a_strides, StrideB* b_strides,
                              StrideD* d_strides) {
  __shared__ long long scan[kSetupThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const auto* x = static_cast<const ElementAB*>(p.x);
  const auto* w = static_cast<const ElementAB*>(p.w);
  auto* out = static_cast<ElementD*>(p.out);
  // kDgrad: dX_g [m, K] = dY_g [m, N] @ W[g] [N, K]: GEMM n = K, k = N, out rows of K columns.
  const bool dgrad = p.mode == Bf16GroupedMode::kDgrad;
  const int64_t ncols = dgrad ? p.K : p.N, kdim = dgrad ? p.N : p.K;
  long long carry = 0;
  for (int64_t base = 0; base < p.G; base += kSetupThreads) {
    const int64_t g = base + tid;
    const long long m = g < p.G ? bf16_grouped_size(p, g) : 0;
    scan[tid] = m;
    __syncthreads();
    for (int off = 1; off < kSetupThreads; off <<= 1) {  // Hillis-Steele inclusive scan
      const long long v = tid >= off ? scan[tid - off] : 0;
      __syncthreads();
      scan[tid] += v;
      __syncthreads();
    }
    const long long incl = carry + scan[tid];
    if (blockIdx.x == 0 && g < p.G) {
      const long long start = min(incl - m, static_cast<long long>(p.total_M));
      const long long end = min(incl, static_cast<long long>(p.total_M));
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
    }
    carry += scan[kSetupThreads - 1];
    __syncthreads();  // scan[] is rewritten by the next step
  }
  // Tail rows: contiguous [valid * N, total_M * N) of out, 16-byte aligned (N % 8 == 0).
  const long long valid = min(carry, static_cast<long long>(p.total_M));
  const long long n16 = (p.total_M - valid) * ncols / 8;
  uint4* tail = reinterpret_cast<uint4*>(out + valid * ncols);
  for (long long i = static_cast<long long>(blockIdx.x) * kSetupThreads + tid; i < n16;
       i += static_cast<long long>(gridDim.x) * kSetupThreads) {
    tail[i] = make_uint4(0u, 0u, 0u, 0u);
  }
}

inline int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

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
    return args;
  }

  static cudaError_t run(const Bf16GroupedParams& p, cudaStream_t stream) {
    const int G = static_cast<int>(p.G);
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return e;
    const int sm_count = p.num_sms > 0 && p.num_sms < sms ? p.num_sms : sms;

    // Host-only checks and sizes first (null per-group arrays: nothing is read here).
    auto probe = make_args(G, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, device, sm_count);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    const size_t ws_bytes = Gemm::get_workspace_size(probe);

    // One scratch allocation (stream-ordered, graph-capturable): the per-group arrays, then
    // CUTLASS's workspace (its TMA descriptors).
    constexpr int64_t kA = 128;
    const int64_t off_shapes = 0;
    const int64_t off_a = align_up(off_shapes + G * int64_t(sizeof(Shape)), kA);
    const int64_t off_b = align_up(off_a + G * int64_t(sizeof(void*)), kA);
    const int64_t off_d = align_up(off_b + G * int64_t(sizeof(void*)), kA);
    const int64_t off_sa = align_up(off_d + G * int64_t(sizeof(void*)), kA);
    const int64_t off_sb = align_up(off_sa + G * int64_t(sizeof(StrideA)), kA);
    const int64_t off_sd = align_up(off_sb + G * int64_t(sizeof(StrideB)), kA);
    const int64_t off_ws = align_up(off_sd + G * int64_t(sizeof(StrideD)), kA);
    const int64_t total = off_ws + static_cast<int64_t>(ws_bytes);
    char* buf = nullptr;
    if ((e = cudaMallocAsync(reinterpret_cast<void**>(&buf), static_cast<size_t>(total), stream)) != cudaSuccess) {
      return e;
    }
    auto* shapes = reinterpret_cast<Shape*>(buf + off_shapes);
    auto* a = reinterpret_cast<const ElementAB**>(buf + off_a);
    auto* b = reinterpret_cast<const ElementAB**>(buf + off_b);
    auto* d = reinterpret_cast<ElementD**>(buf + off_d);
    auto* sa = reinterpret_cast<StrideA*>(buf + off_sa);
    auto* sb = reinterpret_cast<StrideB*>(buf + off_sb);
    auto* sd = reinterpret_cast<StrideD*>(buf + off_sd);
    void* workspace = ws_bytes > 0 ? static_cast<void*>(buf + off_ws) : nullptr;

    // Enough blocks to zero a large tail quickly; every block only scans G sizes otherwise.
    const long long tail16 = p.total_M * (kDgrad ? p.K : p.N) / 8;
    const long long want = (tail16 + kSetupThreads * 8 - 1) / (kSetupThreads * 8);
    const unsigned blocks = static_cast<unsigned>(want < 1 ? 1 : (want > 2 * sms ? 2 * sms : want));
    bf16_grouped_setup_kernel<Shape, ElementAB, ElementD, StrideA, StrideB, StrideD>
        <<<blocks, kSetupThreads, 0, stream>>>(p, shapes, a, b, d, sa, sb, sd);
    e = cudaGetLastError();

    if (e == cudaSuccess) {
      auto args = make_args(G, shapes, a, sa, b, sb, d, sd, device, sm_count);
      Gemm gemm;
      cutlass::Status st = gemm.initialize(args, workspace, stream);
      if (st == cutlass::Status::kSuccess) st = gemm.run(stream);
      e = cudaGetLastError();
      if (st != cutlass::Status::kSuccess && e == cudaSuccess) e = cudaErrorLaunchFailure;
    }
    const cudaError_t ef = cudaFreeAsync(buf, stream);
    return e != cudaSuccess ? e : ef;
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
