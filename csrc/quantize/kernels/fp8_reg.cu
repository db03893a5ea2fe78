// Register-resident FP8 quantizer for rows, blocks and K-groups. Each CTA loads one CTA tile
// (cta_m rows x cta_k columns) into registers as 16-byte vectors, reduces |x| and writes the
// FP8 bytes from registers: every input byte is read from memory exactly once.
//   rows:   CTA tile = 1 x K, one scale per CTA (block reduction)
//   blocks: CTA tile = block_m x block_k, one scale per CTA
//   groups: CTA tile = 1 x (whole groups, ~512 vectors), one scale per L consecutive vectors
//           (warp-segment reduction)
// Tiles too large for registers, or not 16-byte aligned, go to the two-pass tile kernel.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

struct CtaTiling {
  int64_t cta_m, cta_k;  // CTA tile
  int n_cta_k;           // CTA tiles along K
  int vpr;               // vectors per CTA-tile row
};

// Position of vector idx inside the CTA tile (row tiles need no division).
template <bool ONE_ROW>
__device__ __forceinline__ void tile_pos(int idx, int vpr, int& r, int& c) {
  r = ONE_ROW ? 0 : idx / vpr;
  c = ONE_ROW ? idx : idx - r * vpr;
}

// L == 0: one scale per CTA tile; L > 0: one scale per group of L lanes (a K-group).
template <typename T, int NV, int L, bool ONE_ROW>
__global__ void __launch_bounds__(NV == 8 ? 1024 : 256) fp8_reg_kernel(Fp8TileParams p, CtaTiling t, bool vec_store) {
  constexpr int W = kVec16<T>;
  const int bi = blockIdx.x / t.n_cta_k, bj = blockIdx.x % t.n_cta_k;
  const int64_t r0 = int64_t(bi) * t.cta_m, c0 = int64_t(bj) * t.cta_k;
  const int rows = static_cast<int>(t.cta_m < p.in.M - r0 ? t.cta_m : p.in.M - r0);
  const int vcols = static_cast<int>((t.cta_k < p.in.K - c0 ? t.cta_k : p.in.K - c0) / W);
  const bool valid = !ONE_ROW || row_is_valid(p, r0);
  const T* in = static_cast<const T*>(p.in.ptr) + r0 * p.in.stride + c0;
  uint8_t* out = p.out + r0 * p.out_stride + c0;

  uint4 v[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) {  // every load issued before the first use
    int r, c;
    tile_pos<ONE_ROW>(threadIdx.x + i * blockDim.x, t.vpr, r, c);
    v[i] = valid && r < rows && c < vcols ? *reinterpret_cast<const uint4*>(in + r * p.in.stride + c * W)
                                          : make_uint4(0, 0, 0, 0);
  }

  if constexpr (L == 0) {
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) m = fmaxf(m, absmax16<T>(v[i]));
    const TileScale s = tile_scale(p, block_max(m));
    if (threadIdx.x == 0) p.scale[scale_index(p, bi, bj)] = s.scale;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      int r, c;
      tile_pos<ONE_ROW>(threadIdx.x + i * blockDim.x, t.vpr, r, c);
      if (r < rows && c < vcols) quant_store16<T>(v[i], s.inv, out + r * p.out_stride + c * W, vec_store);
    }
  } else {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      float a = absmax16<T>(v[i]);
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
      const int c = threadIdx.x + i * blockDim.x;  // groups live in one row
      if (c >= vcols) continue;  // after the shuffles: every lane took part
      const TileScale s = tile_scale(p, a);
      // lanes of a group are consecutive and start at a multiple of L (blockDim % 32 == 0)
      if (threadIdx.x % L == 0) p.scale[scale_index(p, r0, (c0 + int64_t(c) * W) / p.tile_k)] = s.scale;
      quant_store16<T>(v[i], s.inv, out + c * W, vec_store);
    }
  }
  if (ONE_ROW && c0 + t.cta_k >= p.in.K) zero_padding(p, r0, r0 + 1);
}

