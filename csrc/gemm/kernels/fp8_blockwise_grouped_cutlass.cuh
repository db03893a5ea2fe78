// The device-side grouped block/group-scaled FP8 GEMM (f8f8bf16_groupwise_grouped) on the grouped
// CUTLASS layer (cutlass_grouped.cuh), one TU per row of fp8_blockwise_grouped_configs.h. It
// shares the rowwise grouped family's params and device setup (fp8_grouped_cutlass.cuh): sizes
// scanned on the device, per-group pointers, rows past the last group zeroed; only the scale
// pointers step differently (Fp8GroupedParams::xs_rs, ws_gs).
//
// Mainloop: CUTLASS's ptr-array blockwise-scaling mainloop. The wgmma accumulator of each 128-K
// block is multiplied by sfa[m, kb] * sfb[n / 128, kb] and added into float32 registers. The
// scale layouts follow from each group's problem shape: x scales [K/128, m_g] MN-major at the
// group's segment of the buffer (the layout quantize_fp8_group(m_sizes=...) writes), w scales
// [K/128, N/128] MN-major. Scales are loaded with 4-byte cp.async, predicated on m_g, so a
// segment may start at any element. Epilogue: D = bf16(acc).
#pragma once
#include <cutlass/detail/blockwise_scale_layout.hpp>

#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/fp8_blockwise_grouped_configs.h"
#include "gemm/kernels/fp8_grouped_cutlass.cuh"

namespace mslk::gemm::detail {

struct Fp8BlockwiseGroupedPolicy : Fp8GroupedPolicy {
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN,
                                                                cute::GMMA::Major::MN>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  template <class TileShape>
  using Fusion = void;  // D = 1 * acc

  template <bool kCooperative, bool /*kFast*/>
  struct Mainloop {
    using StrideA = cute::tuple<LayoutA*, LayoutSFA*>;
    using StrideB = cute::tuple<LayoutB*, LayoutSFB*>;
    using Schedule =
        cute::conditional_t<kCooperative, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise>;
    // The per-group scale pointers; the layouts come from each group's shape (the collective
    // does not read layout_SFA / layout_SFB).
    template <class MainloopArgs, class Arrays>
    static void set(MainloopArgs& m, const Arrays& arr) {
      m.ptr_SFA = arr.xs;
      m.layout_SFA = nullptr;
      m.ptr_SFB = arr.ws;
      m.layout_SFB = nullptr;
    }
  };

  template <class Layer, class Args, class Arrays>
  static void epilogue(Args& args, const Arrays&) {
    args.epilogue.thread = {};  // alpha = 1, beta = 0
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
  }
};

template <int TM, int TN, int TK, int CM, int CN, bool kCooperative, bool kFast>
struct Fp8BlockwiseGroupedRow {
  static cudaError_t run(const Fp8GroupedParams& p, cudaStream_t s) {
    return CutlassGrouped<Fp8BlockwiseGroupedPolicy, TM, TN, TK, CM, CN, kCooperative, false>::run(p, s);
  }
};

}  // namespace mslk::gemm::detail

#define MSLK_FP8_BLOCKWISE_GROUPED_INSTANTIATE(ID)                                                            \
  MSLK_CUTLASS_GROUPED_INSTANTIATE(fp8_blockwise_grouped_cutlass, Fp8GroupedParams, kFp8BlockwiseGroupedConfigs, \
                                   Fp8BlockwiseGroupedRow, ID)
