// Register-resident FP8 quantizer for rows, blocks and K-groups. A CTA tile (cta_m rows x cta_k
// columns, <= 8192 16-byte vectors) is held in registers, so every input byte is read once.
//   rows:   CTA tile = 1 x K, one scale per tile (block reduction)
//   blocks: CTA tile = block_m x block_k, one scale per tile
//   groups: CTA tile = 1 x (whole groups), one scale per L consecutive lanes (shuffles)
// Two schedules of the same tile code:
//   one-shot: one CTA per tile (blocks of 4096-8192 vectors, such as 256x256 bf16: the
//             register + shared-memory kernel fp8_hybrid_kernel, two CTAs an SM);
//   staged:   persistent CTAs; while a tile is processed from registers, the next one streams
//             into shared memory with cp.async (each thread owns its slots).
// Larger tiles, or inputs that are not 16-byte aligned, go to the two-pass tile kernel. Which
// shapes reach this file at all is fp8_dispatch.cu's choice. Measured figures and dropped
// variants: docs/design/quantize.md.
#include "common/sm90_ptx.cuh"
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kMaxVecs = 8192;

struct CtaTiling {
  int64_t cta_m, cta_k;  // CTA tile
  int n_cta_k;           // CTA tiles along K
  int n_tiles;
  int vpr;               // vectors per CTA-tile row
};

struct TileGeom {
  int bi, bj, rows, vcols;
  int64_t r0, c0;
};

__device__ __forceinline__ TileGeom geom(const Fp8TileParams& p, const CtaTiling& t, int tile, int W) {
  TileGeom g;
  g.bi = tile / t.n_cta_k;
  g.bj = tile - g.bi * t.n_cta_k;
  g.r0 = int64_t(g.bi) * t.cta_m;
  g.c0 = int64_t(g.bj) * t.cta_k;
  g.rows = static_cast<int>(t.cta_m < p.in.M - g.r0 ? t.cta_m : p.in.M - g.r0);
  g.vcols = static_cast<int>((t.cta_k < p.in.K - g.c0 ? t.cta_k : p.in.K - g.c0) / W);
  return g;
}

// Visit the NV vectors this thread owns in `tile`: f(i, pointer or nullptr when outside).
template <typename T, int NV, bool ONE_ROW, typename F>
__device__ __forceinline__ void for_each_vec(const Fp8TileParams& p, const CtaTiling& t, int tile, F&& f) {
  constexpr int W = kVec16<T>;
  const TileGeom g = geom(p, t, tile, W);
  const bool valid = !ONE_ROW || row_is_valid(p, g.r0);
  const T* in = static_cast<const T*>(p.in.ptr) + g.r0 * p.in.stride + g.c0;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    int r, c;
    tile_vec_pos<ONE_ROW>(i, t.vpr, r, c);
    f(i, valid && r < g.rows && c < g.vcols ? in + r * p.in.stride + c * W : nullptr);
  }
}

// L == 0: one scale per CTA tile; L > 0: one scale per group of L lanes (a K-group).
template <typename T, int NV, int L, bool ONE_ROW>
__device__ __forceinline__ void quantize_tile(const Fp8TileParams& p, const CtaTiling& t, int tile,
                                              const uint4 (&v)[NV], bool vec_store) {
  constexpr int W = kVec16<T>;
  const TileGeom g = geom(p, t, tile, W);
  uint8_t* out = p.out + g.r0 * p.out_stride + g.c0;
  if constexpr (L == 0) {
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) m = fmaxf(m, absmax16<T>(v[i]));
    const TileScale s = tile_scale(p, block_max(m));
    if (threadIdx.x == 0) p.scale[scale_index(p, g.bi, g.bj)] = s.scale;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      int r, c;
      tile_vec_pos<ONE_ROW>(i, t.vpr, r, c);
      if (r < g.rows && c < g.vcols) quant_store16<T>(v[i], s.inv, out + r * p.out_stride + c * W, vec_store);
    }
  } else {
    // The tile's first K-group (c0 is a multiple of tile_k): one 64-bit division a tile. Dividing
    // c0 + c * W by tile_k for every vector ran a 64-bit division (a call) in the scale-store lanes.
    const int64_t group0 = g.c0 / p.tile_k;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      float a = absmax16<T>(v[i]);
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
      const int c = threadIdx.x + i * blockDim.x;  // group tiles are one row
      if (c >= g.vcols) continue;                  // after the shuffles: every lane took part
      const TileScale s = tile_scale(p, a);
      // lanes of a group are consecutive and start at a multiple of L (blockDim % 32 == 0)
      if (threadIdx.x % L == 0) p.scale[scale_index(p, g.r0, group0 + c / L)] = s.scale;
      quant_store16<T>(v[i], s.inv, out + c * W, vec_store);
    }
  }
  if (ONE_ROW && g.c0 + t.cta_k >= p.in.K) zero_padding(p, g.r0, g.r0 + 1);
}

