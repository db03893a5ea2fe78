// Token movement of the MoE layer: gather (+scale, +FP8 quant), scatter-add (dense, padded,
// first-dim), SwiGLU (+FP8 quant). One CTA per row, 16-byte vectors where rows allow them
// (a scalar path otherwise: any D). The padded and first-dim scatter-adds are vector atomics
// (red.global.add.v4 on sm_90): the order of additions into one row is unspecified. The dense
// scatter-add is a gather instead (deterministic, bit-identical to the CPU reference): a stable
// radix sort of the rows by token, then one CTA per output row reads it once, adds its rows in
// ascending order and writes it once. Rows past the valid count are not written. Rows whose ids
// are out of range are skipped (the CPU reference raises).
#include <cooperative_groups.h>

#include "common/device_attrs.h"
#include "common/fp8.h"
#include "moe/kernels/moe_device.cuh"

namespace mslk::moe {
namespace {

constexpr int kCopyThreads = 128, kQuantThreads = 256;

// ---- gather ------------------------------------------------------------------------------
struct RowSrc {
  int64_t t = -1;
  float s = 0.f;
};
__device__ __forceinline__ RowSrc gather_src(const GatherParams& p, int64_t i) {
  RowSrc r;
  if (i >= read_count(p.valid, p.A)) return r;
  const int64_t t = load_idx(p.tok, p.idx64, i), e = load_idx(p.exp, p.idx64, i);
  if (t < 0 || t >= p.T || e < 0 || e >= p.E) return r;
  r.t = t;
  r.s = load_any(p.scores, p.score_dtype, t * p.stride_t + e * p.stride_e);
  return r;
}

template <typename T>
__global__ void __launch_bounds__(kCopyThreads) gather_kernel(GatherParams p, bool vec) {
  const int64_t i = blockIdx.x;
  const RowSrc r = gather_src(p, i);
  if (r.t < 0) return;
  const T* x = static_cast<const T*>(p.x) + r.t * p.D;
  T* o = static_cast<T*>(p.out) + i * p.D;
  if (vec) {
    constexpr int V = kVec16<T>;
    const uint4* xs = reinterpret_cast<const uint4*>(x);
    uint4* os = reinterpret_cast<uint4*>(o);
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < p.D / V; v += blockDim.x) {
      float f[V];
      unpack16<T>(__ldg(xs + v), f);
#pragma unroll
      for (int j = 0; j < V; ++j) f[j] *= r.s;
      os[v] = pack16<T>(f);
    }
  } else {
    for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) o[d] = from_f32<T>(to_f32(x[d]) * r.s);
  }
}

// Row-wise FP8 quantization of y = f(d) by one CTA: pass 1 the amax, pass 2 the bytes (the row
// is re-read, from L1/L2). Same arithmetic as the CPU reference: scale = c / 448, q = sat(y * 448 / c).
template <typename F>
__device__ __forceinline__ void quant_row(F&& y, int64_t D, uint8_t* out, float* scale, const float* ub) {
  float amax = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) amax = fmaxf(amax, fabsf(y(d)));
  amax = block_max(amax);
  float c = fmaxf(amax, kFp8Eps);
  if (ub) c = fminf(c, *ub);
  const float inv = kFp8E4M3Max / c;
  if (threadIdx.x == 0) *scale = c / kFp8E4M3Max;
  const int64_t D4 = D / 4;
  if ((reinterpret_cast<uintptr_t>(out) & 3) == 0) {
    for (int64_t q = threadIdx.x; q < D4; q += blockDim.x) {
      const int64_t d = 4 * q;
      const uint32_t w = f32x2_to_e4m3x2(y(d) * inv, y(d + 1) * inv) |
                         (uint32_t(f32x2_to_e4m3x2(y(d + 2) * inv, y(d + 3) * inv)) << 16);
      reinterpret_cast<uint32_t*>(out)[q] = w;
    }
    for (int64_t d = 4 * D4 + threadIdx.x; d < D; d += blockDim.x) out[d] = f32_to_e4m3(y(d) * inv);
  } else {
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) out[d] = f32_to_e4m3(y(d) * inv);
  }
}

