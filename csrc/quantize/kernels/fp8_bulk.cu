// Row and K-group quantizers on a bulk-copy ring (schedule bulk, opt-in: it lost to the default
// kernels, docs/design/quantize.md): persistent CTAs stream whole input rows into a STAGES-deep
// shared-memory ring with cp.async.bulk (the 1-D TMA) completing on per-stage mbarriers, so while
// a CTA reduces and writes row i, its next rows are already in flight (the register kernel of
// fp8_reg.cu leaves the DRAM queue idle during its reduce-then-write step).
// Same arithmetic as the register kernel (tile_scale, quant_store16): results are bit-identical.
#include "common/sm90_ptx.cuh"
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxStages = 8;
constexpr int64_t kMaxRowBytes = 48 * 1024;   // a stage holds one row
constexpr int64_t kRingBytes = 96 * 1024;     // bytes in flight per CTA we aim for

// One 1-D bulk copy (cp.async.bulk) of `bytes` into shared memory, completing on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          ptx::smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(ptx::smem_u32(bar))
      : "memory");
}

// L == 0: one scale per row; L > 0: one scale per K-group of L 16-byte vectors, reduced over the
// L consecutive lanes that hold it (L divides 32; vector i of the row is lane-contiguous).
template <typename T, int L>
__global__ void __launch_bounds__(kThreads) fp8_bulk_kernel(Fp8TileParams p, int stages, int64_t stage_bytes,
                                                            bool vec_store) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  constexpr int W = kVec16<T>;
  const int64_t M = p.in.M, K = p.in.K;
  const int nv = static_cast<int>(K / W);
  const uint32_t row_bytes = static_cast<uint32_t>(K * sizeof(T));
  const T* in = static_cast<const T*>(p.in.ptr);

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) ptx::mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
  }
  __syncthreads();
  auto issue = [&](int s, int64_t r) {  // thread 0 only
    ptx::mbar_arrive_expect_tx(&full[s], row_bytes);
    bulk_load(ring + s * stage_bytes, in + r * p.in.stride, row_bytes, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int s = 0; s < stages; ++s) {
      const int64_t r = blockIdx.x + int64_t(s) * gridDim.x;
      if (r < M) issue(s, r);
    }

  int it = 0;
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x, ++it) {
    const int s = it % stages;
    ptx::mbar_wait_spin(&full[s], (it / stages) & 1);
    const uint4* v = reinterpret_cast<const uint4*>(ring + s * stage_bytes);
    uint8_t* out = p.out + r * p.out_stride;
    if constexpr (L == 0) {
      const bool valid = row_is_valid(p, r);  // rows past zero_start_index_M quantize zeros
      float m = 0.f;
      if (valid)
        for (int i = threadIdx.x; i < nv; i += blockDim.x) m = fmaxf(m, absmax16<T>(v[i]));
      const TileScale sc = tile_scale(p, block_max(m));
      if (threadIdx.x == 0) p.scale[scale_index(p, r, 0)] = sc.scale;
      const uint4 zero = make_uint4(0, 0, 0, 0);
      for (int i = threadIdx.x; i < nv; i += blockDim.x) quant_store16<T>(valid ? v[i] : zero, sc.inv, out + i * W, vec_store);
    } else {
      // every lane of a group takes part in the shuffles: loop over whole warps' worth of vectors
      for (int base = 0; base < nv; base += blockDim.x) {
        const int i = base + threadIdx.x;
        const uint4 x = i < nv ? v[i] : make_uint4(0, 0, 0, 0);
        float a = absmax16<T>(x);
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
        if (i < nv) {
          const TileScale sc = tile_scale(p, a);
          if (threadIdx.x % L == 0) p.scale[scale_index(p, r, int64_t(i) * W / p.tile_k)] = sc.scale;
          quant_store16<T>(x, sc.inv, out + i * W, vec_store);
        }
      }
    }
    if (p.out_stride > K) zero_padding(p, r, r + 1);
    __syncthreads();  // every thread is done reading stage s
    const int64_t next = r + int64_t(stages) * gridDim.x;
    if (threadIdx.x == 0 && next < M) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic reads before the async write
      issue(s, next);
    }
  }
}

template <typename T, int L>
bool launch(const Fp8TileParams& p, cudaStream_t st) {
  const int64_t row_bytes = p.in.K * int64_t(sizeof(T));
  const int64_t stage_bytes = (row_bytes + 127) / 128 * 128;
  const int stages = static_cast<int>(std::min<int64_t>(kMaxStages, std::max<int64_t>(2, kRingBytes / stage_bytes)));
  const int64_t smem = stages * stage_bytes;
  constexpr auto kernel = fp8_bulk_kernel<T, L>;
  const int grid = persistent_grid<kernel>(p.in.M, kThreads, static_cast<size_t>(smem));
  if (grid == 0) return false;  // the caller takes another path
  kernel<<<static_cast<unsigned>(grid), kThreads, static_cast<size_t>(smem), st>>>(p, stages, stage_bytes,
                                                                                   p.out_stride % kVec16<T> == 0);
  return true;
}

}  // namespace

bool fp8_quantize_rows_bulk(const Fp8TileParams& p, cudaStream_t st, bool groups) {
  if (p.in.M <= 0 || p.in.K <= 0 || p.in.M > 0x7fffffffLL) return false;
  bool ok = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVec16<T>;
    const int64_t row_bytes = p.in.K * int64_t(sizeof(T));
    if (!rows_vectorizable<T>(p.in, p.tile_k) || row_bytes > kMaxRowBytes) return;
    if (!groups) {
      ok = launch<T, 0>(p, st);
      return;
    }
    if (p.out_stride != p.in.K || p.tile_k % W != 0) return;
    switch (p.tile_k / W) {
      case 1: ok = launch<T, 1>(p, st); break;
      case 2: ok = launch<T, 2>(p, st); break;
      case 4: ok = launch<T, 4>(p, st); break;
      case 8: ok = launch<T, 8>(p, st); break;
      case 16: ok = launch<T, 16>(p, st); break;
      case 32: ok = launch<T, 32>(p, st); break;
      default: break;
    }
  });
  return ok;
}

}  // namespace mslk::quantize