// Plain 16-byte loads: fp8_warp_rows.cu's streaming loads were timed here and lost
// (docs/design/quantize.md).
template <typename T, int NV, int L, bool ONE_ROW>
__global__ void __launch_bounds__(NV == 8 ? 1024 : 256) fp8_oneshot_kernel(Fp8TileParams p, CtaTiling t, bool vec_store) {
  uint4 v[NV];
  for_each_vec<T, NV, ONE_ROW>(p, t, blockIdx.x, [&](int i, const T* src) {
    v[i] = src ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
  });
  quantize_tile<T, NV, L, ONE_ROW>(p, t, blockIdx.x, v, vec_store);
}

__device__ __forceinline__ void cp_async16(uint4* dst, const void* src) {
  // src == nullptr: zero-fill (src-size 0 reads nothing; a valid address is still passed)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ptx::smem_u32(dst)), "l"(src ? src : dst),
               "r"(src ? 16 : 0));
}

template <typename T, int NV, int L, bool ONE_ROW>
__global__ void __launch_bounds__(NV == 8 ? 1024 : 256) fp8_staged_kernel(Fp8TileParams p, CtaTiling t, bool vec_store) {
  extern __shared__ uint4 stage[];  // slot (i, thread) belongs to that thread alone
  auto issue = [&](int tile) {
    for_each_vec<T, NV, ONE_ROW>(p, t, tile, [&](int i, const T* src) { cp_async16(&stage[i * blockDim.x + threadIdx.x], src); });
  };
  int tile = blockIdx.x;
  if (tile < t.n_tiles) issue(tile);
  asm volatile("cp.async.commit_group;\n");
  for (; tile < t.n_tiles; tile += gridDim.x) {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    uint4 v[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i) v[i] = stage[i * blockDim.x + threadIdx.x];
    if (tile + gridDim.x < t.n_tiles) issue(tile + gridDim.x);
    asm volatile("cp.async.commit_group;\n");
    quantize_tile<T, NV, L, ONE_ROW>(p, t, tile, v, vec_store);
  }
}

// Schedule staged / oneshot forces one; otherwise staged for whole rows of at most 16 KB (the
// CTA's staging buffer is its row: several CTAs still fit an SM) and one-shot for the rest
// (staged lost on longer rows, blocks and groups; docs/design/quantize.md).
// Blocks of 4096 < vectors <= 8192 (256x256 bf16 / fp16 tiles, 128 KB): 512 threads hold half of
// the tile in registers and half in shared memory, each thread in its own slots filled by cp.async
// (so no barrier until the amax), and two CTAs share an SM: one's reduce-and-store runs while the
// other's loads are in flight. The one-shot kernel (1024 threads, the whole tile in registers)
// fills an SM with one tile, so nothing loads while it reduces and stores.
// A shared-memory read the compiler neither hoists nor merges with another (volatile asm).
__device__ __forceinline__ uint4 lds128(const uint4* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(ptx::smem_u32(p)));
  return v;
}

// vectors a thread: registers, shared memory (8 + 8 spilled 64 bytes in the persistent loop at 64 registers)
constexpr int kHybridThreads = 512, kHybridNR = 6, kHybridNS = 10;
constexpr int kHybridSmem = kHybridNS * kHybridThreads * 16;

