// Blockwise FP8 for large tiles (64-224 KB of input, e.g. the default 256x256 bf16 blocks) on a
// persistent shared-memory ring. A tile's scale needs its whole amax before any byte of it is
// written; the one-CTA-a-tile kernels therefore load, reduce and store in step, and the DRAM queue
// idles while they reduce (NOTES.md). Here one producer warp streams tiles into a ring of 32 KB
// chunks with 1-D bulk copies (one per tile row) completing on per-chunk mbarriers, and eight
// consumer warps reduce a tile from shared memory, then quantize it from shared memory again and
// free each chunk as they go, so the next tile's loads run under this tile's reduce and stores.
// Same arithmetic as the register kernels (absmax16, tile_scale, quant_store16): the same bits.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + one producer warp
constexpr int kNV = 8;                     // 16-byte vectors a consumer thread holds of a chunk
constexpr int kChunkBytes = kConsumers * kNV * 16;
constexpr int kMaxSlots = 7;               // 224 KB: one CTA an SM

struct RingTiling {
  int n_bj, n_tiles;
  int row_bytes;   // smem pitch of a tile row: tile_k * sizeof(T)
  int chunk_rows;  // tile rows a chunk holds
  int chunks;      // chunks a tile
  int slots;       // chunks the ring holds
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arm(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void consumers_sync() {  // the eight consumer warps only
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) fp8_ring_kernel(Fp8TileParams p, RingTiling t, bool vec_store) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  __shared__ float parts[2][kConsumerWarps];
  constexpr int W = kVec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < t.slots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncthreads();
  const T* in = static_cast<const T*>(p.in.ptr);

  if (warp == kConsumerWarps) {  // producer: tile rows of each chunk, one bulk copy a row
    int k = 0;
    for (int tile = blockIdx.x; tile < t.n_tiles; tile += gridDim.x) {
      const int bi = tile / t.n_bj, bj = tile - bi * t.n_bj;
      const int64_t r0 = int64_t(bi) * p.tile_m, c0 = int64_t(bj) * p.tile_k;
      const int64_t rows = min(p.tile_m, p.in.M - r0);
      const uint32_t bytes = static_cast<uint32_t>(min(p.tile_k, p.in.K - c0) * int64_t(sizeof(T)));
      for (int c = 0; c < t.chunks; ++c, ++k) {
        const int s = k % t.slots;
        if (k >= t.slots) mbar_wait(&empty[s], ((k / t.slots) - 1) & 1);
        const int64_t cr0 = int64_t(c) * t.chunk_rows;
        const int64_t left = rows - cr0;
        const int n = left <= 0 ? 0 : static_cast<int>(left < t.chunk_rows ? left : t.chunk_rows);
        if (lane == 0) mbar_arm(&full[s], uint32_t(n) * bytes);  // 0 bytes past M: an empty chunk
        __syncwarp();
        unsigned char* dst = ring + int64_t(s) * kChunkBytes;
        for (int j = lane; j < n; j += 32)
          bulk_load(dst + j * t.row_bytes, in + (r0 + cr0 + j) * p.in.stride + c0, bytes, &full[s]);
      }
    }
    return;
  }

  // consumers: thread ct holds vectors ct + i * kConsumers of each chunk, all in one column
  const int ct = threadIdx.x, vpr = t.row_bytes / 16;
  const int col = ct % vpr, row0 = ct / vpr, rstep = kConsumers / vpr;
  int k = 0, n_done = 0;
  for (int tile = blockIdx.x; tile < t.n_tiles; tile += gridDim.x, k += t.chunks, ++n_done) {
    const int bi = tile / t.n_bj, bj = tile - bi * t.n_bj;
    const int64_t r0 = int64_t(bi) * p.tile_m, c0 = int64_t(bj) * p.tile_k;
    const int rows = static_cast<int>(min(p.tile_m, p.in.M - r0));
    const bool col_ok = col < static_cast<int>(min(p.tile_k, p.in.K - c0) / W);
    float m = 0.f;
    for (int c = 0; c < t.chunks; ++c) {
      const int s = (k + c) % t.slots;
      mbar_wait(&full[s], ((k + c) / t.slots) & 1);
      const uint4* v = reinterpret_cast<const uint4*>(ring + int64_t(s) * kChunkBytes);
      const int rc = c * t.chunk_rows + row0;
#pragma unroll
      for (int i = 0; i < kNV; ++i)
        if (col_ok && rc + i * rstep < rows) m = fmaxf(m, absmax16<T>(v[ct + i * kConsumers]));
    }
    m = warp_max(m);
    if (lane == 0) parts[n_done & 1][warp] = m;  // two sets: the next tile's writes cannot race these reads
    consumers_sync();
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) m = fmaxf(m, parts[n_done & 1][w]);
    const TileScale sc = tile_scale(p, m);
    if (ct == 0) p.scale[scale_index(p, bi, bj)] = sc.scale;
    uint8_t* out = p.out + r0 * p.out_stride + c0 + col * W;
    for (int c = 0; c < t.chunks; ++c) {
      const int s = (k + c) % t.slots;
      const uint4* v = reinterpret_cast<const uint4*>(ring + int64_t(s) * kChunkBytes);
      const int rc = c * t.chunk_rows + row0;
#pragma unroll
      for (int i = 0; i < kNV; ++i)
        if (col_ok && rc + i * rstep < rows)
          quant_store16<T>(v[ct + i * kConsumers], sc.inv, out + int64_t(rc + i * rstep) * p.out_stride, vec_store);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);  // this warp is done with the chunk
    }
  }
}

