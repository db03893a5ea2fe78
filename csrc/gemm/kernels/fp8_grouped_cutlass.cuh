// The device-side grouped FP8 rowwise GEMM (gemm/fp8_grouped_params.h) on the grouped CUTLASS
// layer (cutlass_grouped.cuh), one TU per row of fp8_grouped_configs.h. An empty group gets
// shape (0, N, K) (no tiles); the setup also zeroes the rows past the last group.
//
// Mainloop: without fast accumulation the builder's FP8 mainloop promotes the accumulator to
// float32 registers every few k-blocks. Epilogue: an EVT D = bf16(x_scale[m] * (w_scale[n] *
// acc)) whose two broadcasts read per-group pointer arrays (CUTLASS's array-of-pointers
// broadcasts).
#pragma once
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>

#include <algorithm>

#include "gemm/kernels/cutlass_grouped.cuh"
#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_grouped_configs.h"

namespace mslk::gemm::detail {

// Group g's scale vectors, from the row where its rows start.
__device__ __forceinline__ const float* fp8_group_xs(const Fp8GroupedParams& p, long long start) {
  return p.x_scale + start * p.xs_rs;
}
__device__ __forceinline__ const float* fp8_group_ws(const Fp8GroupedParams& p, int64_t g) {
  return p.w_scale + g * (p.ws_gs > 0 ? p.ws_gs : p.N);
}

struct Fp8GroupedPolicy {
  using Params = Fp8GroupedParams;
  using ElementA = cutlass::float_e4m3_t;
  using ElementB = cutlass::float_e4m3_t;
  using ElementC = void;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;     // x rows [m_g, K], K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // w[g] [N, K], K contiguous
  using LayoutD = cutlass::layout::RowMajor;     // out rows [m_g, N]
  static constexpr int kAlignAB = 16;            // elements: 16 bytes
  static constexpr int kAlignD = 8;
  static constexpr bool kScales = true;

  // Array-of-pointers broadcasts: the group's pointer is taken per tile (its L index), so the
  // batch stride is 0. x_scale rows of a group start anywhere (alignment 1); w_scale per group
  // is 16-byte aligned (N % 4 == 0 and an aligned base are checked by the dispatcher).
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  using StrideCol = cute::Stride<cute::_1, cute::_0, int64_t>;
  using StrideRow = cute::Stride<cute::_0, cute::_1, int64_t>;
  template <class TileShape>
  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElementD, float, kRound>,
      cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float*, float, StrideCol, 1>,  // x_scale
      cutlass::epilogue::fusion::Sm90EVT<
          cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,
          cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float*, float, StrideRow, 4>,  // w_scale
          cutlass::epilogue::fusion::Sm90AccFetch>>;

  template <class Layer, class Args, class Arrays>
  static void epilogue(Args& args, const Arrays& arr) {
    args.epilogue.thread = {
        {arr.xs, 0.f, StrideCol{cute::_1{}, cute::_0{}, int64_t(0)}},            // x_scale of the group
        {{arr.ws, 0.f, StrideRow{cute::_0{}, cute::_1{}, int64_t(0)}}, {}, {}},  // w_scale of the group * acc
        {}};                                                                     // product -> bf16
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
  }

  static int sm_count(const Params&, int sms) { return sms; }

  static unsigned setup_blocks(const Params& p, int sms) {
    return p.descs != nullptr ? group_blocks(p.G)
                              : std::max(detail::setup_blocks(p.total_M * p.N / 8, sms), group_blocks(p.G));
  }

  template <class Arrays>
  __device__ static void put(const Arrays& arr, int64_t g, const uint8_t* a, const uint8_t* b, void* d,
                             const float* xs, const float* ws, int64_t m, int64_t n, int64_t k, int64_t lda,
                             int64_t ldb, int64_t ldd) {
    arr.put(g, m, n, k, reinterpret_cast<const ElementA*>(a), lda, reinterpret_cast<const ElementB*>(b), ldb,
            static_cast<ElementD*>(d), ldd);
    arr.xs[g] = xs;
    arr.ws[g] = ws;
  }

  // Groups known on the host (descriptors): copied into the arrays. Otherwise every block scans
  // the G sizes; block 0 writes the per-group arguments and all blocks zero the rows past them.
  template <class Arrays>
  __device__ static void setup(const Params& p, const Arrays& arr) {
    if (p.descs != nullptr) {
      for_each_group(p.G, [&](int64_t g) {
        const Fp8GroupDesc dg = p.descs[g];
        put(arr, g, dg.a, dg.b, dg.d, dg.xs, dg.ws, dg.m, dg.n, dg.k, dg.lda, dg.ldb, dg.ldd);
      });
      return;
    }
    auto* out = static_cast<ElementD*>(p.out);
    if (p.fixed_rows > 0) {  // _dynamic: fixed row blocks, rows past each group's count are zero
      const int64_t F = p.fixed_rows;
      for_each_group(p.G, [&](int64_t g) {
        const long long m = min(fp8_group_rows(p, g), static_cast<long long>(F));
        const int64_t start = g * F;
        put(arr, g, p.x + start * p.ldx, p.w + g * p.w_gs, out + start * p.N, fp8_group_xs(p, start),
            fp8_group_ws(p, g), m, p.N, p.K, p.ldx, p.ldw, p.N);
      });
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
            put(arr, g, p.x + start * p.ldx, p.w + g * p.w_gs, out + start * p.N, fp8_group_xs(p, start),
                fp8_group_ws(p, g), end - start, p.N, p.K, p.ldx, p.ldw, p.N);
        });
    zero_tail_rows(out, min(sum, static_cast<long long>(p.total_M)), p.total_M, p.N);
  }

  template <class Layer, class Arrays>
  static cudaError_t after_setup(const Params&, const Arrays&, cudaStream_t) {
    return cudaSuccess;
  }
};

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct Fp8GroupedRow {
  static cudaError_t run(const Fp8GroupedParams& p, cudaStream_t s) {
    return CutlassGrouped<Fp8GroupedPolicy, TM, TN, TK, CM, CN, kCooperative, kFast>::run(p, s);
  }
};

}  // namespace mslk::gemm::detail

#define MSLK_FP8_GROUPED_INSTANTIATE(ID) \
  MSLK_CUTLASS_GROUPED_INSTANTIATE(fp8_grouped_cutlass, Fp8GroupedParams, kFp8GroupedConfigs, Fp8GroupedRow, ID)