template <typename T>
__global__ void __launch_bounds__(kQuantThreads) gather_quant_kernel(GatherParams p) {
  const int64_t i = blockIdx.x;
  const RowSrc r = gather_src(p, i);
  if (r.t < 0) return;
  const T* x = static_cast<const T*>(p.x) + r.t * p.D;
  quant_row([&](int64_t d) { return to_f32(x[d]) * r.s; }, p.D, static_cast<uint8_t*>(p.out) + i * p.D,
            p.out_scale + i, p.scale_ub);
}

// ---- dense scatter-add: stable sort of the rows by token, then a gather per output row -----
// scatter_sort_kernel (cooperative): key of row i = its token (N when i >= valid or the id is out
// of range), LSD radix sort of (key, i) with 8-bit digits, ceil(bit_width(N) / 8) passes. Each
// pass is a stable counting sort: CTA g owns a contiguous chunk of rows, warp w a contiguous part
// of it; per-warp digit counts, a prefix over the warps, per-CTA counts to a [G][256] workspace,
// a grid barrier, column sums (every CTA), and each warp places its rows in order (ranks among
// equal digits by __match_any_sync). Last, every output token's range [begin, end) of sorted rows.
namespace cg = cooperative_groups;
constexpr int kSortThreads = 512, kSortWarps = kSortThreads / 32, kDigits = 256;

