// K-group FP8 (quantize_fp8_group: one scale per 1 x group_size piece of a row) for 16-bit input
// on the ring of fp8_ring.cuh: persistent CTAs stream 64-row x 256-column boxes (32 KB, one 2-D TMA
// box) through seven slots; a warp row is one box row (lane = 16-byte vector), so a group is L
// adjacent lanes and its amax is a shuffle tree; no CTA barrier. Same arithmetic as fp8_reg.cu's
// group kernel (absmax16, tile_scale, quant_store16, scale_index): the same bits.
#include "quantize/kernels/fp8_ring.cuh"

namespace mslk::quantize {
namespace {

using namespace ring;

constexpr int kBoxCols = 256, kBoxRows = kChunkBytes / (kBoxCols * 2);  // 64 rows of 512 bytes

template <typename T, int L>
__global__ void __launch_bounds__(kConsumers, 1) fp8_group_ring_kernel(const __grid_constant__ CUtensorMap map,
                                                                      Fp8TileParams p, int n_bj, int n_boxes) {
  static_assert(sizeof(T) == 2 && kBoxCols / kVec16<T> == 32, "a box row is one warp of vectors");
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  constexpr int W = kVec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ct = threadIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kMaxSlots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncthreads();
  auto issue = [&](int j) {  // thread 0: box blockIdx.x + j * gridDim.x into slot j % slots
    const int q = blockIdx.x + j * gridDim.x;
    if (q >= n_boxes) return;
    const int s = j % kMaxSlots, bi = q / n_bj;
    mbar_arm(&full[s], kChunkBytes);  // out-of-bounds rows and columns land as zeros and still count
    tma_load_2d(&map, &full[s], ring + int64_t(s) * kChunkBytes, (q - bi * n_bj) * kBoxCols, bi * kBoxRows);
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < kMaxSlots; ++j) issue(j);
  uint4 v[kNV];
  int j = 0;
  for (int q = blockIdx.x; q < n_boxes; q += gridDim.x, ++j) {
    const int s = j % kMaxSlots;
    mbar_wait(&full[s], (j / kMaxSlots) & 1);
    const uint4* chunk = reinterpret_cast<const uint4*>(ring + int64_t(s) * kChunkBytes);
#pragma unroll
    for (int i = 0; i < kNV; ++i) v[i] = chunk[ct + i * kConsumers];
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    if (threadIdx.x == 0) {  // refill the slot once every warp has read it
      mbar_wait(&empty[s], (j / kMaxSlots) & 1);
      issue(j + kMaxSlots);
    }
    const int bi = q / n_bj;
    const int64_t c = int64_t(q - bi * n_bj) * kBoxCols + lane * W;  // this lane's first column
    const bool col_ok = c < p.in.K;
#pragma unroll
    for (int i = 0; i < kNV; ++i) {
      const int64_t r = int64_t(bi) * kBoxRows + warp + i * kConsumerWarps;
      float a = absmax16<T>(v[i]);
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
      if (!col_ok || r >= p.in.M) continue;
      const TileScale sc = tile_scale(p, a);
      if (lane % L == 0) p.scale[scale_index(p, r, c / p.tile_k)] = sc.scale;
      quant_store16<T>(v[i], sc.inv, p.out + r * p.out_stride + c, true);
    }
  }
}

}  // namespace

bool fp8_quantize_groups_ring(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M <= 0 || p.in.K <= 0 || p.in.M > 0x3fffffffLL || p.in.K > 0x3fffffffLL) return false;
  bool launched = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      constexpr int W = kVec16<T>;
      // the group path's preconditions (fp8_reg.cu), and groups that do not straddle a box
      if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K || p.tile_k <= 0 ||
          p.in.K % p.tile_k != 0 || kBoxCols % p.tile_k != 0 || p.tile_k % W != 0)
        return;
      const int64_t n_bj = (p.in.K + kBoxCols - 1) / kBoxCols, n_boxes = (p.in.M + kBoxRows - 1) / kBoxRows * n_bj;
      if (n_boxes > 0x7fffffff) return;
      const EncodeTiledFn fn = encode_tiled_fn();
      if (fn == nullptr) return;
      CUtensorMap map;
      const cuuint64_t dim[2] = {cuuint64_t(p.in.K), cuuint64_t(p.in.M)};
      const cuuint64_t stride[1] = {cuuint64_t(p.in.stride) * sizeof(T)};
      const cuuint32_t box[2] = {kBoxCols, kBoxRows};
      const cuuint32_t elem_stride[2] = {1, 1};
      if (fn(&map, tensor_map_dtype<T>(), 2, const_cast<void*>(p.in.ptr), dim, stride, box, elem_stride,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return;
      auto run = [&](auto kernel_tag) {
        constexpr auto kernel = decltype(kernel_tag)::value;
        const int grid = ring_grid<kernel>(n_boxes);
        if (grid == 0) return;
        kernel<<<unsigned(grid), kConsumers, kMaxSlots * kChunkBytes, stream>>>(map, p, int(n_bj), int(n_boxes));
        launched = true;
      };
#define MSLK_GROUP_RING(L) \
  run(std::integral_constant<decltype(&fp8_group_ring_kernel<T, L>), &fp8_group_ring_kernel<T, L>>{})
      switch (p.tile_k / W) {
        case 1: MSLK_GROUP_RING(1); break;
        case 2: MSLK_GROUP_RING(2); break;
        case 4: MSLK_GROUP_RING(4); break;
        case 8: MSLK_GROUP_RING(8); break;
        case 16: MSLK_GROUP_RING(16); break;
        case 32: MSLK_GROUP_RING(32); break;
        default: break;
      }
#undef MSLK_GROUP_RING
    }
  });
  return launched;
}

}  // namespace mslk::quantize
