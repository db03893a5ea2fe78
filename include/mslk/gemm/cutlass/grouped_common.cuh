// Device-side argument setup for grouped block-scaled GEMMs: one thread per group writes
// that group's problem shape, operand/scale/output pointers, strides and scale-factor
// layouts, reading group boundaries from `offsets` on the device (no host sync, so it is
// CUDA-graph safe). Launch with >= G threads in total, e.g. <<<ceil(G/256), 256>>>.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_size.h>
#include <cutlass/util/packed_stride.hpp>

#include <cstdint>
#include <cstdio>
#include <type_traits>

namespace mslk::gemm {

enum GroupedGemmInputType {
  _2D2D,  // K grouped: XQ [M, K_total], WQ [N, K_total], out [G, M, N]
  _2D3D,  // M grouped (MoE forward): XQ [M_total, K], WQ [G, N, K], out [M_total, N]
};

namespace detail {
// CUTLASS block-scaled element tags (mx_float8_t<...>) wrap the storage type as DataType.
template <typename T, typename = void>
struct storage_element {
  using type = T;
};
template <typename T>
struct storage_element<T, std::void_t<typename T::DataType>> {
  using type = typename T::DataType;
};

__host__ __device__ constexpr int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
}  // namespace detail

#define MSLK_GROUPED_ARGS_CHECK(COND, MSG)                                                    \
  do {                                                                                        \
    if (!(COND)) {                                                                            \
      printf("[mslk] set_grouped_gemm_args_kernel: group %lld: %s\n",                         \
             static_cast<long long>(group), MSG);                                             \
      __trap();                                                                               \
    }                                                                                         \
  } while (0)

// offsets[g]: end of group g along the grouped dim (K for 2D2D, M for 2D3D), non-decreasing.
// Scales use the blocked, padded layout: one scale per 32 elements of K (MX formats) or 16
// (NVFP4, chosen by passing global_scale, one fp32 per group). 2D2D: each group's scale
// block is [round_up(M,128), round_up(K_g/sf,4)] (w: N rows), stacked group after group.
// 2D3D: x_scale rows padded to 128 per group, columns round_up(K/sf, 4); w_scale is
// [G, round_up(N,128), round_up(K/sf,4)]. x_scale_size (elements of x_scale) bounds every
// group's slice. 4-bit operands are stored two per byte: pointer offsets are halved.
// stride_a/layout_SFA always describe XQ and stride_b/layout_SFB WQ. is_transposeAB: the
// GEMM runs on (N, M_g, K_g) -- WQ as the first operand, output strides for C^T -- as
// swap-AB kernels for small M do; otherwise (M_g, N, K_g).
template <typename ProblemShape, typename ElementA, typename ElementB, typename ElementC,
          typename ScaleDtype, typename StrideA, typename StrideB, typename StrideC,
          typename LayoutSFA, typename LayoutSFB, typename Sm1xxBlkScaledConfig,
          typename ElementGlobalScale = float>
__global__ void set_grouped_gemm_args_kernel(
    int64_t G, int64_t M, int64_t N, int64_t K, ProblemShape* problem_shape_ptr, ElementA* xq,
    const ElementA** xq_ptr, ElementB* wq, const ElementB** wq_ptr, ScaleDtype* x_scale,
    const ScaleDtype** x_scale_ptr, int32_t x_scale_size, ScaleDtype* w_scale,
    const ScaleDtype** w_scale_ptr, ElementC* output, ElementC** output_ptr,
    StrideA* stride_a_ptr, StrideB* stride_b_ptr, StrideC* stride_c_ptr, int32_t* offsets,
    LayoutSFA* layout_SFA, LayoutSFB* layout_SFB, GroupedGemmInputType gemm_type,
    bool is_transposeAB, ElementGlobalScale* global_scale = nullptr,
    const ElementGlobalScale** global_scale_ptr = nullptr) {
  using detail::round_up;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (group >= G) {
    return;
  }
  constexpr bool packed_a =
      cutlass::sizeof_bits<typename detail::storage_element<ElementA>::type>::value == 4;
  constexpr bool packed_b =
      cutlass::sizeof_bits<typename detail::storage_element<ElementB>::type>::value == 4;
  auto units_a = [](int64_t elems) { return packed_a ? elems / 2 : elems; };
  auto units_b = [](int64_t elems) { return packed_b ? elems / 2 : elems; };

  problem_shape_ptr[group] = ProblemShape(0, 0, 0);  // empty unless filled below
  if (global_scale != nullptr) {
    global_scale_ptr[group] = global_scale + group;
  }
  MSLK_GROUPED_ARGS_CHECK(offsets != nullptr, "offsets must be set");
  const int64_t sf_block = global_scale != nullptr ? 16 : 32;
  const int64_t begin = group == 0 ? 0 : offsets[group - 1];
  const int64_t size = offsets[group] - begin;
  MSLK_GROUPED_ARGS_CHECK(begin >= 0 && size >= 0, "offsets must be non-negative and non-decreasing");

  // Scale extent of the earlier groups (2D2D: padded scale columns; 2D3D: padded rows).
  int64_t scale_before = 0;
  for (int64_t i = 0; i < group; ++i) {
    const int64_t size_i = offsets[i] - (i == 0 ? 0 : offsets[i - 1]);
    scale_before += gemm_type == _2D2D ? round_up(size_i / sf_block, 4) : round_up(size_i, 128);
  }
  const int64_t M_padded = round_up(M, 128), N_padded = round_up(N, 128);

  int64_t Mg, Kg, a_rows_stride_k, xq_off, wq_off, out_off, xs_off, xs_len, ws_off;
  if (gemm_type == _2D2D) {
    MSLK_GROUPED_ARGS_CHECK(size % sf_block == 0,
                            "2D-2D: group sizes along K must be multiples of the scale block (32, or 16 for NVFP4)");
    MSLK_GROUPED_ARGS_CHECK(offsets[group] <= K, "2D-2D: group end offsets must be <= K");
    Mg = M;
    Kg = size;
    a_rows_stride_k = K;  // the group's slice sits inside [M, K_total] rows
    xq_off = units_a(begin);
    wq_off = units_b(begin);
    out_off = group * M * N;
    xs_off = M_padded * scale_before;
    xs_len = M_padded * round_up(size / sf_block, 4);
    ws_off = N_padded * scale_before;
  } else {
    MSLK_GROUPED_ARGS_CHECK(offsets[group] <= M, "2D-3D: group end offsets must be <= M");
    const int64_t k_cols = round_up(K / sf_block, 4);
    Mg = size;
    Kg = K;
    a_rows_stride_k = K;
    xq_off = units_a(begin * K);
    wq_off = units_b(group * N * K);
    out_off = begin * N;
    xs_off = scale_before * k_cols;
    xs_len = round_up(size, 128) * k_cols;
    ws_off = group * N_padded * k_cols;
  }
  MSLK_GROUPED_ARGS_CHECK(xs_off + xs_len <= x_scale_size,
                          "x_scale_size is smaller than the groups' padded scale blocks");

  xq_ptr[group] = xq + xq_off;
  wq_ptr[group] = wq + wq_off;
  x_scale_ptr[group] = x_scale + xs_off;
  w_scale_ptr[group] = w_scale + ws_off;
  output_ptr[group] = output + out_off;
  if (size == 0) {
    return;
  }
  problem_shape_ptr[group] = is_transposeAB ? ProblemShape(int(N), int(Mg), int(Kg))
                                            : ProblemShape(int(Mg), int(N), int(Kg));
  stride_a_ptr[group] =
      cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(int(Mg), int(a_rows_stride_k), 1));
  stride_b_ptr[group] =
      cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(int(N), int(a_rows_stride_k), 1));
  stride_c_ptr[group] =
      is_transposeAB ? cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(int(N), int(Mg), 1))
                     : cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(int(Mg), int(N), 1));
  layout_SFA[group] =
      Sm1xxBlkScaledConfig::tile_atom_to_shape_SFA(cute::make_shape(int(Mg), int(N), int(Kg), 1));
  layout_SFB[group] =
      Sm1xxBlkScaledConfig::tile_atom_to_shape_SFB(cute::make_shape(int(Mg), int(N), int(Kg), 1));
}

#undef MSLK_GROUPED_ARGS_CHECK

}  // namespace mslk::gemm