// By default the grid is one CTA a tile and the loop below runs once. Persistent
// (schedule hybrid-persistent: two CTAs an SM, tiles blockIdx.x, + gridDim.x, ...): once a
// tile's scale is known the register half is stored first, and those registers take the next
// tile's loads while the shared half is stored; then the shared slots take theirs. Timed slower
// (docs/design/quantize.md); kept for the next tuning round.
template <typename T>
__global__ void __launch_bounds__(kHybridThreads, 2) fp8_hybrid_kernel(Fp8TileParams p, CtaTiling t, bool vec_store) {
  constexpr int W = kVec16<T>, NR = kHybridNR, NS = kHybridNS;
  extern __shared__ uint4 stage[];  // slot (j, thread) belongs to that thread alone
  uint4 v[NR];
  auto load_shared = [&](int tile) {
    for_each_vec<T, NR + NS, false>(p, t, tile, [&](int i, const T* src) {
      if (i >= NR) cp_async16(&stage[(i - NR) * blockDim.x + threadIdx.x], src);
    });
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  auto load_regs = [&](int tile) {
    for_each_vec<T, NR + NS, false>(p, t, tile, [&](int i, const T* src) {
      if (i < NR) v[i] = src ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    });
  };
  int tile = blockIdx.x;
  if (tile >= t.n_tiles) return;
  load_shared(tile);
  load_regs(tile);
  for (; tile < t.n_tiles; tile += gridDim.x) {
    const int next = tile + gridDim.x;
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < NR; ++i) m = fmaxf(m, absmax16<T>(v[i]));
    // Opaque to the optimizer (as in fp8_warp_rows.cu): else it keeps the amax's unpacked floats
    // alive until the stores, and the shared-memory vectors in registers instead of reading them
    // again (ptxas spilled 176 bytes a thread).
#pragma unroll
    for (int i = 0; i < NR; ++i) asm("" : "+r"(v[i].x), "+r"(v[i].y), "+r"(v[i].z), "+r"(v[i].w));
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < NS; ++j) m = fmaxf(m, absmax16<T>(lds128(&stage[j * blockDim.x + threadIdx.x])));
    const TileGeom g = geom(p, t, tile, W);
    const TileScale s = tile_scale(p, block_max(m));
    if (threadIdx.x == 0) p.scale[scale_index(p, g.bi, g.bj)] = s.scale;
    uint8_t* out = p.out + g.r0 * p.out_stride + g.c0;
    auto store = [&](int i, const uint4& u) {
      int r, c;
      tile_vec_pos<false>(i, t.vpr, r, c);
      if (r < g.rows && c < g.vcols) quant_store16<T>(u, s.inv, out + r * p.out_stride + c * W, vec_store);
    };
#pragma unroll
    for (int i = 0; i < NR; ++i) store(i, v[i]);
    if (next < t.n_tiles) load_regs(next);
    // each thread reads only its own slots, and each read feeds a store before the next tile's
    // cp.async is issued: no barrier between them
#pragma unroll
    for (int j = 0; j < NS; ++j) store(NR + j, lds128(&stage[j * blockDim.x + threadIdx.x]));
    if (next < t.n_tiles) load_shared(next);
  }
}

// Whether blocks of `vecs` vectors take fp8_hybrid_kernel: by default one CTA a tile;
// hybrid-persistent: two CTAs an SM walking the tiles; any other schedule (oneshot: the
// 1024-thread kernel) does not take it (one CTA a tile was the fastest of the three).
bool use_hybrid(int vecs, Fp8Schedule s, bool* persistent) {
  // tiles of <= 4096 vectors already fit the one-shot kernel twice an SM (512 threads x 8 vectors)
  if (vecs <= 4096 || vecs > kHybridThreads * (kHybridNR + kHybridNS)) return false;
  *persistent = s == Fp8Schedule::kHybridPersistent;
  return *persistent || s == Fp8Schedule::kAuto;
}

template <typename T>
bool launch_hybrid(const Fp8TileParams& p, const CtaTiling& t, bool persistent, cudaStream_t s) {
  int dev = 0, sms = 0, per_sm = 2;
  static SmemLimitOnce smem_limit;
  static KernelOccupancy occupancy;
  if (current_device_sms(&dev, &sms) != cudaSuccess ||
      smem_limit.ensure(fp8_hybrid_kernel<T>, dev, kHybridSmem) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // the caller takes the one-shot kernel
  }
  int grid = t.n_tiles;
  if (persistent) {
    occupancy.blocks_per_sm(fp8_hybrid_kernel<T>, dev, kHybridThreads, kHybridSmem, &per_sm);
    grid = std::max(1, std::min(t.n_tiles, sms * std::max(per_sm, 1)));
  }
  fp8_hybrid_kernel<T><<<unsigned(grid), kHybridThreads, kHybridSmem, s>>>(p, t, p.out_stride % kVec16<T> == 0);
  return true;
}

bool use_staged(Fp8Schedule s, bool whole_rows, int stage_bytes) {
  if (s == Fp8Schedule::kStaged) return true;
  return s == Fp8Schedule::kAuto && whole_rows && stage_bytes <= 16 * 1024;
}