__global__ void __launch_bounds__(kSortThreads) scatter_sort_kernel(ScatterAddParams p, int passes, int chunk) {
  __shared__ int hist[kSortWarps * kDigits];  // per-warp digit counts, then cursors
  __shared__ int tot_s[kDigits], pre_s[kDigits];
  __shared__ int warp_tot[kSortWarps];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = blockIdx.x, G = gridDim.x;
  const int A = static_cast<int>(p.A), N = static_cast<int>(p.N);
  const int valid = static_cast<int>(read_count(p.valid, p.A));
  // keys of buffer b at ws + b * A, rows at ws + (2 + b) * A
  auto keys = [&](int b) { return p.workspace + b * static_cast<int64_t>(A); };
  auto rows = [&](int b) { return p.workspace + (2 + b) * static_cast<int64_t>(A); };
  int* cnt = p.workspace + 4 * static_cast<int64_t>(A);  // [G][256]
  int* range = cnt + scatter_add_max_ctas(p.A) * kDigits;  // [N][2]
  for (int64_t i = static_cast<int64_t>(g) * kSortThreads + tid; i < 2 * static_cast<int64_t>(N);
       i += static_cast<int64_t>(G) * kSortThreads)
    range[i] = 0;
  const int r0 = min(g * chunk, A), r1 = min(r0 + chunk, A);
  const int per_warp = (r1 - r0 + kSortWarps - 1) / kSortWarps;
  const int a = min(r0 + warp * per_warp, r1), b = min(a + per_warp, r1);
  int* my_hist = hist + warp * kDigits;
  cg::grid_group grid = cg::this_grid();

  auto key0 = [&](int i) {
    if (i >= valid) return N;
    const int64_t t = load_idx(p.tok, p.idx64, i);
    return t >= 0 && t < N ? static_cast<int>(t) : N;
  };

  for (int pass = 0; pass < passes; ++pass) {
    const int shift = 8 * pass;
    const int* sk = keys((pass + 1) & 1);  // unused in pass 0 (keys from token_indices)
    const int* sr = rows((pass + 1) & 1);
    int* dk = keys(pass & 1);
    int* dr = rows(pass & 1);
    for (int i = tid; i < kSortWarps * kDigits; i += kSortThreads) hist[i] = 0;
    __syncthreads();
    for (int s = a + lane; s < b; s += 32) {
      const int k = pass ? sk[s] : key0(s);
      atomicAdd(my_hist + ((k >> shift) & 255), 1);
    }
    __syncthreads();
    if (tid < kDigits) {  // prefix over the warps, CTA count to the workspace
      cnt[g * kDigits + tid] = hist_excl_over_warps<kSortWarps>(hist, kDigits, tid);
      tot_s[tid] = 0;
      pre_s[tid] = 0;
    }
    grid.sync();
    {  // column sums: 4 digits x every 8th CTA row a thread, 8 rows in flight
      const int dq = tid & 63, r = tid >> 6;
      int sa[4] = {0, 0, 0, 0}, sp[4] = {0, 0, 0, 0};
      for (int h0 = r; h0 < G; h0 += 64) {
        int4 c[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int h = h0 + 8 * u;
          c[u] = h < G ? __ldcg(reinterpret_cast<const int4*>(cnt + h * kDigits) + dq) : make_int4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const bool before = h0 + 8 * u < g;
          sa[0] += c[u].x;
          sa[1] += c[u].y;
          sa[2] += c[u].z;
          sa[3] += c[u].w;
          if (before) {
            sp[0] += c[u].x;
            sp[1] += c[u].y;
            sp[2] += c[u].z;
            sp[3] += c[u].w;
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        atomicAdd(tot_s + 4 * dq + j, sa[j]);
        atomicAdd(pre_s + 4 * dq + j, sp[j]);
      }
    }
    __syncthreads();
    const int start = block_excl_scan<kSortThreads>(tid < kDigits ? tot_s[tid] : 0, warp_tot).excl;
    if (tid < kDigits) {
      const int add = start + pre_s[tid];
#pragma unroll
      for (int w = 0; w < kSortWarps; ++w) hist[w * kDigits + tid] += add;
    }
    __syncthreads();
    for (int s0 = a; s0 < b; s0 += 32) {  // place in order
      const int s = s0 + lane;
      const bool live = s < b;
      const int k = live ? (pass ? sk[s] : key0(s)) : 0;
      const int pos = warp_place(live ? (k >> shift) & 255 : -1, my_hist);
      if (live) {
        dk[pos] = k;
        dr[pos] = pass ? sr[s] : s;
      }
    }
    grid.sync();
  }
  // every output token's rows: [range[2t], range[2t + 1]) of the sorted order (empty: 0, 0)
  const int* fk = keys((passes + 1) & 1);
  for (int s = r0 + tid; s < r1; s += kSortThreads) {
    const int k = fk[s];
    if (k >= N) continue;
    if (s == 0 || fk[s - 1] != k) range[2 * k] = s;
    if (s == A - 1 || fk[s + 1] != k) range[2 * k + 1] = s + 1;
  }
}

template <typename T> __device__ __forceinline__ float round_to(float x) { return to_f32(from_f32<T>(x)); }
template <> __device__ __forceinline__ float round_to<float>(float x) { return x; }

// out[t] += in[rows[j]] for j in the token's range, in order, rounded to T after every row.
template <typename T>
__global__ void __launch_bounds__(kCopyThreads) scatter_rows_kernel(ScatterAddParams p, const int* __restrict__ rows,
                                                                    const int2* __restrict__ range, bool vec) {
  const int64_t t = blockIdx.x;
  const int2 r = range[t];
  if (r.x >= r.y) return;
  T* o = static_cast<T*>(p.out) + t * p.D;
  const T* in = static_cast<const T*>(p.in);
  if (vec) {
    constexpr int V = kVec16<T>;
    const int64_t nv = p.D / V;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
      float acc[V];
      unpack16<T>(reinterpret_cast<const uint4*>(o)[v], acc);
      for (int j0 = r.x; j0 < r.y; j0 += 4) {
        uint4 y[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
          y[u] = j0 + u < r.y ? __ldcs(reinterpret_cast<const uint4*>(in + static_cast<int64_t>(__ldg(rows + j0 + u)) * p.D) + v)
                              : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          if (j0 + u >= r.y) break;
          float f[V];
          unpack16<T>(y[u], f);
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] = round_to<T>(acc[k] + f[k]);
        }
      }
      reinterpret_cast<uint4*>(o)[v] = pack16<T>(acc);
    }
  } else {
    for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) {
      float acc = to_f32(o[d]);
      for (int j = r.x; j < r.y; ++j) acc = round_to<T>(acc + to_f32(in[static_cast<int64_t>(__ldg(rows + j)) * p.D + d]));
      o[d] = from_f32<T>(acc);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kCopyThreads) scatter_first_dim_kernel(ScatterFirstDimParams p, bool vec) {
  const int64_t m = blockIdx.x;
  const int64_t n = load_idx(p.index, p.idx64, m);
  if (n < 0 || n >= p.N) return;
  cta_add_row(static_cast<T*>(p.dst) + n * p.K, static_cast<const T*>(p.src) + m * p.K, p.K, vec);
}

// exclusive prefix of the E counts into ws[0..E] (one CTA, chunks of 1024 with a carry)
__global__ void __launch_bounds__(1024) counts_prefix_kernel(const void* counts, bool c64, int64_t E, int64_t* ws) {
  __shared__ int64_t buf[1024];
  __shared__ int64_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t b = 0; b < E; b += 1024) {
    const int64_t e = b + threadIdx.x;
    const int64_t c = e < E ? load_idx(counts, c64, e) : 0;
    buf[threadIdx.x] = c < 0 ? 0 : c;
    __syncthreads();
    for (int o = 1; o < 1024; o <<= 1) {  // Hillis-Steele inclusive scan
      const int64_t add = threadIdx.x >= o ? buf[threadIdx.x - o] : 0;
      __syncthreads();
      buf[threadIdx.x] += add;
      __syncthreads();
    }
    if (e < E) ws[e + 1] = carry + buf[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 1023) carry += buf[1023];
    __syncthreads();
  }
  if (threadIdx.x == 0) ws[0] = 0;
}

