// Blockwise FP8 for large tiles (64 or 128 KB of input, e.g. the default 256x256 bf16 blocks) on a
// persistent shared-memory ring. A tile's scale needs its whole amax before any byte of it is
// written; the one-CTA-a-tile kernels therefore load, reduce and store in step, and the DRAM queue
// idles while they reduce. Here persistent CTAs stream tiles into a ring of seven 32 KB chunks
// with 2-D TMA boxes completing on per-chunk mbarriers; eight warps move each chunk into registers
// (128 a thread for 128 KB), free it, and reduce and store the tile from registers, so up to 1.75
// tiles of loads stay in flight under the reduce and stores. (Keeping the tile in the ring until
// its stores were done made the next tile's last chunk wait a DRAM round trip each tile.) Figures
// and the variants measured and dropped: docs/design/quantize.md.
// Same arithmetic as the register kernels (absmax16, tile_scale, quant_store16): the same bits.
#include "quantize/kernels/fp8_ring.cuh"

namespace mslk::quantize {
namespace {

using namespace ring;

struct RingTiling {
  int n_bj, n_tiles;
  int row_bytes;   // smem pitch of a tile row: tile_k * sizeof(T)
  int chunk_rows;  // tile rows a chunk holds
  int chunks;      // chunks a tile
  int slots;       // chunks the ring holds (always kMaxSlots; see below)
};
// Why `slots` and the kernel's `vec_store` stay runtime values although they are fixed here
// (slots == kMaxSlots; vec_store is true since out_stride == K): the default kernel (bf16, four
// chunks a tile) sits at 255 registers, and ptxas 13.0 spills it (6-10 bytes) when either becomes
// a constant.

template <typename T, int NCH>
__global__ void __launch_bounds__(kConsumers, 1) fp8_ring_kernel(const __grid_constant__ CUtensorMap map, Fp8TileParams p, RingTiling t,
                                                                bool vec_store) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  __shared__ float parts[2][kConsumerWarps];
  constexpr int W = kVec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < t.slots; ++s) ptx::mbar_init(&full[s], 1), ptx::mbar_init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncthreads();

  // Chunk j of this CTA is part j % NCH of its tile j / NCH and lives in slot j % slots. Thread 0
  // fills the ring: the first slots at the start, then each slot again once all eight warps have
  // moved its chunk into registers (a separate producer warp would cap the others at 168
  // registers: three warps would share a sub-partition's register file). One 2-D TMA box a chunk;
  // a box wholly past M lands as zeros and completes like any other.
  auto issue = [&](int j) {  // thread 0
    const int tile = blockIdx.x + (j / NCH) * gridDim.x;
    if (tile >= t.n_tiles) return;
    const int bi = tile / t.n_bj, bj = tile - bi * t.n_bj, s = j % t.slots;
    ptx::mbar_arrive_expect_tx(&full[s], kChunkBytes);
    ptx::tma_load_2d(&map, &full[s], ring + int64_t(s) * kChunkBytes, bj * int(p.tile_k),
                bi * int(p.tile_m) + (j % NCH) * t.chunk_rows);
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < t.slots; ++j) issue(j);

  // Thread ct holds vectors ct + i * kConsumers of each chunk (all in one column) in
  // registers, so a chunk is free again as soon as it is read and the ring never waits on the
  // stores; the tile's scale comes from a reduce over the registers.
  const int ct = threadIdx.x, vpr = t.row_bytes / 16;
  const int col = ct % vpr, row0 = ct / vpr, rstep = kConsumers / vpr;
  int k = 0, n_done = 0;
  uint4 v[NCH][kNV];
  for (int tile = blockIdx.x; tile < t.n_tiles; tile += gridDim.x, k += NCH, ++n_done) {
    const int bi = tile / t.n_bj, bj = tile - bi * t.n_bj;
    const int64_t r0 = int64_t(bi) * p.tile_m, c0 = int64_t(bj) * p.tile_k;
    const int64_t rows_left = p.in.M - r0, cols_left = p.in.K - c0;
    const int rows = static_cast<int>(rows_left < p.tile_m ? rows_left : p.tile_m);
    const bool col_ok = col < static_cast<int>((cols_left < p.tile_k ? cols_left : p.tile_k) / W);
    float m = 0.f;
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int s = (k + c) % t.slots;
      ptx::mbar_wait_spin(&full[s], ((k + c) / t.slots) & 1);
      const uint4* chunk = reinterpret_cast<const uint4*>(ring + int64_t(s) * kChunkBytes);
#pragma unroll
      for (int i = 0; i < kNV; ++i) v[c][i] = chunk[ct + i * kConsumers];
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(&empty[s]);  // this warp is done with the chunk
      if (threadIdx.x == 0) {  // refill the slot once every warp has read it
        ptx::mbar_wait_spin(&empty[s], ((k + c) / t.slots) & 1);
        issue(k + c + t.slots);
      }
#pragma unroll
      for (int i = 0; i < kNV; ++i) m = fmaxf(m, absmax16<T>(v[c][i]));  // zeros past M and K
    }
    m = warp_max(m);
    if (lane == 0) parts[n_done & 1][warp] = m;  // two sets: the next tile's writes cannot race these reads
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) m = fmaxf(m, parts[n_done & 1][w]);
    const TileScale sc = tile_scale(p, m);
    if (ct == 0) p.scale[scale_index(p, bi, bj)] = sc.scale;
    uint8_t* out = p.out + (r0 + row0) * p.out_stride + c0 + col * W;
    const int64_t step = int64_t(rstep) * p.out_stride;
