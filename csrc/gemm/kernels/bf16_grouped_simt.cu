// Portable BF16 grouped GEMM (kForward / kDgrad / kWgrad of bf16_grouped_params.h): a tiled
// SIMT kernel, float32 accumulation, that reads the group sizes on the device (every block
// walks the G sizes to find its group: no host sync, CUDA-graph safe). Correctness first;
// the tensor-core path is future work (see the note in csrc/gemm/bf16_grouped.cpp).
//
// Every mode is out(i, j) = sum_r A(i, r) * B(j, r) over one group, with
// A(i, r) = a[i * a_si + r * a_sr] and B(j, r) = b[j * b_sj + r * b_sr].
#include <cuda_bf16.h>

#include <cstdint>

#include "gemm/kernels/bf16_grouped.h"

namespace mslk::gemm {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;

__device__ __forceinline__ int64_t group_size(const Bf16GroupedParams& p, int64_t g) {
  if (p.m_sizes == nullptr) return p.total_M;
  const int64_t m = p.m_sizes_int64 ? static_cast<const int64_t*>(p.m_sizes)[g]
                                    : static_cast<int64_t>(static_cast<const int32_t*>(p.m_sizes)[g]);
  return m < 0 ? 0 : m;
}

struct Tile {
  int64_t group;      // -1: rows past every group (zeros only)
  int64_t row0;       // first row of the tile
  int64_t valid_end;  // rows [row0, valid_end) are computed
  int64_t zero_end;   // rows [valid_end, zero_end) are zero-filled (both capped at row0 + kBM)
};

// Row tile t of kForward / kDgrad; false when t is past the last tile.
__device__ bool find_row_tile(const Bf16GroupedParams& p, int64_t t, Tile& tile) {
  if (p.fixed_rows > 0) {
    const int64_t per = (p.fixed_rows + kBM - 1) / kBM;
    const int64_t g = t / per;
    if (g >= p.G) return false;
    int64_t m = group_size(p, g);
    m = m > p.fixed_rows ? p.fixed_rows : m;
    tile = {g, g * p.fixed_rows + (t % per) * kBM, g * p.fixed_rows + m, (g + 1) * p.fixed_rows};
    return true;
  }
  const int64_t G = p.m_sizes == nullptr ? 1 : p.G;
  int64_t start = 0;
  for (int64_t g = 0; g < G; ++g) {
    int64_t m = group_size(p, g);
    if (m > p.total_M - start) m = p.total_M - start;
    const int64_t nt = (m + kBM - 1) / kBM;
    if (t < nt) {
      tile = {g, start + t * kBM, start + m, start + m};
      return true;
    }
    t -= nt;
    start += m;
  }
  const int64_t rest = p.total_M - start;
  if (t < (rest + kBM - 1) / kBM) {
    tile = {-1, start + t * kBM, start, p.total_M};
    return true;
  }
  return false;
}

__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

__global__ void __launch_bounds__(kThreads) bf16_grouped_simt_kernel(const Bf16GroupedParams p) {
  __shared__ float As[kBK][kBM + 1];
  __shared__ float Bs[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const auto* X = static_cast<const __nv_bfloat16*>(p.x);
  const auto* W = static_cast<const __nv_bfloat16*>(p.w);

  const __nv_bfloat16 *a, *b;
  int64_t a_si, a_sr, b_sj, b_sr, rows, cols, red, out_ld;
  int64_t row0, i0, j0 = static_cast<int64_t>(blockIdx.y) * kBN, zero_rows = 0;
  size_t out_off;  // element offset of out(i0 + 0, 0)
  if (p.mode == Bf16GroupedMode::kWgrad) {
    const int64_t g = blockIdx.z;
    int64_t start = 0;
    for (int64_t h = 0; h < g; ++h) {
      int64_t m = group_size(p, h);
      start += m > p.total_M - start ? p.total_M - start : m;
    }
    int64_t m = group_size(p, g);
    if (m > p.total_M - start) m = p.total_M - start;
    i0 = static_cast<int64_t>(blockIdx.x) * kBM;
    if (i0 >= p.N || j0 >= p.K) return;
    a = X + start * p.ldx + i0;  // A(n, r) = dY[start + r, i0 + n]
    a_si = 1, a_sr = p.ldx;
    b = W + start * p.ldw;  // B(k, r) = X[start + r, k]
    b_sj = 1, b_sr = p.ldw;
    rows = p.N - i0, cols = p.K, red = m, out_ld = p.K;
    out_off = static_cast<size_t>(g * p.N + i0) * p.K;
    row0 = 0;
  } else {
    Tile tile;
    if (!find_row_tile(p, blockIdx.x, tile)) return;
    cols = p.mode == Bf16GroupedMode::kForward ? p.N : p.K;
    if (j0 >= cols) return;
    row0 = tile.row0, i0 = 0;
    const int64_t end = tile.zero_end < row0 + kBM ? tile.zero_end : row0 + kBM;
    rows = tile.valid_end > row0 ? (tile.valid_end < end ? tile.valid_end : end) - row0 : 0;
    zero_rows = end - row0 - rows;
    const int64_t g = tile.group < 0 ? 0 : tile.group;
    a = X + row0 * p.ldx, a_si = p.ldx, a_sr = 1;
    if (p.mode == Bf16GroupedMode::kForward) {
      b = W + g * p.w_gs, b_sj = p.ldw, b_sr = 1, red = p.K;  // B(n, k) = W[g, n, k]
    } else {
      b = W + g * p.w_gs, b_sj = 1, b_sr = p.ldw, red = p.N;  // B(k, n) = W[g, n, k]
    }
    out_ld = cols;
    out_off = static_cast<size_t>(row0) * cols;
  }

  float acc[4][4] = {};
  if (rows > 0) {
    const int64_t bcols = cols - j0;
    const __nv_bfloat16* bj = b + j0 * b_sj;
    for (int64_t r0 = 0; r0 < red; r0 += kBK) {
#pragma unroll
      for (int q = 0; q < kBM * kBK / kThreads; ++q) {
        const int e = tid + q * kThreads;
        int i, r;
        if (a_sr == 1) i = e / kBK, r = e % kBK;
        else i = e % kBM, r = e / kBM;
        As[r][i] = (i < rows && r0 + r < red) ? ld(a, i * a_si + (r0 + r) * a_sr) : 0.f;
        int j, rb;
        if (b_sr == 1) j = e / kBK, rb = e % kBK;
        else j = e % kBN, rb = e / kBN;
        Bs[rb][j] = (j < bcols && r0 + rb < red) ? ld(bj, j * b_sj + (r0 + rb) * b_sr) : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kBK; ++kk) {
        float af[4], bf[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) af[u] = As[kk][ty + 16 * u], bf[u] = Bs[kk][tx + 16 * u];
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[u][v] = fmaf(af[u], bf[v], acc[u][v]);
      }
      __syncthreads();
    }
  }

  for (int u = 0; u < 4; ++u) {
    const int64_t i = ty + 16 * u;
    if (i >= rows + zero_rows) continue;
    const bool zero = i >= rows;
    for (int v = 0; v < 4; ++v) {
      const int64_t j = j0 + tx + 16 * v;
      if (j >= cols) continue;
      const size_t o = out_off + static_cast<size_t>(i) * out_ld + j;
      const float val = zero ? 0.f : acc[u][v];
      if (p.out_fp32) {
        float* out = static_cast<float*>(p.out);
        out[o] = p.accumulate ? out[o] + val : val;
      } else {
        static_cast<__nv_bfloat16*>(p.out)[o] = __float2bfloat16_rn(val);
      }
    }
  }
}

}  // namespace

cudaError_t bf16_grouped_simt(const Bf16GroupedParams& p, cudaStream_t stream) {
  if (p.G <= 0 || p.total_M < 0) return cudaSuccess;
  dim3 grid;
  if (p.mode == Bf16GroupedMode::kWgrad) {
    if (p.N == 0 || p.K == 0) return cudaSuccess;  // nothing to write (an empty sum is still written)
    grid = dim3(static_cast<unsigned>((p.N + kBM - 1) / kBM), static_cast<unsigned>((p.K + kBN - 1) / kBN),
                static_cast<unsigned>(p.G));
  } else {
    const int64_t cols = p.mode == Bf16GroupedMode::kForward ? p.N : p.K;
    // Upper bound on the row tiles: sum(ceil(m_g / BM)) + the tail's <= total_M / BM + G + 1.
    const int64_t tiles = p.fixed_rows > 0 ? p.G * ((p.fixed_rows + kBM - 1) / kBM)
                                           : (p.total_M + kBM - 1) / kBM + (p.m_sizes ? p.G : 1) + 1;
    if (p.total_M == 0 || cols == 0) return cudaSuccess;  // K (or N) == 0 still writes zeros
    grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>((cols + kBN - 1) / kBN), 1);
  }
  bf16_grouped_simt_kernel<<<grid, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t bf16_grouped_run(const Bf16GroupedParams& p, cudaStream_t stream) {
  return bf16_grouped_simt(p, stream);
}

}  // namespace mslk::gemm
