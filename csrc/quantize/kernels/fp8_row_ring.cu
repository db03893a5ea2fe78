// Rowwise FP8 for rows of 4-32 KB on the ring of fp8_ring.cuh: a 32 KB chunk holds G = 1..8 whole
// rows (one 3-D TMA box: [G rows][K / 256][256]); eight warps move it into registers (8 vectors a
// thread), free it, reduce each row's amax across the CTA and store. Thread 0 keeps seven chunks in
// flight, so the DRAM queue never waits for a reduce (the warp-per-row kernel holds one row a warp
// and has nothing in flight while it reduces). Same arithmetic as the other row kernels.
#include "quantize/kernels/fp8_ring.cuh"

namespace mslk::quantize {
namespace {

using namespace ring;

constexpr int kMaxRowsPerChunk = 8;

struct RowRing {
  int64_t n_chunks;
  int rows_per_chunk;  // G
  int vpr;             // 16-byte vectors a row
  uint32_t box_bytes;
};

template <typename T>
__global__ void __launch_bounds__(kConsumers, 1) fp8_row_ring_kernel(const __grid_constant__ CUtensorMap map,
                                                                    Fp8TileParams p, RowRing t) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  __shared__ float parts[2][kMaxRowsPerChunk][kConsumerWarps];
  constexpr int W = kVec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ct = threadIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kMaxSlots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncthreads();
  const int G = t.rows_per_chunk;
  // chunk j of this CTA: rows [q * G, q * G + G) with q = blockIdx.x + j * gridDim.x, in slot j % slots
  auto issue = [&](int64_t j) {  // thread 0
    const int64_t q = blockIdx.x + j * gridDim.x;
    if (q >= t.n_chunks) return;
    const int s = static_cast<int>(j % kMaxSlots);
    mbar_arm(&full[s], t.box_bytes);  // rows past M land as zeros and still count
    tma_load_3d(&map, &full[s], ring + int64_t(s) * kChunkBytes, 0, 0, static_cast<int>(q * G));
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < kMaxSlots; ++j) issue(j);

  // Vector ct + i * kConsumers of a chunk belongs to row g[i] (the same in every chunk).
  const int nv = G * t.vpr;
  int g[kNV];
#pragma unroll
  for (int i = 0; i < kNV; ++i) g[i] = (ct + i * kConsumers) / t.vpr;
  uint4 v[kNV];
  int64_t j = 0;
  for (int64_t q = blockIdx.x; q < t.n_chunks; q += gridDim.x, ++j) {
    const int s = static_cast<int>(j % kMaxSlots);
    mbar_wait(&full[s], static_cast<uint32_t>(j / kMaxSlots) & 1);
    const uint4* chunk = reinterpret_cast<const uint4*>(ring + int64_t(s) * kChunkBytes);
#pragma unroll
    for (int i = 0; i < kNV; ++i) v[i] = ct + i * kConsumers < nv ? chunk[ct + i * kConsumers] : make_uint4(0, 0, 0, 0);
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    if (threadIdx.x == 0) {  // refill the slot once every warp has read it
      mbar_wait(&empty[s], static_cast<uint32_t>(j / kMaxSlots) & 1);
      issue(j + kMaxSlots);
    }
    // Zeroed rows (zero_start_index_M) and rows past M quantize zeros; their amax is 0.
    const int64_t r0 = q * G;
    bool valid[kNV];
#pragma unroll
    for (int i = 0; i < kNV; ++i) {
      const int64_t r = r0 + g[i];
      valid[i] = r < p.in.M && row_is_valid(p, r);
      if (!valid[i]) v[i] = make_uint4(0, 0, 0, 0);
    }
    float a[kNV];
#pragma unroll
    for (int i = 0; i < kNV; ++i) a[i] = absmax16<T>(v[i]);
    for (int row = 0; row < G; ++row) {  // one CTA reduce a row (G <= 8)
      float m = 0.f;
#pragma unroll
      for (int i = 0; i < kNV; ++i)
        if (g[i] == row) m = fmaxf(m, a[i]);
      m = warp_max(m);
      if (lane == 0) parts[j & 1][row][warp] = m;  // two sets: the next chunk's writes cannot race these reads
    }
    __syncthreads();
    if (ct < G && r0 + ct < p.in.M) {
      float m = 0.f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) m = fmaxf(m, parts[j & 1][ct][w]);
      p.scale[scale_index(p, r0 + ct, 0)] = tile_scale(p, m).scale;
    }
#pragma unroll
    for (int i = 0; i < kNV; ++i) {
      if (ct + i * kConsumers >= nv || r0 + g[i] >= p.in.M) continue;
      float m = 0.f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) m = fmaxf(m, parts[j & 1][g[i]][w]);
      const int c = ct + i * kConsumers - g[i] * t.vpr;
      quant_store16<T>(v[i], tile_scale(p, m).inv, p.out + (r0 + g[i]) * p.out_stride + c * W, true);
    }
  }
}

}  // namespace

bool fp8_quantize_rows_ring(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M <= 0 || p.in.K <= 0 || p.in.M > 0x7fffffffLL) return false;
  bool launched = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t row_bytes = p.in.K * int64_t(sizeof(T));
    // Whole rows of 256-element pieces (the box's inner side); padded outputs take the other kernels.
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K || p.in.K % 256 != 0 ||
        row_bytes * kMaxRowsPerChunk < kChunkBytes || row_bytes > kChunkBytes)
      return;
    const int G = static_cast<int>(kChunkBytes / row_bytes);
    const EncodeTiledFn fn = encode_tiled_fn();
    if (fn == nullptr) return;
    CUtensorMap map;
    const cuuint64_t dim[3] = {256, cuuint64_t(p.in.K / 256), cuuint64_t(p.in.M)};
    const cuuint64_t stride[2] = {256 * sizeof(T), cuuint64_t(p.in.stride) * sizeof(T)};
    const cuuint32_t box[3] = {256, cuuint32_t(p.in.K / 256), cuuint32_t(G)};
    const cuuint32_t elem_stride[3] = {1, 1, 1};
    if (fn(&map, tensor_map_dtype<T>(), 3, const_cast<void*>(p.in.ptr), dim, stride, box, elem_stride,
           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return;
    const RowRing t{(p.in.M + G - 1) / G, G, static_cast<int>(p.in.K / kVec16<T>), uint32_t(G * row_bytes)};
    constexpr auto kernel = fp8_row_ring_kernel<T>;
    const int grid = ring_grid<kernel>(t.n_chunks);
    if (grid == 0) return;
    kernel<<<unsigned(grid), kConsumers, kMaxSlots * kChunkBytes, stream>>>(map, p, t);
    launched = true;
  });
  return launched;
}

}  // namespace mslk::quantize
