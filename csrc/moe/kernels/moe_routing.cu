// index_shuffling: one cooperative kernel.
//  1. each warp routes one token at a time: the token's E scores sit in the warp's registers
//     (E <= 32 * VPL), top_k rounds of a warp arg-max pick the experts (torch.topk order, see
//     topk_rank); each pick takes its place in a per-CTA shared-memory histogram;
//  2. each CTA reserves its expert segments with one global atomic per non-empty expert;
//  3. grid barrier (all CTAs co-resident: cooperative launch), then a block scan of the global
//     counts gives the expert segment starts and every slot lands at start + CTA base + rank.
// The order inside an expert segment is therefore unspecified (as in the reference). Slots past
// the selected count are written 0. No host sync: counts and barrier are zeroed by memsets on
// the stream.
#include "moe/kernels/moe_device.cuh"

namespace mslk::moe {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <typename S, int VPL>
__global__ void __launch_bounds__(kThreads) index_shuffling_kernel(IndexShufflingParams p, int64_t tokens_per_cta) {
  __shared__ int hist[kMaxExperts];
  __shared__ int base[kMaxExperts];
  __shared__ int warp_tot[kWarps];
  __shared__ int total_sel;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = static_cast<int>(p.E), K = p.top_k;
  for (int e = tid; e < E; e += kThreads) hist[e] = 0;
  __syncthreads();

  const int64_t T = p.T, valid = read_count(p.valid, T);
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * tokens_per_cta;
  const int64_t t1 = min(t0 + tokens_per_cta, T);
  int32_t* ws_exp = p.workspace + 4;
  int32_t* ws_pos = ws_exp + T * K;
  const S* sc = static_cast<const S*>(p.scores);

  // 1. route
  for (int64_t t = t0 + warp; t < t1; t += kWarps) {
    if (t >= valid) {
      if (lane < K) ws_exp[t * K + lane] = -1;
      continue;
    }
    uint64_t r[VPL];
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      const int e = lane + 32 * j;
      r[j] = e < E ? topk_rank(to_f32(sc[t * p.stride_t + e * p.stride_e]), static_cast<uint32_t>(e)) : 0ull;
    }
    int mine = -1;
    for (int k = 0; k < K; ++k) {
      uint64_t best = 0;
#pragma unroll
      for (int j = 0; j < VPL; ++j) best = r[j] > best ? r[j] : best;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const uint64_t other = __shfl_xor_sync(0xffffffffu, best, o);
        best = other > best ? other : best;
      }
      const int e = static_cast<int>(~static_cast<uint32_t>(best));
#pragma unroll
      for (int j = 0; j < VPL; ++j)
        if (lane + 32 * j == e) r[j] = 0;
      if (lane == k) mine = e;
    }
    if (lane < K) {
      const bool ok = mine >= p.expert_start && mine < p.expert_end;
      ws_exp[t * K + lane] = ok ? mine : -1;
      if (ok) ws_pos[t * K + lane] = atomicAdd(&hist[mine], 1);
    }
  }
  __syncthreads();

  // 2. reserve this CTA's part of every expert segment
  for (int e = tid; e < E; e += kThreads) {
    const int h = hist[e];
    base[e] = h ? atomicAdd(&p.counts[e], h) : 0;
  }

  // 3. grid barrier
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    atomicAdd(&p.workspace[0], 1);
    while (ld_acquire(&p.workspace[0]) < static_cast<int>(gridDim.x)) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();

  // 4. exclusive scan of the counts of experts [start, end) (EG <= 512 = 2 per thread)
  const int EG = p.expert_end - p.expert_start;
  const int i0 = 2 * tid, i1 = 2 * tid + 1;
  const int a0 = i0 < EG ? __ldcg(&p.counts[p.expert_start + i0]) : 0;
  const int a1 = i1 < EG ? __ldcg(&p.counts[p.expert_start + i1]) : 0;
  const int sum = a0 + a1;
  int inc = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  if (lane == 31) warp_tot[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < kWarps ? warp_tot[lane] : 0;
    int wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += n;
    }
    __syncwarp();
    if (lane < kWarps) warp_tot[lane] = wi - w;
    if (lane == kWarps - 1) total_sel = wi;
  }
  __syncthreads();
  const int excl = warp_tot[warp] + inc - sum;
  if (i0 < EG) base[p.expert_start + i0] += excl;
  if (i1 < EG) base[p.expert_start + i1] += excl + a0;
  __syncthreads();

  // 5. place
  for (int64_t s = t0 * K + tid; s < t1 * K; s += kThreads) {
    const int e = ws_exp[s];
    if (e >= 0) {
      const int dst = base[e] + ws_pos[s];
      p.expert_indices[dst] = e - p.expert_start;
      p.token_indices[dst] = static_cast<int32_t>(s / K);
    }
  }
  const int64_t total = total_sel;
  for (int64_t i = total + static_cast<int64_t>(blockIdx.x) * kThreads + tid; i < T * K;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    p.expert_indices[i] = 0;
    p.token_indices[i] = 0;
  }
  if (blockIdx.x == 0 && tid == 0) {
    p.counts[E] = static_cast<int32_t>(T);
    p.counts[E + 1] = static_cast<int32_t>(total);
  }
}

template <typename S, int VPL>
cudaError_t launch(const IndexShufflingParams& p, cudaStream_t stream) {
  auto kernel = index_shuffling_kernel<S, VPL>;
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
  if (err != cudaSuccess) return err;
  const int64_t max_ctas = static_cast<int64_t>(std::max(per_sm, 1)) * sms;
  const int64_t want = (p.T + 2 * kWarps - 1) / (2 * kWarps);  // about two tokens a warp
  const int64_t ctas = std::max<int64_t>(1, std::min(want, max_ctas));
  const int64_t tokens_per_cta = (p.T + ctas - 1) / ctas;
  const int64_t grid = (p.T + tokens_per_cta - 1) / tokens_per_cta;

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p, tokens_per_cta);
}

template <typename S>
cudaError_t dispatch_vpl(const IndexShufflingParams& p, cudaStream_t s) {
  if (p.E <= 32) return launch<S, 1>(p, s);
  if (p.E <= 64) return launch<S, 2>(p, s);
  if (p.E <= 128) return launch<S, 4>(p, s);
  if (p.E <= 256) return launch<S, 8>(p, s);
  return launch<S, 16>(p, s);
}

}  // namespace

cudaError_t index_shuffling_cuda(const IndexShufflingParams& p, cudaStream_t s) {
  cudaError_t err = cudaMemsetAsync(p.counts, 0, (p.E + 2) * sizeof(int32_t), s);
  if (err != cudaSuccess || p.T == 0) return err;
  err = cudaMemsetAsync(p.workspace, 0, 4 * sizeof(int32_t), s);
  if (err != cudaSuccess) return err;
  if (p.E > kMaxExperts || p.top_k > kMaxTopK) return cudaErrorInvalidValue;
  return p.dtype == Dtype::kFloat32 ? dispatch_vpl<float>(p, s) : dispatch_vpl<__nv_bfloat16>(p, s);
}

}  // namespace mslk::moe
