// How fast every SM together can add float32 data into a region held in L2, the way the attention
// backward adds its dQ parts (fmha_bwd_sm90_kernel.cuh): 16 KB `cp.reduce.async.bulk .add.f32`
// from shared memory issued by one thread a CTA (the tile route), the same bytes as plain bulk
// stores (the write ceiling), and 8-byte `red.global.add.v2.f32` from every thread (the atomic
// route). Prints TB/s of bytes added, by region size and CTAs a SM.
// Build: nvcc -O3 -arch=sm_90a l2_reduce.cu -o l2_reduce
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

constexpr int kChunk = 16384;  // bytes: one warpgroup's 64 x 64 float32 dQ part

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Chunk c of iteration it: CTAs walk the region in step, as the backward's CTAs of one head walk
// the same query tiles.
__device__ __forceinline__ int64_t chunk_of(int it, int64_t nchunks) {
  return (int64_t(blockIdx.x) + int64_t(it) * gridDim.x) % nchunks;
}

template <bool kReduce, int kInFlight>
__global__ void bulk_kernel(float* dst, int64_t nchunks, int iters) {
  extern __shared__ __align__(128) float buf[];
  for (int i = threadIdx.x; i < kChunk / 4; i += blockDim.x) buf[i] = 1.0f / float(i + 1);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  const uint32_t src = smem_u32(buf);
  for (int it = 0; it < iters; ++it) {
    float* d = dst + chunk_of(it, nchunks) * (kChunk / 4);
    if constexpr (kReduce)
      asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(d), "r"(src),
                   "r"(kChunk)
                   : "memory");
    else
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(d), "r"(src), "r"(kChunk)
                   : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kInFlight) : "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// 256 threads add one chunk an iteration, 8 bytes a thread and instruction.
__global__ void red_kernel(float* dst, int64_t nchunks, int iters) {
  for (int it = 0; it < iters; ++it) {
    float* d = dst + chunk_of(it, nchunks) * (kChunk / 4);
#pragma unroll
    for (int j = 0; j < kChunk / 8 / 256; ++j)
      asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(d + 2 * (threadIdx.x + 256 * j)), "f"(1.f),
                   "f"(0.5f)
                   : "memory");
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const size_t max_bytes = size_t(128) << 20;
  float* dst = nullptr;
  cudaMalloc(&dst, max_bytes);
  cudaMemset(dst, 0, max_bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const double total = 4.0e9;  // bytes added a measurement
  auto time = [&](const char* name, size_t region, int ctas_per_sm, auto launch) {
    const int grid = sms * ctas_per_sm;
    const int64_t nchunks = int64_t(region / kChunk);
    const int iters = int(total / kChunk / grid);
    launch(grid, nchunks, iters / 8);  // warm-up
    float best = 1e30f;
    for (int r = 0; r < 3; ++r) {
      cudaEventRecord(e0);
      launch(grid, nchunks, iters);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      best = ms < best ? ms : best;
    }
    const cudaError_t e = cudaGetLastError();
    std::printf("%-34s region %4zu MB  %d CTA/SM  %6.2f TB/s  %s\n", name, region >> 20, ctas_per_sm,
                double(grid) * iters * kChunk / (best * 1e-3) / 1e12, e == cudaSuccess ? "" : cudaGetErrorString(e));
  };
  for (size_t region : {size_t(8) << 20, size_t(32) << 20, size_t(128) << 20})
    for (int c : {1, 2, 4}) {
      time("bulk reduce add.f32, 2 in flight", region, c, [&](int g, int64_t n, int it) {
        bulk_kernel<true, 2><<<g, 128, kChunk>>>(dst, n, it);
      });
      time("bulk reduce add.f32, 8 in flight", region, c, [&](int g, int64_t n, int it) {
        bulk_kernel<true, 8><<<g, 128, kChunk>>>(dst, n, it);
      });
      time("bulk store, 8 in flight", region, c, [&](int g, int64_t n, int it) {
        bulk_kernel<false, 8><<<g, 128, kChunk>>>(dst, n, it);
      });
      time("red.global.add.v2.f32", region, c, [&](int g, int64_t n, int it) {
        red_kernel<<<g, 256>>>(dst, n, it);
      });
    }
  return 0;
}
