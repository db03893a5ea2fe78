// What DRAM read/write patterns reach on this GPU, without any math: the ceilings the decode GEMM
// (weight streaming) and the FP8 quantizers (read 2 B, write 1 B) are measured against.
// Standalone (no torch): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a stream_patterns.cu
//
// Weight read patterns: a warp's 16-byte loads cover R rows x (512 / R) contiguous bytes per
// instruction (R = 8: the skinny kernel's fragment order, 16 rows of 64 B across lo/hi), U loads in
// flight per thread, CTAs per SM as given. Buffers rotate over 4 x 64 MB so L2 holds none.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)

__device__ __forceinline__ uint4 ld_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Block of 128 threads owns 16 * R... rows: warp w, rows [base + w * R, +R); each instruction a lane
// reads row (lane / (32 / R)), bytes 16 * (lane % (32 / R)) of the current (512 / R)-byte column
// slab; U instructions per round, slabs advance along k. grid.y splits K.
template <int R, int U>
__global__ void __launch_bounds__(128) read_rows(const uint8_t* w, int64_t K, int64_t k_per_split, unsigned* sink) {
  constexpr int LPR = 32 / R, SLAB = 16 * LPR;  // lanes per row, bytes per row per instruction
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = (int64_t(blockIdx.x) * 4 + warp) * R + lane / LPR;
  const uint8_t* p = w + row * K + 16 * (lane % LPR);
  const int64_t k0 = blockIdx.y * k_per_split, k1 = k0 + k_per_split;
  unsigned acc = 0;
  for (int64_t k = k0; k < k1; k += U * SLAB) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld_stream(p + k + u * SLAB);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

// Quantizer-like stream: read 16 B of bf16, write 8 B (ratio 2:1), grid-stride, U per round.
template <int U>
__global__ void __launch_bounds__(256) read2_write1(const uint4* in, uint2* out, int64_t n16) {
  for (int64_t i = (int64_t(blockIdx.x) * 256 + threadIdx.x) * U; i < n16; i += int64_t(gridDim.x) * 256 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u < n16 ? in[i + u] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u < n16) out[i + u] = make_uint2(v[u].x ^ v[u].y, v[u].z ^ v[u].w);
  }
}
// Same, but each warp's U loads are U consecutive 512 B pieces (coalesced per instruction).
template <int U>
__global__ void __launch_bounds__(256) read2_write1_coal(const uint4* in, uint2* out, int64_t n16) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (int64_t(blockIdx.x) * 256 + threadIdx.x) >> 5, nwarps = int64_t(gridDim.x) * 8;
  for (int64_t base = warp * 32 * U; base < n16; base += nwarps * 32 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * 32 + lane;
      v[u] = i < n16 ? in[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * 32 + lane;
      if (i < n16) out[i] = make_uint2(v[u].x ^ v[u].y, v[u].z ^ v[u].w);
    }
  }
}

// Quantizer stream over an [M][K] matrix of 16-byte vectors (vpr a row), one CTA a tile of
// TR = 2048 / TC rows x TC vectors (256 threads x 8 vectors, like the one-shot block kernels): from
// 128 x 128 bf16 block tiles (TC = 16) to whole 16384-wide rows (TC = 2048). SYNC puts a CTA barrier
// between the loads and the stores, as a tile's amax does. Isolates what the access pattern costs:
// at 16384^2 the 128x128 block quantizer moves 96% of the copy rate, rows 85%.
// ROT: each tile row starts its walk at a different 512-byte piece (rotation by 37 pieces a row),
// so that CTAs that run together do not all touch the same column offsets (DRAM channel camping).
template <int TC, bool SYNC, bool ROT = false>
__global__ void __launch_bounds__(256) read2_write1_tile(const uint4* in, uint2* out, int64_t vpr, int tiles_per_row) {
  constexpr int TR = 2048 / TC;
  const int ti = blockIdx.x / tiles_per_row, tj = blockIdx.x - ti * tiles_per_row;
  const uint4* src = in + int64_t(ti) * TR * vpr + int64_t(tj) * TC;
  uint2* dst = out + int64_t(ti) * TR * vpr + int64_t(tj) * TC;
  const int rot = ROT ? (ti * 37 % (TC / 32 > 0 ? TC / 32 : 1)) * 32 : 0;
  uint4 v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int e = threadIdx.x + i * 256;
    v[i] = src[int64_t(e / TC) * vpr + (e % TC + rot) % TC];
  }
  if (SYNC) __syncthreads();
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int e = threadIdx.x + i * 256;
    dst[int64_t(e / TC) * vpr + (e % TC + rot) % TC] = make_uint2(v[i].x ^ v[i].y, v[i].z ^ v[i].w);
  }
}