// The tiling, or false when the ring does not suit the tile (too small, too large, rows not a
// power-of-two number of 16-byte vectors up to the consumer count).
template <typename T>
bool ring_tiling(const Fp8TileParams& p, RingTiling* t) {
  const int64_t row_bytes = p.tile_k * int64_t(sizeof(T));
  if (row_bytes < 16 || row_bytes > kConsumers * 16 || (row_bytes & (row_bytes - 1)) != 0) return false;
  const int64_t chunk_rows = kChunkBytes / row_bytes;
  if (p.tile_m % chunk_rows != 0) return false;
  const int64_t chunks = p.tile_m / chunk_rows;
  if (chunks < 2 || chunks > kMaxSlots - 1) return false;  // <= 32 KB: the register kernels
  const int64_t n_bj = ceil_div(p.in.K, p.tile_k), n_tiles = int64_t(ceil_div(p.in.M, p.tile_m)) * n_bj;
  if (n_tiles > 0x7fffffff) return false;
  *t = {int(n_bj), int(n_tiles), int(row_bytes), int(chunk_rows), int(chunks), kMaxSlots};
  return true;
}

}  // namespace

bool fp8_quantize_blocks_ring(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M <= 0 || p.in.K <= 0) return false;
  bool launched = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    RingTiling t{};
    // Padded outputs (out_stride > K) take the other kernels, which zero the padding.
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K || !ring_tiling<T>(p, &t)) return;
    auto kernel = fp8_ring_kernel<T>;
    const int smem = t.slots * kChunkBytes;
    int dev = 0, sms = 0, per_sm = 0;
    static KernelOccupancy occupancy;
    if (current_device_sms(&dev, &sms) != cudaSuccess ||
        occupancy.blocks_per_sm(kernel, dev, kThreads, smem, &per_sm) != cudaSuccess || per_sm < 1) {
      (void)cudaGetLastError();  // the caller takes another path
      return;
    }
    const int grid = std::max(1, std::min(t.n_tiles, sms * per_sm));
    kernel<<<unsigned(grid), kThreads, smem, stream>>>(p, t, p.out_stride % kVec16<T> == 0);
    launched = true;
  });
  return launched;
}

}  // namespace mslk::quantize