#pragma unroll
    for (int c = 0; c < NCH; ++c)
#pragma unroll
      for (int i = 0; i < kNV; ++i, out += step)
        if (col_ok && c * t.chunk_rows + row0 + i * rstep < rows) quant_store16<T>(v[c][i], sc.inv, out, vec_store);
  }
}

// The tiling, or false when the ring does not suit the tile (too small or too large; rows not a
// power-of-two number of 16-byte vectors up to the thread count; a box side over 256).
template <typename T>
bool ring_tiling(const Fp8TileParams& p, RingTiling* t) {
  const int64_t row_bytes = p.tile_k * int64_t(sizeof(T));
  if (row_bytes < 16 || row_bytes > kConsumers * 16 || (row_bytes & (row_bytes - 1)) != 0 || p.tile_k > 256) return false;
  const int64_t chunk_rows = kChunkBytes / row_bytes;
  if (chunk_rows > 256 || p.tile_m % chunk_rows != 0) return false;
  const int64_t chunks = p.tile_m / chunk_rows;
  if (chunks != 2 && chunks != 4) return false;  // <= 32 KB: the register kernels; the tile is in registers
  const int64_t n_bj = ceil_div(p.in.K, p.tile_k), n_tiles = int64_t(ceil_div(p.in.M, p.tile_m)) * n_bj;
  if (n_tiles > 0x7fffffff || p.in.M + p.tile_m > 0x7fffffff || p.in.K + p.tile_k > 0x7fffffff) return false;
  *t = {int(n_bj), int(n_tiles), int(row_bytes), int(chunk_rows), int(chunks), kMaxSlots};
  return true;
}

// [M, K] with row stride `stride` elements, boxes of chunk_rows x tile_k, no swizzle (a thread's
// 16-byte vectors sit side by side, so the reads are conflict-free without it).
template <typename T>
bool encode_rows_map(CUtensorMap* map, const Fp8TileParams& p, const RingTiling& t) {
  const EncodeTiledFn fn = encode_tiled_fn();
  if (fn == nullptr) return false;
  const CUtensorMapDataType dt = tensor_map_dtype<T>();
  const cuuint64_t dim[2] = {cuuint64_t(p.in.K), cuuint64_t(p.in.M)};
  const cuuint64_t stride[1] = {cuuint64_t(p.in.stride) * sizeof(T)};
  const cuuint32_t box[2] = {cuuint32_t(p.tile_k), cuuint32_t(t.chunk_rows)};
  const cuuint32_t elem_stride[2] = {1, 1};
  return fn(map, dt, 2, const_cast<void*>(p.in.ptr), dim, stride, box, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;  // out-of-bounds elements read as zero
}

}  // namespace

bool fp8_quantize_blocks_ring(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M <= 0 || p.in.K <= 0) return false;
  bool launched = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    RingTiling t{};
    CUtensorMap map;
    // Padded outputs (out_stride > K) take the other kernels, which zero the padding.
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K || !ring_tiling<T>(p, &t) ||
        !encode_rows_map<T>(&map, p, t))
      return;
    constexpr auto k2 = fp8_ring_kernel<T, 2>, k4 = fp8_ring_kernel<T, 4>;
    const int grid = t.chunks == 2 ? persistent_grid<k2>(t.n_tiles, kConsumers, kRingBytes)
                                   : persistent_grid<k4>(t.n_tiles, kConsumers, kRingBytes);
    if (grid == 0) return;
    (t.chunks == 2 ? k2 : k4)<<<unsigned(grid), kConsumers, kRingBytes, stream>>>(
        map, p, t, p.out_stride % kVec16<T> == 0);
    launched = true;
  });
  return launched;
}

}  // namespace mslk::quantize