// fp8_warp_rows.cu's pattern without the math: a warp a row of NV x 512 B, 4 rows a CTA, every
// load before any store; ROT as above (per row).
// G > 1: a team of G warps a row (each NV x 512 B of it), meeting at a named barrier between the
// loads and the stores as a row amax would (rows of 32 KB: G = 2).
template <int NV, bool ROT, int G = 1>
__global__ void __launch_bounds__(128, 3) read2_write1_warp_rows(const uint4* in, uint2* out, int64_t vpr, int) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = (int64_t(blockIdx.x) * 4 + warp) / G;
  const int rot = ROT ? int(row * 37 % NV) : 0;
  const uint4* src = in + row * vpr + (warp % G) * NV * 32;
  uint2* dst = out + row * vpr + (warp % G) * NV * 32;
  uint4 v[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) v[i] = src[lane + 32 * ((i + rot) % NV)];
  if (G > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + warp / G), "r"(32 * G) : "memory");
#pragma unroll
  for (int i = 0; i < NV; ++i) dst[lane + 32 * ((i + rot) % NV)] = make_uint2(v[i].x ^ v[i].y, v[i].z ^ v[i].w);
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  template <typename F>
  float median_us(F&& f, int iters = 30) {
    for (int i = 0; i < 5; ++i) f(i);
    std::vector<float> t;
    for (int i = 0; i < iters; ++i) {
      cudaEventRecord(a);
      f(i);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

template <int R, int U>
int run_rows(const uint8_t* buf, int64_t N, int64_t K, int splits, unsigned* sink, Timer& tm, int64_t bufbytes, float copy_tbs) {
  dim3 grid(unsigned(N / (4 * R)), unsigned(splits));
  const float us = tm.median_us([&](int i) {
    read_rows<R, U><<<grid, 128>>>(buf + (i % 4) * bufbytes, K, K / splits, sink);
  });
  CK(cudaGetLastError());
  const double tbs = double(N) * K / (us * 1e-6) / 1e12;
  printf("read N=%lld K=%lld R=%2d (%3d B/row/instr) U=%2d splits=%d CTAs=%5u: %7.2f us %5.2f TB/s (%3.0f%% of copy)\n",
         (long long)N, (long long)K, R, 512 / R, U, splits, grid.x * grid.y, us, tbs, 100 * tbs / copy_tbs);
  return 0;
}

// `stream_patterns tiles`: only the tile-shape sweep of the quantizer stream, at 8192^2 and 16384^2.
int tile_sweep() {
  const int64_t big = 512ll << 20;  // 16384^2 bf16
  uint8_t *in, *out;
  CK(cudaMalloc(&in, 2 * big));
  CK(cudaMalloc(&out, big / 2));
  CK(cudaMemset(in, 1, 2 * big));
  Timer tm;
  const float copy_us = tm.median_us([&](int i) { cudaMemcpyAsync(out, in + (i % 2) * big, big / 2, cudaMemcpyDeviceToDevice); });
  const float copy_tbs = 1.0 * big / (copy_us * 1e-6) / 1e12;
  printf("copy 256 MB: %.2f us, %.2f TB/s (read + written)\n", copy_us, copy_tbs);
  for (int64_t n : {8192, 16384}) {
    const int64_t bytes = n * n * 2, vpr = n * 2 / 16;
    auto one = [&](const char* name, auto kern, int tc) {
      if (tc > vpr) return;
      const int tiles_per_row = int(vpr / tc), grid = int(n / (2048 / tc)) * tiles_per_row;
      const float us = tm.median_us([&](int i) {
        kern<<<grid, 256>>>(reinterpret_cast<const uint4*>(in + (i % 2) * big), reinterpret_cast<uint2*>(out), vpr,
                            tiles_per_row);
      });
      const double tbs = 1.5 * bytes / (us * 1e-6) / 1e12;
      printf("read2/write1 %5lldx%-5lld tile %4d rows x %5d B %-8s: %7.2f us %5.2f TB/s (%3.0f%% of copy)\n", (long long)n,
             (long long)n, 2048 / tc, tc * 16, name, us, tbs, 100 * tbs / copy_tbs);
    };
    one("", read2_write1_tile<16, false>, 16);
    one("+sync", read2_write1_tile<16, true>, 16);
    one("", read2_write1_tile<64, false>, 64);
    one("+sync", read2_write1_tile<64, true>, 64);
    one("", read2_write1_tile<256, false>, 256);
    one("+sync", read2_write1_tile<256, true>, 256);
    one("", read2_write1_tile<1024, false>, 1024);
    one("+sync", read2_write1_tile<1024, true>, 1024);
    one("", read2_write1_tile<2048, false>, 2048);
    one("+sync", read2_write1_tile<2048, true>, 2048);
    one("+rot", read2_write1_tile<1024, false, true>, 1024);
    one("+sync+rot", read2_write1_tile<1024, true, true>, 1024);
    one("+rot", read2_write1_tile<2048, false, true>, 2048);
    one("+sync+rot", read2_write1_tile<2048, true, true>, 2048);
    {  // the default row kernel's shape at 8192^2: a warp a 16 KB row; at 16384^2 two warps a row
      for (int rot = 0; rot < 2; ++rot) {
        const float us = tm.median_us([&](int i) {
          auto k = vpr == 1024 ? (rot ? read2_write1_warp_rows<32, true> : read2_write1_warp_rows<32, false>)
                               : (rot ? read2_write1_warp_rows<32, true, 2> : read2_write1_warp_rows<32, false, 2>);
          k<<<unsigned(n * (vpr / 1024) / 4), 128>>>(reinterpret_cast<const uint4*>(in + (i % 2) * big), reinterpret_cast<uint2*>(out), vpr, 0);
        });
        const double tbs = 1.5 * bytes / (us * 1e-6) / 1e12;
        printf("read2/write1 %5lldx%-5lld warp(s) a row %s: %7.2f us %5.2f TB/s (%3.0f%% of copy)\n", (long long)n, (long long)n,
               rot ? "+rot" : "    ", us, tbs, 100 * tbs / copy_tbs);
      }
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "tiles")) return tile_sweep();
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t kBuf = 256ll << 20;  // 4 rotating 64 MB weights, or 2 x 128 MB quantizer inputs
  uint8_t *buf, *out;
  unsigned* sink;
  CK(cudaMalloc(&buf, 2 * kBuf));  // 4 x 112 MB at most
  CK(cudaMalloc(&out, kBuf));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(buf, 1, 2 * kBuf));
  Timer tm;
  // copy: 8192 x 8192 bf16 (128 MB), bytes read + written
  const int64_t qbytes = 128ll << 20;
  const float copy_us = tm.median_us([&](int i) { cudaMemcpyAsync(out, buf + (i % 2) * qbytes, qbytes, cudaMemcpyDeviceToDevice); });
  const float copy_tbs = 2.0 * qbytes / (copy_us * 1e-6) / 1e12;
  printf("copy 128 MB: %.2f us, %.2f TB/s (read + written)\n", copy_us, copy_tbs);

  // quantizer ceiling: 8192^2 bf16 in, 8192^2 bytes out (3 B/elem)
  const int64_t n16 = qbytes / 16;
  auto q = [&](const char* name, auto kern, int grid) {
    const float us = tm.median_us([&](int i) {
      kern<<<grid, 256>>>(reinterpret_cast<const uint4*>(buf + (i % 2) * qbytes), reinterpret_cast<uint2*>(out), n16);
    });
    const double tbs = 1.5 * qbytes / (us * 1e-6) / 1e12;
    printf("read2/write1 8192^2 %-24s grid %6d: %7.2f us %5.2f TB/s (%3.0f%% of copy)\n", name, grid, us, tbs, 100 * tbs / copy_tbs);
  };
  for (int per_sm : {8, 16}) {
    q("thread-contig U=4", read2_write1<4>, sms * per_sm / 2);
    q("thread-contig U=2", read2_write1<2>, sms * per_sm / 2);
    q("warp-coalesced U=4", read2_write1_coal<4>, sms * per_sm / 2);
    q("warp-coalesced U=8", read2_write1_coal<8>, sms * per_sm / 2);
  }
  q("warp-coalesced U=4 1-shot", read2_write1_coal<4>, int(n16 / (256 * 4)));
  q("thread-contig U=1 1-shot", read2_write1<1>, int(n16 / 256));

  // decode weight streaming: N = K = 8192 (64 MB), and N = 7168, K = 16384
  for (auto nk : {std::pair<int64_t, int64_t>{8192, 8192}, {7168, 16384}}) {
    const int64_t N = nk.first, K = nk.second;
    for (int splits : {2, 4, 8}) {
      run_rows<8, 4>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      run_rows<8, 8>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      run_rows<8, 16>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      run_rows<2, 8>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      run_rows<1, 8>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      run_rows<1, 16>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
    }
  }
  // the decode grid's small weights (10 MB, 8 MB): what a kernel that only reads them costs
  for (auto nk : {std::pair<int64_t, int64_t>{1280, 8192}, {8192, 1024}}) {
    const int64_t N = nk.first, K = nk.second;
    for (int splits : {1, 2, 4}) {
      run_rows<8, 4>(buf, N, K, splits, sink, tm, N * K, copy_tbs);
      if (K / splits >= 4 * 256) run_rows<2, 4>(buf, N, K, splits, sink, tm, N * K, copy_tbs);  // whole rounds
    }
  }
  // the E = 128 MoE grouped GEMM's weights (128 x 2048 x 7168 bf16 = 3.76 GB, read once a call):
  // what a pure read of that many bytes reaches, next to a 2 GiB copy (the benchmarks' copy rate)
  {
    const int64_t N = 128ll * 2048, K = 7168ll * 2, big = N * K, half = 1ll << 30;
    uint8_t *w, *dst;
    CK(cudaMalloc(&w, big));
    CK(cudaMalloc(&dst, half));
    CK(cudaMemset(w, 1, big));
    const float us2 = tm.median_us([&](int) { cudaMemcpyAsync(dst, w, half, cudaMemcpyDeviceToDevice); }, 10);
    const float tbs2 = 2.0 * half / (us2 * 1e-6) / 1e12;
    printf("copy 1 GiB: %.1f us, %.2f TB/s (read + written)\n", us2, tbs2);
    run_rows<8, 4>(w, N, K, 1, sink, tm, 0, tbs2);
    run_rows<8, 8>(w, N, K, 1, sink, tm, 0, tbs2);
    run_rows<2, 8>(w, N, K, 1, sink, tm, 0, tbs2);
    run_rows<1, 8>(w, N, K, 1, sink, tm, 0, tbs2);
    CK(cudaFree(w));
    CK(cudaFree(dst));
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