template <typename T>
__global__ void __launch_bounds__(kCopyThreads) scatter_padded_kernel(ScatterPaddedParams p, bool vec) {
  const int64_t s = blockIdx.x;
  const int64_t* pre = p.workspace;
  if (s >= pre[p.E]) return;
  int64_t lo = 0, hi = p.E;  // last e with pre[e] <= s
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (pre[mid] <= s) lo = mid;
    else hi = mid;
  }
  const int64_t rank = lo / (p.E / p.EP);
  const int64_t t = load_idx(p.tok, p.idx64, s);
  if (t < 0 || t >= p.N) return;
  cta_add_row(static_cast<T*>(p.out) + t * p.D, static_cast<const T*>(p.in) + (rank * p.T + s) * p.D, p.D, vec);
}

// ---- combine / split shuffling -----------------------------------------------------------
// One CTA: per (rank, local expert) block its input offset, output offset and row count.
__global__ void __launch_bounds__(256) shuffling_offsets_kernel(ShufflingParams p) {
  extern __shared__ int smem[];
  const int64_t EP = p.EP, E = p.E, EG = p.EG;
  int* c = smem;                  // [EP * E], row-exclusive prefix after step 2
  int* rowsum = c + EP * E;       // [EP] -> exclusive prefix
  int* colsum = rowsum + EP;      // [EG] -> exclusive prefix
  int64_t* ws = p.workspace;      // [3][EP * EG]: in_off, out_off, rows
  for (int64_t i = threadIdx.x; i < EP * E; i += blockDim.x) {
    const int64_t v = load_idx(p.counts, p.counts64, i);
    c[i] = v < 0 ? 0 : static_cast<int>(v);
  }
  __syncthreads();
  for (int64_t le = threadIdx.x; le < EG; le += blockDim.x) {  // expert-major partial offsets
    int run = 0;
    for (int64_t r = 0; r < EP; ++r) {
      const int n = c[r * E + p.expert_start + le];
      ws[2 * EP * EG + r * EG + le] = n;
      ws[EP * EG + r * EG + le] = run;  // provisional, completed in step 4
      run += n;
    }
    colsum[le] = run;
  }
  __syncthreads();
  for (int64_t r = threadIdx.x; r < EP; r += blockDim.x) {  // rank-major: row prefix in place
    int run = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int n = c[r * E + e];
      c[r * E + e] = run;
      run += n;
    }
    rowsum[r] = run;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int64_t r = 0; r < EP; ++r) {
      const int n = rowsum[r];
      rowsum[r] = p.padded ? static_cast<int>((p.T / EP) * r) : run;
      run += n;
    }
  }
  if (threadIdx.x == 32) {
    int64_t run = 0;
    for (int64_t le = 0; le < EG; ++le) {
      const int n = colsum[le];
      if (p.combine) {
        if (p.counts64) static_cast<int64_t*>(p.out_counts)[le] = n;
        else static_cast<int32_t*>(p.out_counts)[le] = n;
      }
      colsum[le] = static_cast<int>(run);
      run += n;
    }
    if (p.combine) {
      if (p.counts64) static_cast<int64_t*>(p.out_counts)[EG] = run;
      else static_cast<int32_t*>(p.out_counts)[EG] = static_cast<int32_t>(run);
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < EP * EG; i += blockDim.x) {
    const int64_t r = i / EG, le = i % EG;
    const int64_t rm = rowsum[r] + c[r * E + p.expert_start + le];
    const int64_t em = colsum[le] + ws[EP * EG + i];
    ws[i] = p.combine ? rm : em;
    ws[EP * EG + i] = p.combine ? em : rm;
  }
}

