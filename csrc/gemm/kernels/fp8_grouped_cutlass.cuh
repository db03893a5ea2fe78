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

#include <cstdint>

#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_grouped_configs.h"

namespace mslk::gemm::detail {

constexpr int kFp8SetupThreads = 256;

// m_g of the contract: a count, or the difference of cumulative ends; negatives count as 0.
__device__ __forceinline__ long long fp8_group_rows(const Fp8GroupedParams& p, int64_t g) {
  auto at = [&](int64_t i) -> long long {
    return p.sizes_int64 ? static_cast<long long>(static_cast<const int64_t*>(p.sizes)[i])
                         : static_cast<long long>(static_cast<const int32_t*>(p.sizes)[i]);
  };
  const long long m = p.sizes_are_ends ? at(g) - (g > 0 ? at(g - 1) : 0) : at(g);
  return m < 0 ? 0 : m;
}

// Per-group argument arrays of the CUTLASS call, all device memory.
template <class Shape, class StrideA, class StrideB, class StrideD>
struct Fp8GroupArrays {
  Shape* shapes;
  const cutlass::float_e4m3_t** a;
  const cutlass::float_e4m3_t** b;
  cutlass::bfloat16_t** d;
  const float** xs;
  const float** ws;
  StrideA* sa;
  StrideB* sb;
  StrideD* sd;
};

// Every block scans the G sizes (kFp8SetupThreads per step, with a carry); block 0 writes the
// per-group arguments; all blocks zero the rows [min(sum, total_M), total_M) of out.
template <class Shape, class StrideA, class StrideB, class StrideD>
__global__ void __launch_bounds__(kFp8SetupThreads)
    fp8_grouped_setup_kernel(const Fp8GroupedParams p, Fp8GroupArrays<Shape, StrideA, StrideB, StrideD> arr) {
  __shared__ long long scan[kFp8SetupThreads];
  const int tid = static_cast<int>(threadIdx.x);
  if (p.descs != nullptr) {  // groups given one by one: copy them into CUTLASS's arrays
    for (int64_t g = static_cast<int64_t>(blockIdx.x) * kFp8SetupThreads + tid; g < p.G;
         g += static_cast<int64_t>(gridDim.x) * kFp8SetupThreads) {
      const Fp8GroupDesc dg = p.descs[g];
      arr.shapes[g] = Shape(static_cast<int>(dg.m), static_cast<int>(dg.n), static_cast<int>(dg.k));
      arr.a[g] = reinterpret_cast<const cutlass::float_e4m3_t*>(dg.a);
      arr.b[g] = reinterpret_cast<const cutlass::float_e4m3_t*>(dg.b);
      arr.d[g] = static_cast<cutlass::bfloat16_t*>(dg.d);
      arr.xs[g] = dg.xs;
      arr.ws[g] = dg.ws;
      StrideA sa{};
      cute::get<0>(sa) = dg.lda;
      arr.sa[g] = sa;
      StrideB sb{};
      cute::get<0>(sb) = dg.ldb;
      arr.sb[g] = sb;
      StrideD sd{};
      cute::get<0>(sd) = dg.ldd;
      arr.sd[g] = sd;
    }
    return;
  }
  const auto* x = reinterpret_cast<const cutlass::float_e4m3_t*>(p.x);
  const auto* w = reinterpret_cast<const cutlass::float_e4m3_t*>(p.w);
  auto* out = static_cast<cutlass::bfloat16_t*>(p.out);
  const long long total = p.total_M;
  long long carry = 0;
  for (int64_t base = 0; base < p.G; base += kFp8SetupThreads) {
    const int64_t g = base + tid;
    const long long m = g < p.G ? fp8_group_rows(p, g) : 0;
    scan[tid] = m;
    __syncthreads();
    for (int off = 1; off < kFp8SetupThreads; off <<= 1) {  // inclusive scan
      const long long v = tid >= off ? scan[tid - off] : 0;
      __syncthreads();
      scan[tid] += v;
      __syncthreads();
    }
    const long long incl = carry + scan[tid];
    if (blockIdx.x == 0 && g < p.G) {
      const long long start = min(incl - m, total), end = min(incl, total);
      arr.shapes[g] = Shape(static_cast<int>(end - start), static_cast<int>(p.N), static_cast<int>(p.K));
      arr.a[g] = x + start * p.ldx;
      arr.b[g] = w + g * p.w_gs;
      arr.d[g] = out + start * p.N;
      arr.xs[g] = p.x_scale + start;
      arr.ws[g] = p.w_scale + g * p.N;
      StrideA sa{};
      cute::get<0>(sa) = p.ldx;
      arr.sa[g] = sa;
      StrideB sb{};
      cute::get<0>(sb) = p.ldw;
      arr.sb[g] = sb;
      StrideD sd{};
      cute::get<0>(sd) = p.N;
      arr.sd[g] = sd;
    }
    carry += scan[kFp8SetupThreads - 1];
    __syncthreads();  // scan[] is rewritten by the next step
  }
  const long long valid = min(carry, total);
  const long long n16 = (total - valid) * p.N / 8;  // N % 8 == 0: whole 16-byte vectors
  uint4* tail = reinterpret_cast<uint4*>(out + valid * p.N);
  for (long long i = static_cast<long long>(blockIdx.x) * kFp8SetupThreads + tid; i < n16;
       i += static_cast<long long>(gridDim.x) * kFp8SetupThreads)
    tail[i] = make_uint4(0u, 0u, 0u, 0u);
}

inline int64_t fp8_align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

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
    return args;
  }

  static cudaError_t run(const Fp8GroupedParams& p, cudaStream_t stream) {
    const int G = static_cast<int>(p.G);
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return e;

    // Host-only checks and sizes first (null per-group arrays: nothing is read here).
    const Arrays none{};
    auto probe = make_args(G, none, device, sms);
    if (Gemm::can_implement(probe) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    const size_t ws_bytes = Gemm::get_workspace_size(probe);

    // One stream-ordered scratch allocation: the per-group arrays, then CUTLASS's workspace.
    constexpr int64_t kA = 128;
    int64_t off = 0;
    auto take = [&](int64_t bytes) {
      const int64_t at = off;
      off = fp8_align_up(off + bytes, kA);
      return at;
    };
    const int64_t o_shapes = take(G * int64_t(sizeof(Shape)));
    const int64_t o_a = take(G * int64_t(sizeof(void*))), o_b = take(G * int64_t(sizeof(void*)));
    const int64_t o_d = take(G * int64_t(sizeof(void*))), o_xs = take(G * int64_t(sizeof(void*)));
    const int64_t o_ws = take(G * int64_t(sizeof(void*)));
    const int64_t o_sa = take(G * int64_t(sizeof(StrideA))), o_sb = take(G * int64_t(sizeof(StrideB)));
    const int64_t o_sd = take(G * int64_t(sizeof(StrideD)));
    const int64_t o_work = take(static_cast<int64_t>(ws_bytes));
    char* buf = nullptr;
    if ((e = cudaMallocAsync(reinterpret_cast<void**>(&buf), static_cast<size_t>(off), stream)) != cudaSuccess)
      return e;
    Arrays arr;
    arr.shapes = reinterpret_cast<Shape*>(buf + o_shapes);
    arr.a = reinterpret_cast<const ElementAB**>(buf + o_a);
    arr.b = reinterpret_cast<const ElementAB**>(buf + o_b);
    arr.d = reinterpret_cast<ElementD**>(buf + o_d);
    arr.xs = reinterpret_cast<const float**>(buf + o_xs);
    arr.ws = reinterpret_cast<const float**>(buf + o_ws);
    arr.sa = reinterpret_cast<StrideA*>(buf + o_sa);
    arr.sb = reinterpret_cast<StrideB*>(buf + o_sb);
    arr.sd = reinterpret_cast<StrideD*>(buf + o_sd);
    void* workspace = ws_bytes > 0 ? static_cast<void*>(buf + o_work) : nullptr;

    // Enough blocks to zero a large tail quickly; otherwise every block only scans G sizes.
    const long long tail16 = p.descs != nullptr ? 0 : p.total_M * p.N / 8;
    const long long want = (tail16 + kFp8SetupThreads * 8 - 1) / (kFp8SetupThreads * 8);
    long long nb = want < 1 ? 1 : (want > 2 * sms ? 2 * sms : want);
    if (p.descs != nullptr) nb = (p.G + kFp8SetupThreads - 1) / kFp8SetupThreads;
    const unsigned blocks = static_cast<unsigned>(nb);
    fp8_grouped_setup_kernel<Shape, StrideA, StrideB, StrideD><<<blocks, kFp8SetupThreads, 0, stream>>>(p, arr);
    e = cudaGetLastError();
    if (e == cudaSuccess) {
      auto args = make_args(G, arr, device, sms);
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