// Vectors per thread: the fewest that keep the CTA at <= 256 threads, up to 8 (1024 threads).
template <typename T, int NV, int L, bool ONE_ROW>
bool try_launch(const Fp8TileParams& p, const CtaTiling& t, int64_t vecs, int64_t ctas, cudaStream_t s) {
  if (vecs > (NV == 8 ? 1024 : 256) * NV) return false;
  const int threads = static_cast<int>(((vecs + NV - 1) / NV + 31) / 32 * 32);
  fp8_reg_kernel<T, NV, L, ONE_ROW><<<unsigned(ctas), threads, 0, s>>>(p, t, p.out_stride % kVec16<T> == 0);
  return true;
}

template <typename T, int L, bool ONE_ROW>
bool launch_nv(const Fp8TileParams& p, const CtaTiling& t, cudaStream_t s) {
  const int64_t vecs = t.cta_m * t.vpr;
  const int64_t ctas = int64_t(ceil_div(p.in.M, t.cta_m)) * t.n_cta_k;
  if (ctas > 0x7fffffff) return false;
  if constexpr (L > 0) {  // group CTAs hold <= 512 vectors
    return try_launch<T, 1, L, true>(p, t, vecs, ctas, s) || try_launch<T, 2, L, true>(p, t, vecs, ctas, s);
  } else {
    return try_launch<T, 1, L, ONE_ROW>(p, t, vecs, ctas, s) || try_launch<T, 2, L, ONE_ROW>(p, t, vecs, ctas, s) ||
           try_launch<T, 4, L, ONE_ROW>(p, t, vecs, ctas, s) || try_launch<T, 8, L, ONE_ROW>(p, t, vecs, ctas, s);
  }
}

enum class Mode { kRows, kBlocks, kGroups };

template <Mode mode>
cudaError_t launch(const Fp8TileParams& p, cudaStream_t s) {
  if (p.in.M == 0 || p.in.K == 0) return cudaSuccess;
  bool launched = false;
  cudaError_t err = dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVec16<T>;
    if (!rows_vectorizable<T>(p.in, p.tile_k)) return;
    CtaTiling t{};
    t.cta_m = mode == Mode::kBlocks ? p.tile_m : 1;
    t.cta_k = mode == Mode::kBlocks ? p.tile_k : p.in.K;
    if (mode == Mode::kGroups) {  // groups are independent: ~512 vectors a CTA keeps registers low
      const int64_t per_cta = std::max<int64_t>(1, 512 / (p.tile_k / W));
      t.cta_k = std::min<int64_t>(p.in.K, per_cta * p.tile_k);
    }
    t.n_cta_k = static_cast<int>(ceil_div(p.in.K, t.cta_k));
    t.vpr = static_cast<int>(t.cta_k / W);
    if (t.cta_m * t.vpr > 8192) return;
    if constexpr (mode != Mode::kGroups) {
      launched = t.cta_m == 1 ? launch_nv<T, 0, true>(p, t, s) : launch_nv<T, 0, false>(p, t, s);
    } else {
      if (p.out_stride != p.in.K) return;
      switch (p.tile_k / W) {
        case 1: launched = launch_nv<T, 1, true>(p, t, s); break;
        case 2: launched = launch_nv<T, 2, true>(p, t, s); break;
        case 4: launched = launch_nv<T, 4, true>(p, t, s); break;
        case 8: launched = launch_nv<T, 8, true>(p, t, s); break;
        case 16: launched = launch_nv<T, 16, true>(p, t, s); break;
        case 32: launched = launch_nv<T, 32, true>(p, t, s); break;
        default: break;
      }
    }
  });
  if (err != cudaSuccess || launched) return err;
  return fp8_quantize_tiles(p, s);
}

}  // namespace

cudaError_t fp8_quantize_rows(const Fp8TileParams& p, cudaStream_t s) { return launch<Mode::kRows>(p, s); }
cudaError_t fp8_quantize_blocks(const Fp8TileParams& p, cudaStream_t s) { return launch<Mode::kBlocks>(p, s); }
cudaError_t fp8_quantize_groups(const Fp8TileParams& p, cudaStream_t s) { return launch<Mode::kGroups>(p, s); }

}  // namespace mslk::quantize