__global__ void __launch_bounds__(256) shuffling_copy_kernel(ShufflingParams p, bool vec) {
  const int64_t n_blocks = p.EP * p.EG, b = blockIdx.x;
  const int64_t in_off = p.workspace[b], out_off = p.workspace[n_blocks + b], rows = p.workspace[2 * n_blocks + b];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    if (in_off + r >= p.T || out_off + r >= p.T) return;
    const uint8_t* src = static_cast<const uint8_t*>(p.in) + (in_off + r) * p.row_bytes;
    uint8_t* dst = static_cast<uint8_t*>(p.out) + (out_off + r) * p.row_bytes;
    if (vec) {
      const uint4* s = reinterpret_cast<const uint4*>(src);
      uint4* d = reinterpret_cast<uint4*>(dst);
#pragma unroll 4
      for (int64_t v = threadIdx.x; v < p.row_bytes / 16; v += blockDim.x) d[v] = __ldcs(s + v);
    } else {
      for (int64_t v = threadIdx.x; v < p.row_bytes; v += blockDim.x) dst[v] = src[v];
    }
  }
}

// ---- SwiGLU ------------------------------------------------------------------------------
__device__ __forceinline__ float silu_mul_f(float a, float b) { return a * (1.f / (1.f + expf(-a))) * b; }

