// Blockwise FP8 for tiles too large for one CTA's registers (the default 256x256 blocks): the
// C CTAs of a thread-block cluster split one tile by rows, each holds its part in registers,
// and the partial amaxes meet through distributed shared memory. Every input byte is read once,
// and each CTA is as small as a 128x128 tile's, so several share an SM.
// Opt-in (schedule cluster): it wins only some small inputs, with no tile-count rule separating
// the wins (docs/design/quantize.md).
#include <cooperative_groups.h>

#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

namespace cg = cooperative_groups;
constexpr int kNV = 8;         // 16-byte vectors per thread
constexpr int kThreads = 256;  // so a CTA holds <= 2048 vectors

template <typename T, int C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(kThreads, 4) fp8_cluster_kernel(Fp8TileParams p, int n_bj,
                                                                                         bool vec_store) {
  constexpr int W = kVec16<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int tile = blockIdx.x / C, bi = tile / n_bj, bj = tile - (tile / n_bj) * n_bj;
  const int64_t sub_m = p.tile_m / C;
  const int64_t r0 = int64_t(bi) * p.tile_m + rank * sub_m, c0 = int64_t(bj) * p.tile_k;
  const int64_t rows_left = p.in.M - r0;
  const int rows = static_cast<int>(rows_left <= 0 ? 0 : (rows_left < sub_m ? rows_left : sub_m));
  const int vcols = static_cast<int>((p.tile_k < p.in.K - c0 ? p.tile_k : p.in.K - c0) / W);
  const int vpr = static_cast<int>(p.tile_k / W);
  const T* in = static_cast<const T*>(p.in.ptr) + r0 * p.in.stride + c0;

  // Peers' shared memory may only be written once every CTA of the cluster runs: arrive now,
  // wait after the loads, so the barrier's latency hides behind them.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  uint4 v[kNV];
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kNV; ++i) {
    int r, c;
    tile_vec_pos<false>(i, vpr, r, c);
    v[i] = r < rows && c < vcols ? *reinterpret_cast<const uint4*>(in + r * p.in.stride + c * W)
                                 : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kNV; ++i) m = fmaxf(m, absmax16<T>(v[i]));

  // Push, not pull: each CTA writes its partial into every peer's slot, so one release/acquire
  // barrier suffices and nobody reads remote memory (a pull needs a second barrier so that a CTA
  // does not exit while a peer still reads it).
  __shared__ float parts[C];
  m = block_max(m);
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  if (threadIdx.x < C) *cluster.map_shared_rank(&parts[rank], static_cast<int>(threadIdx.x)) = m;
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < C; ++i) m = fmaxf(m, parts[i]);
  const TileScale s = tile_scale(p, m);
  if (rank == 0 && threadIdx.x == 0) p.scale[scale_index(p, bi, bj)] = s.scale;

  uint8_t* out = p.out + r0 * p.out_stride + c0;
#pragma unroll
  for (int i = 0; i < kNV; ++i) {
    int r, c;
    tile_vec_pos<false>(i, vpr, r, c);
    if (r < rows && c < vcols) quant_store16<T>(v[i], s.inv, out + r * p.out_stride + c * W, vec_store);
  }
}

template <typename T, int C>
bool try_cluster(const Fp8TileParams& p, int64_t vpr, int64_t n_tiles, int n_bj, cudaStream_t stream) {
  if (p.tile_m % C != 0 || (p.tile_m / C) * vpr > int64_t(kThreads) * kNV) return false;
  const int threads = static_cast<int>(((p.tile_m / C) * vpr + kNV - 1) / kNV + 31) / 32 * 32;
  fp8_cluster_kernel<T, C><<<unsigned(n_tiles * C), threads, 0, stream>>>(p, n_bj, p.out_stride % kVec16<T> == 0);
  return true;
}

}  // namespace

bool fp8_quantize_blocks_cluster(const Fp8TileParams& p, cudaStream_t stream) {
  bool launched = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Padded outputs (out_stride > K, whose padding fp8_params.h says is zero-filled) take the other
    // kernels: zeroing it here made ptxas spill the 64-register body (4 CTAs an SM).
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K) return;
    const int64_t vpr = p.tile_k / kVec16<T>;
    const int64_t n_bj = ceil_div(p.in.K, p.tile_k), n_tiles = int64_t(ceil_div(p.in.M, p.tile_m)) * n_bj;
    if (p.tile_m * vpr <= int64_t(kThreads) * kNV || n_tiles * 8 > 0x7fffffff) return;  // small tiles: one CTA
    launched = try_cluster<T, 2>(p, vpr, n_tiles, int(n_bj), stream) ||
               try_cluster<T, 4>(p, vpr, n_tiles, int(n_bj), stream) ||
               try_cluster<T, 8>(p, vpr, n_tiles, int(n_bj), stream);
  });
  return launched;
}

}  // namespace mslk::quantize