// Vectors per thread: the fewest that keep the CTA at <= 256 threads, up to 8 (1024 threads).
template <typename T, int NV, int L, bool ONE_ROW>
bool try_launch(const Fp8TileParams& p, const CtaTiling& t, Fp8Schedule sched, cudaStream_t s) {
  const int vecs = static_cast<int>(t.cta_m * t.vpr);
  if (vecs > (NV == 8 ? 1024 : 256) * NV) return false;
  const int threads = ((vecs + NV - 1) / NV + 31) / 32 * 32;
  const bool vec_store = p.out_stride % kVec16<T> == 0;
  if (!use_staged(sched, ONE_ROW && L == 0 && t.cta_m == 1 && t.n_cta_k == 1, threads * NV * 16)) {
    fp8_oneshot_kernel<T, NV, L, ONE_ROW><<<unsigned(t.n_tiles), threads, 0, s>>>(p, t, vec_store);
    return true;
  }
  auto kernel = fp8_staged_kernel<T, NV, L, ONE_ROW>;
  const int smem = threads * NV * 16;
  int dev = 0, sms = 132, per_sm = 1;
  static KernelOccupancy occupancy;  // asked once per (device, block size), not per call
  current_device_sms(&dev, &sms);
  occupancy.blocks_per_sm(kernel, dev, threads, smem, &per_sm);
  const int grid = std::max(1, std::min(t.n_tiles, sms * std::max(per_sm, 1)));
  kernel<<<grid, threads, smem, s>>>(p, t, vec_store);
  return true;
}

template <typename T, int L, bool ONE_ROW>
bool launch_nv(const Fp8TileParams& p, const CtaTiling& t, Fp8Schedule sched, cudaStream_t s) {
  if constexpr (L > 0) {  // group CTAs hold <= 1024 vectors
    return try_launch<T, 1, L, true>(p, t, sched, s) || try_launch<T, 2, L, true>(p, t, sched, s) ||
           try_launch<T, 4, L, true>(p, t, sched, s);
  } else {
    return try_launch<T, 1, L, ONE_ROW>(p, t, sched, s) || try_launch<T, 2, L, ONE_ROW>(p, t, sched, s) ||
           try_launch<T, 4, L, ONE_ROW>(p, t, sched, s) || try_launch<T, 8, L, ONE_ROW>(p, t, sched, s);
  }
}

template <Fp8Mode mode>
cudaError_t launch(const Fp8TileParams& p, Fp8Schedule sched, cudaStream_t s) {
  if (p.in.M == 0 || p.in.K == 0) return cudaSuccess;
  bool launched = false;
  cudaError_t err = dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVec16<T>;
    if (!rows_vectorizable<T>(p.in, p.tile_k)) return;
    CtaTiling t{};
    t.cta_m = mode == Fp8Mode::kBlocks ? p.tile_m : 1;
    t.cta_k = mode == Fp8Mode::kBlocks ? p.tile_k : p.in.K;
    if (mode == Fp8Mode::kGroups)  // groups are independent: ~1024 vectors a CTA
      t.cta_k = std::min<int64_t>(p.in.K, std::max<int64_t>(1, 1024 / (p.tile_k / W)) * p.tile_k);
    if (t.cta_m * (t.cta_k / W) > kMaxVecs) return;
    t.vpr = static_cast<int>(t.cta_k / W);
    t.n_cta_k = static_cast<int>(ceil_div(p.in.K, t.cta_k));
    const int64_t n_tiles = int64_t(ceil_div(p.in.M, t.cta_m)) * t.n_cta_k;
    if (n_tiles > 0x7fffffff) return;
    t.n_tiles = static_cast<int>(n_tiles);
    if constexpr (mode != Fp8Mode::kGroups) {
      bool persistent = false;
      if (t.cta_m > 1 && use_hybrid(static_cast<int>(t.cta_m * t.vpr), sched, &persistent) &&
          launch_hybrid<T>(p, t, persistent, s)) {
        launched = true;
        return;
      }
      launched = t.cta_m == 1 ? launch_nv<T, 0, true>(p, t, sched, s) : launch_nv<T, 0, false>(p, t, sched, s);
    } else {
      if (p.out_stride != p.in.K) return;
      switch (p.tile_k / W) {
        case 1: launched = launch_nv<T, 1, true>(p, t, sched, s); break;
        case 2: launched = launch_nv<T, 2, true>(p, t, sched, s); break;
        case 4: launched = launch_nv<T, 4, true>(p, t, sched, s); break;
        case 8: launched = launch_nv<T, 8, true>(p, t, sched, s); break;
        case 16: launched = launch_nv<T, 16, true>(p, t, sched, s); break;
        case 32: launched = launch_nv<T, 32, true>(p, t, sched, s); break;
        default: break;
      }
    }
  });
  if (err != cudaSuccess || launched) return err;
  return fp8_quantize_tiles(p, s);
}

}  // namespace

cudaError_t fp8_quantize_reg(const Fp8TileParams& p, Fp8Mode mode, Fp8Schedule schedule, cudaStream_t s) {
  switch (mode) {
    case Fp8Mode::kRows: return launch<Fp8Mode::kRows>(p, schedule, s);
    case Fp8Mode::kBlocks: return launch<Fp8Mode::kBlocks>(p, schedule, s);
    case Fp8Mode::kGroups: break;
  }
  return launch<Fp8Mode::kGroups>(p, schedule, s);
}

}  // namespace mslk::quantize