template <typename T>
__global__ void __launch_bounds__(kCopyThreads) silu_mul_kernel(SiluMulParams p, bool vec) {
  const int64_t t = blockIdx.x;
  if (t >= read_count(p.valid, p.T)) return;
  const T* a = static_cast<const T*>(p.x0) + t * p.stride0;
  const T* b = static_cast<const T*>(p.x1) + t * p.stride1;
  T* o = static_cast<T*>(p.out) + t * p.D;
  if (vec) {
    constexpr int V = kVec16<T>;
#pragma unroll 2
    for (int64_t v = threadIdx.x; v < p.D / V; v += blockDim.x) {
      float fa[V], fb[V];
      unpack16<T>(__ldcs(reinterpret_cast<const uint4*>(a) + v), fa);
      unpack16<T>(__ldcs(reinterpret_cast<const uint4*>(b) + v), fb);
#pragma unroll
      for (int j = 0; j < V; ++j) fa[j] = silu_mul_f(fa[j], fb[j]);
      reinterpret_cast<uint4*>(o)[v] = pack16<T>(fa);
    }
  } else {
    for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) o[d] = from_f32<T>(silu_mul_f(to_f32(a[d]), to_f32(b[d])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kQuantThreads) silu_mul_quant_kernel(SiluMulParams p) {
  const int64_t t = blockIdx.x;
  if (t >= read_count(p.valid, p.T)) return;
  const T* a = static_cast<const T*>(p.x0) + t * p.stride0;
  const T* b = static_cast<const T*>(p.x1) + t * p.stride1;
  quant_row([&](int64_t d) { return silu_mul_f(to_f32(a[d]), to_f32(b[d])); }, p.D,
            static_cast<uint8_t*>(p.out) + t * p.D, p.out_scale + t, p.scale_ub);
}

// rows of n elements of `size` bytes at base (row stride `stride` elements): 16-byte vectors?
bool rows_vec(const void* base, int64_t n, int64_t stride, int size) {
  return aligned16(base) && (n * size) % 16 == 0 && (stride * size) % 16 == 0;
}

constexpr int64_t kMaxGrid = 2147483647;

}  // namespace

cudaError_t gather_scale_cuda(const GatherParams& p, cudaStream_t s) {
  if (p.A > kMaxGrid) return cudaErrorInvalidValue;
  const int sz = dtype_size(p.dtype);
  const bool vec = rows_vec(p.x, p.D, p.D, sz) && rows_vec(p.out, p.D, p.D, sz);
  return dispatch_dtype(p.dtype, [&](auto z) {
    gather_kernel<decltype(z)><<<static_cast<unsigned>(p.A), kCopyThreads, 0, s>>>(p, vec);
  });
}

cudaError_t gather_scale_quant_cuda(const GatherParams& p, cudaStream_t s) {
  if (p.A > kMaxGrid) return cudaErrorInvalidValue;
  return dispatch_dtype(p.dtype, [&](auto z) {
    gather_quant_kernel<decltype(z)><<<static_cast<unsigned>(p.A), kQuantThreads, 0, s>>>(p);
  });
}

cudaError_t scatter_add_dense_cuda(const ScatterAddParams& p, cudaStream_t s) {
  if (p.A <= 0 || p.D <= 0 || p.N <= 0) return cudaSuccess;
  if (p.A > kMaxGrid || p.N >= kMaxGrid || !p.workspace) return cudaErrorInvalidValue;
  // 1. stable sort of the rows by token: one cooperative launch, at most one CTA per SM
  int dev = 0, sms = 0;
  cudaError_t err = current_device_sms(&dev, &sms);
  if (err != cudaSuccess) return err;
  const int64_t want = (p.A + 2 * kSortThreads - 1) / (2 * kSortThreads);  // ~32 rows a warp
  const int64_t ctas = std::max<int64_t>(1, std::min<int64_t>({want, sms, scatter_add_max_ctas(p.A)}));
  const int chunk = static_cast<int>((p.A + ctas - 1) / ctas);
  const int grid = static_cast<int>((p.A + chunk - 1) / chunk);
  int bits = 0;
  while ((p.N >> bits) != 0) ++bits;  // keys are in [0, N]
  const int passes = (bits + 7) / 8;
  err = launch_cooperative(scatter_sort_kernel, dim3(static_cast<unsigned>(grid)), dim3(kSortThreads), 0, s, p, passes,
                           chunk);
  if (err != cudaSuccess) return err;
  // 2. one CTA per output row
  const int* rows = p.workspace + (passes & 1 ? 2 : 3) * p.A;
  const int2* range = reinterpret_cast<const int2*>(p.workspace + 4 * p.A + scatter_add_max_ctas(p.A) * kDigits);
  const int sz = dtype_size(p.dtype);
  const bool vec = rows_vec(p.out, p.D, p.D, sz) && rows_vec(p.in, p.D, p.D, sz);
  return dispatch_dtype(p.dtype, [&](auto z) {
    scatter_rows_kernel<decltype(z)><<<static_cast<unsigned>(p.N), kCopyThreads, 0, s>>>(p, rows, range, vec);
  });
}

cudaError_t scatter_add_padded_cuda(const ScatterPaddedParams& p, cudaStream_t s) {
  if (p.T > kMaxGrid) return cudaErrorInvalidValue;
  counts_prefix_kernel<<<1, 1024, 0, s>>>(p.counts, p.counts64, p.E, p.workspace);
  const int sz = dtype_size(p.dtype);
  const bool vec = rows_vec(p.out, p.D, p.D, sz) && rows_vec(p.in, p.D, p.D, sz);
  return dispatch_dtype(p.dtype, [&](auto z) {
    scatter_padded_kernel<decltype(z)><<<static_cast<unsigned>(p.T), kCopyThreads, 0, s>>>(p, vec);
  });
}

cudaError_t shuffling_cuda(const ShufflingParams& p, cudaStream_t s) {
  const size_t smem = (p.EP * p.E + p.EP + p.EG) * sizeof(int);
  static SmemLimit smem_limit;  // the cap raised once per device and size, not per call
  int dev = 0, sms = 0;
  cudaError_t err = current_device_sms(&dev, &sms);
  if (err == cudaSuccess) err = smem_limit.ensure(shuffling_offsets_kernel, dev, smem);
  if (err != cudaSuccess) return err;
  shuffling_offsets_kernel<<<1, 256, smem, s>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess || p.EP * p.EG == 0 || p.T == 0 || p.row_bytes == 0) return err;
  const int64_t blocks = p.EP * p.EG;
  const int64_t split = std::max<int64_t>(1, std::min<int64_t>(64, (4 * sms + blocks - 1) / blocks));
  const bool vec = aligned16(p.in) && aligned16(p.out) && p.row_bytes % 16 == 0;
  shuffling_copy_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(split)), 256, 0, s>>>(p, vec);
  return cudaGetLastError();
}

