// The BF16 stacked grouped GEMM's kForward and kDgrad on the grouped CUTLASS layer
// (cutlass_grouped.cuh), one TU per row of bf16_grouped_configs.h holding both:
//   forward: X [total_M, K], W [G, N, K], M_sizes [G] -> out [total_M, N];
//   dgrad:   dY [total_M, N], W [G, N, K] -> dX [total_M, K] (W[g] the N-major B operand);
//   the list forms: groups given one by one as descriptors.
// An empty group gets shape (0, N, K) (no tiles); the setup zero-fills the rows past
// sum(M_sizes) (the contract's tail), which the GEMM never writes. Epilogue: the default linear
// combination at alpha = 1, beta = 0, no C operand; the forward also stores float32 (out_fp32:
// unrounded sums for a caller's epilogue, mslk.gemm.triton.grouped_gemm's bias / token weights).
#pragma once
#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped_configs.h"
#include "gemm/kernels/cutlass_grouped.cuh"

namespace mslk::gemm::detail {

template <bool kDgrad, bool kF32 = false>
struct Bf16GroupedPolicy {
  using Params = Bf16GroupedParams;
  using ElementA = cutlass::bfloat16_t;
  using ElementB = cutlass::bfloat16_t;
  using ElementC = void;
  using ElementD = cute::conditional_t<kF32, float, cutlass::bfloat16_t>;
  using LayoutA = cutlass::layout::RowMajor;  // X rows [M_g, K], K contiguous
  // forward: W[g] [N, K] is B (n, k) with k contiguous; dgrad: W[g] is B (k = its N, n = its K)
  // with n contiguous (bf16 wgmma reads an N-major B from shared memory)
  using LayoutB = cute::conditional_t<kDgrad, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using LayoutD = cutlass::layout::RowMajor;  // out rows [M_g, N]
  static constexpr int kAlignAB = 8;          // elements: 16 bytes, TMA's rule
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr bool kScales = false;
  template <class TileShape>
  using Fusion = void;

  template <class Layer, class Args, class Arrays>
  static void epilogue(Args& args, const Arrays&) {
    args.epilogue.thread = {};  // alpha = 1, beta = 0
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
  }

  static int sm_count(const Params& p, int sms) { return p.num_sms > 0 && p.num_sms < sms ? p.num_sms : sms; }

  static unsigned setup_blocks(const Params& p, int sms) {
    return p.descs != nullptr ? group_blocks(p.G)
                              : detail::setup_blocks(p.total_M * (kDgrad ? p.K : p.N) * sizeof(ElementD) / 16, sms);
  }

  // Every block prefix-sums the G sizes (G is small next to the GEMM); block 0 writes the
  // per-group arguments and all blocks zero rows [min(sum, total_M), total_M) of out. Group g
  // owns rows [min(S_g, total_M), min(S_g + m_g, total_M)): the same cut as the SIMT kernel.
  template <class Arrays>
  __device__ static void setup(const Params& p, const Arrays& arr) {
    if (p.descs != nullptr) {  // the list forms
      for_each_group(p.G, [&](int64_t g) {
        const Bf16GroupDesc dg = p.descs[g];
        arr.put(g, dg.m, dg.n, dg.k, static_cast<const ElementA*>(dg.a), dg.lda, static_cast<const ElementB*>(dg.b),
                dg.ldb, static_cast<ElementD*>(dg.d), dg.ldd);
      });
      return;
    }
    const auto* x = static_cast<const ElementA*>(p.x);
    const auto* w = static_cast<const ElementB*>(p.w);
    auto* out = static_cast<ElementD*>(p.out);
    // dgrad: dX_g [m, K] = dY_g [m, N] @ W[g] [N, K]: GEMM n = K, k = N, out rows of K columns.
    const int64_t ncols = kDgrad ? p.K : p.N, kdim = kDgrad ? p.N : p.K;
    const long long sum = scan_group_rows(
        p.G, p.total_M, [&](int64_t g) { return max(size_at(p.m_sizes, p.m_sizes_int64, g), 0LL); },
        [&](int64_t g, long long start, long long end) {
          // B's leading stride: of n (forward, K-major) or of k (dgrad, N-major)
          if (blockIdx.x == 0)
            arr.put(g, end - start, ncols, kdim, x + start * p.ldx, p.ldx, w + g * p.w_gs, p.ldw, out + start * ncols,
                    ncols);
        });
    // a float32 row of ncols is, byte for byte, a bf16 row of 2 * ncols
    zero_tail_rows(reinterpret_cast<cutlass::bfloat16_t*>(out), min(sum, static_cast<long long>(p.total_M)),
                   p.total_M, ncols * int64_t(sizeof(ElementD) / 2));
  }

  template <class Layer, class Arrays>
  static cudaError_t after_setup(const Params&, const Arrays&, cudaStream_t) {
    return cudaSuccess;
  }
};

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct Bf16GroupedRow {
  static cudaError_t run(const Bf16GroupedParams& p, cudaStream_t s) {
    if (p.mode == Bf16GroupedMode::kDgrad)
      return CutlassGrouped<Bf16GroupedPolicy<true>, TM, TN, TK, CM, CN, kCooperative, kFast>::run(p, s);
    if (p.out_fp32)
      return CutlassGrouped<Bf16GroupedPolicy<false, true>, TM, TN, TK, CM, CN, kCooperative, kFast>::run(p, s);
    return CutlassGrouped<Bf16GroupedPolicy<false>, TM, TN, TK, CM, CN, kCooperative, kFast>::run(p, s);
  }
};

}  // namespace mslk::gemm::detail

#define MSLK_BF16_GROUPED_INSTANTIATE(ID) \
  MSLK_CUTLASS_GROUPED_INSTANTIATE(bf16_grouped_cutlass, Bf16GroupedParams, kBf16GroupedConfigs, Bf16GroupedRow, ID)
