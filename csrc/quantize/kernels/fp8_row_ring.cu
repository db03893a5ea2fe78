// Rowwise FP8 for rows of 4-16 KB (K % 256 == 0) with TMA prefetch: persistent CTAs of eight
// warps; each warp owns S shared-memory slots and streams its own rows through them (one 3-D TMA
// box a row: [K / 256][256]). A warp moves a row into registers, re-arms the slot for its row S
// ahead at once, then reduces and stores from registers: no CTA barrier anywhere, and while a warp
// works, its next rows are in flight. Same arithmetic as the other row kernels.
// (A first version cut 32 KB chunks of whole rows and reduced each row across the CTA: one
// __syncthreads a chunk, 101 vs 56 us at 8192^2.)
#include "quantize/kernels/fp8_ring.cuh"

namespace mslk::quantize {
namespace {

using namespace ring;

constexpr int kWarps = kConsumerWarps;
constexpr int kMaxSlotsPerWarp = 4;
constexpr int kSlotRegion = kMaxSlots * kChunkBytes / kWarps;  // 28 KB a warp

struct RowRing {
  int slots;        // S, per warp
  int slot_bytes;   // row bytes rounded up to 128
  uint32_t row_bytes;
  int nv;           // 16-byte vectors a row
};

template <typename T, int NVW>
__global__ void __launch_bounds__(kConsumers, 1) fp8_row_ring_kernel(const __grid_constant__ CUtensorMap map,
                                                                    Fp8TileParams p, RowRing t) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kWarps * kMaxSlotsPerWarp];
  constexpr int W = kVec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t* bar = full + warp * kMaxSlotsPerWarp;
  unsigned char* slots = ring + warp * kSlotRegion;
  if (lane == 0) {
    for (int s = 0; s < t.slots; ++s) mbar_init(&bar[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncwarp();
  const int64_t first = int64_t(blockIdx.x) * kWarps + warp, step = int64_t(gridDim.x) * kWarps;
  auto issue = [&](int64_t n) {  // lane 0: this warp's row n
    const int64_t r = first + n * step;
    if (r >= p.in.M) return;
    const int s = static_cast<int>(n % t.slots);
    mbar_arm(&bar[s], t.row_bytes);
    tma_load_3d(&map, &bar[s], slots + s * t.slot_bytes, 0, 0, static_cast<int>(r));
  };
  if (lane == 0)
    for (int n = 0; n < t.slots; ++n) issue(n);
  uint4 v[NVW];
  int64_t n = 0;
  for (int64_t r = first; r < p.in.M; r += step, ++n) {
    const int s = static_cast<int>(n % t.slots);
    mbar_wait(&bar[s], static_cast<uint32_t>(n / t.slots) & 1);
    const uint4* row = reinterpret_cast<const uint4*>(slots + s * t.slot_bytes);
#pragma unroll
    for (int i = 0; i < NVW; ++i) v[i] = lane + i * 32 < t.nv ? row[lane + i * 32] : make_uint4(0, 0, 0, 0);
    __syncwarp();
    if (lane == 0) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the warp's reads before the TMA write
      issue(n + t.slots);
    }
    const bool valid = row_is_valid(p, r);  // rows past zero_start_index_M quantize zeros
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < NVW; ++i) m = fmaxf(m, absmax16<T>(v[i]));
    const TileScale sc = tile_scale(p, valid ? warp_max(m) : 0.f);
    if (lane == 0) p.scale[scale_index(p, r, 0)] = sc.scale;
    uint8_t* out = p.out + r * p.out_stride + lane * W;
#pragma unroll
    for (int i = 0; i < NVW; ++i) {
      uint4 x = v[i];
      if (!valid) x = make_uint4(0, 0, 0, 0);
      if (lane + i * 32 < t.nv) quant_store16<T>(x, sc.inv, out + i * 32 * W, true);
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
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K || p.in.K % 256 != 0 || row_bytes < 4096 ||
        row_bytes > 16384)
      return;
    const int slot_bytes = static_cast<int>((row_bytes + 127) / 128 * 128);
    const RowRing t{std::min(kMaxSlotsPerWarp, kSlotRegion / slot_bytes), slot_bytes, uint32_t(row_bytes),
                    static_cast<int>(row_bytes / 16)};
    const EncodeTiledFn fn = encode_tiled_fn();
    if (fn == nullptr) return;
    CUtensorMap map;
    const cuuint64_t dim[3] = {256, cuuint64_t(p.in.K / 256), cuuint64_t(p.in.M)};
    const cuuint64_t stride[2] = {256 * sizeof(T), cuuint64_t(p.in.stride) * sizeof(T)};
    const cuuint32_t box[3] = {256, cuuint32_t(p.in.K / 256), 1};
    const cuuint32_t elem_stride[3] = {1, 1, 1};
    if (fn(&map, tensor_map_dtype<T>(), 3, const_cast<void*>(p.in.ptr), dim, stride, box, elem_stride,
           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return;
    const int64_t warps = (p.in.M + kWarps - 1) / kWarps;
    auto run = [&](auto kernel_tag) {
      constexpr auto kernel = decltype(kernel_tag)::value;
      const int grid = ring_grid<kernel>(warps);
      if (grid == 0) return;
      kernel<<<unsigned(grid), kConsumers, kMaxSlots * kChunkBytes, stream>>>(map, p, t);
      launched = true;
    };
    const int nvw = (t.nv + 31) / 32;  // vectors a lane: <= 8 / 16 / 32 for rows of 4 / 8 / 16 KB
    if (nvw <= 8) run(std::integral_constant<decltype(&fp8_row_ring_kernel<T, 8>), &fp8_row_ring_kernel<T, 8>>{});
    else if (nvw <= 16) run(std::integral_constant<decltype(&fp8_row_ring_kernel<T, 16>), &fp8_row_ring_kernel<T, 16>>{});
    else run(std::integral_constant<decltype(&fp8_row_ring_kernel<T, 32>), &fp8_row_ring_kernel<T, 32>>{});
  });
  return launched;
}

}  // namespace mslk::quantize
