// The BF16 grouped weight gradient (kWgrad of bf16_grouped_params.h) on the grouped CUTLASS
// layer (cutlass_grouped.cuh): dW[g] [N, K] = dY_g^T @ X_g over the rows of group g,
// dY [total_M, N], X [total_M, K]. Per group: GEMM m = N, n = K, k = m_g, A = dY_g^T (M-major:
// n contiguous), B = X_g (N-major: k contiguous); bf16 wgmma reads both MN-major from shared
// memory. A group with no rows would run tiles with zero k-blocks (accumulators never written),
// so it gets no tiles (shape (0, K, 0)); a second small launch then zeroes its dW[g] unless the
// call accumulates into a float32 output (which stays as it was).
// Output variants: bf16 (round), float32 (store), float32 accumulated into (beta = 1, C = D).
#pragma once
#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_wgrad_configs.h"
#include "gemm/kernels/cutlass_grouped.cuh"

namespace mslk::gemm::detail {

enum class WgradOut { kBf16, kF32, kF32Accum };

// dW[g] = 0 for the groups the GEMM gave no tiles (one block per group).
template <class Shape, class ElementD>
__global__ void __launch_bounds__(256) bf16_wgrad_zero_empty_kernel(const Shape* shapes, ElementD* out, int64_t nk) {
  const int64_t g = blockIdx.x;
  if (cute::get<0>(shapes[g]) != 0) return;
  for (int64_t i = threadIdx.x; i < nk; i += blockDim.x) out[g * nk + i] = ElementD(0);
}

template <WgradOut kOut>
struct Bf16WgradPolicy {
  using Params = Bf16GroupedParams;
  using ElementA = cutlass::bfloat16_t;
  using ElementB = cutlass::bfloat16_t;
  using ElementD = cute::conditional_t<kOut == WgradOut::kBf16, cutlass::bfloat16_t, float>;
  using ElementC = cute::conditional_t<kOut == WgradOut::kF32Accum, float, void>;
  using LayoutA = cutlass::layout::ColumnMajor;  // dY_g^T (n, r): n contiguous
  using LayoutB = cutlass::layout::RowMajor;     // X_g (k, r): k contiguous
  using LayoutD = cutlass::layout::RowMajor;     // dW[g] [N, K]
  static constexpr int kAlignAB = 8;             // 16 bytes
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr bool kScales = false;
  template <class TileShape>
  using Fusion = void;

  template <class Layer, class Args, class Arrays>
  static void epilogue(Args& args, const Arrays& arr) {
    args.epilogue.thread.alpha = 1.f;
    if constexpr (kOut == WgradOut::kF32Accum) {
      args.epilogue.thread.beta = 1.f;  // D = acc + C with C = D: accumulate into the output
      args.epilogue.ptr_C = const_cast<const ElementD**>(arr.d);
      static_assert(sizeof(typename Layer::StrideC) == sizeof(typename Layer::StrideD), "C and D strides share one array");
      args.epilogue.dC = reinterpret_cast<typename Layer::StrideC*>(arr.sd);
    } else {
      args.epilogue.thread.beta = 0.f;
      args.epilogue.ptr_C = nullptr;
      args.epilogue.dC = nullptr;
    }
  }

  static int sm_count(const Params& p, int sms) { return p.num_sms > 0 && p.num_sms < sms ? p.num_sms : sms; }
  static unsigned setup_blocks(const Params&, int) { return 1; }

  template <class Arrays>
  __device__ static void setup(const Params& p, const Arrays& arr) {
    const auto* dy = static_cast<const ElementA*>(p.x);
    const auto* x = static_cast<const ElementB*>(p.w);
    auto* out = static_cast<ElementD*>(p.out);
    scan_group_rows(
        p.G, p.total_M, [&](int64_t g) { return max(size_at(p.m_sizes, p.m_sizes_int64, g), 0LL); },
        [&](int64_t g, long long start, long long end) {
          if (blockIdx.x != 0) return;
          const long long rows = end - start;
          // A (n, r): n contiguous, rows ldx apart; B (k, r): k contiguous, rows ldw apart
          arr.put(g, rows > 0 ? p.N : 0, p.K, rows > 0 ? rows : 0, dy + start * p.ldx, p.ldx, x + start * p.ldw,
                  p.ldw, out + g * p.N * p.K, p.K);
        });
  }

  template <class Layer, class Arrays>
  static cudaError_t after_setup(const Params& p, const Arrays& arr, cudaStream_t stream) {
    if constexpr (kOut == WgradOut::kF32Accum) return cudaSuccess;
    bf16_wgrad_zero_empty_kernel<typename Layer::Shape, ElementD>
        <<<static_cast<int>(p.G), 256, 0, stream>>>(arr.shapes, static_cast<ElementD*>(p.out), p.N * p.K);
    return cudaGetLastError();
  }
};

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct Bf16WgradRow {
  template <WgradOut kOut>
  using Layer = CutlassGrouped<Bf16WgradPolicy<kOut>, TM, TN, TK, CM, CN, kCooperative, kFast>;
  static cudaError_t run(const Bf16GroupedParams& p, cudaStream_t s) {
    if (!p.out_fp32) return Layer<WgradOut::kBf16>::run(p, s);
    if (p.accumulate) return Layer<WgradOut::kF32Accum>::run(p, s);
    return Layer<WgradOut::kF32>::run(p, s);
  }
};

}  // namespace mslk::gemm::detail

#define MSLK_BF16_WGRAD_INSTANTIATE(ID) \
  MSLK_CUTLASS_GROUPED_INSTANTIATE(bf16_wgrad_cutlass, Bf16GroupedParams, kBf16WgradConfigs, Bf16WgradRow, ID)