cudaError_t silu_mul_cuda(const SiluMulParams& p, cudaStream_t s) {
  if (p.T > kMaxGrid) return cudaErrorInvalidValue;
  const int sz = dtype_size(p.dtype);
  const bool vec = rows_vec(p.x0, p.D, p.stride0, sz) && rows_vec(p.x1, p.D, p.stride1, sz) &&
                   rows_vec(p.out, p.D, p.D, sz);
  return dispatch_dtype(p.dtype, [&](auto z) {
    silu_mul_kernel<decltype(z)><<<static_cast<unsigned>(p.T), kCopyThreads, 0, s>>>(p, vec);
  });
}

cudaError_t silu_mul_quant_cuda(const SiluMulParams& p, cudaStream_t s) {
  if (p.T > kMaxGrid) return cudaErrorInvalidValue;
  return dispatch_dtype(p.dtype, [&](auto z) {
    silu_mul_quant_kernel<decltype(z)><<<static_cast<unsigned>(p.T), kQuantThreads, 0, s>>>(p);
  });
}

cudaError_t scatter_add_first_dim_cuda(const ScatterFirstDimParams& p, cudaStream_t s) {
  if (p.M > kMaxGrid) return cudaErrorInvalidValue;
  const int sz = dtype_size(p.dtype);
  const bool vec = rows_vec(p.dst, p.K, p.K, sz) && rows_vec(p.src, p.K, p.K, sz);
  return dispatch_dtype(p.dtype, [&](auto z) {
    scatter_first_dim_kernel<decltype(z)><<<static_cast<unsigned>(p.M), kCopyThreads, 0, s>>>(p, vec);
  });
}

}  // namespace mslk::moe
