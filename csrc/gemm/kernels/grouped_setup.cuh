// Pieces shared by the device-side argument setup of the CUTLASS ptr-array grouped GEMMs
// (cutlass_grouped.cuh and its family policies): group sizes and rows on the device, the zeroed
// tail, the per-group argument arrays (the one place that writes a group's shape, pointers and
// strides), the one scratch allocation, and the run after setup.
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>

#include <cstdint>

#include "gemm/kernels/group_sizes.cuh"


namespace mslk::gemm::detail {

constexpr int kGroupSetupThreads = 256;

// f(g) for every group g, spread over the grid's threads (groups known one by one).
template <class F>
__device__ __forceinline__ void for_each_group(int64_t G, F f) {
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < G;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(g);
}

// Rows of G groups from their sizes: a block-wide inclusive scan, kGroupSetupThreads groups a step
// with a carry. Calls on_group(g, start, end) on the thread that owns group g, rows clipped to
// [0, total); returns the sum of all sizes, on every thread. The sizes live on the device and are
// never read on the host (no sync), so bad ones cannot raise: a negative size counts as 0 and rows
// past `total` are dropped (README, grouped GEMMs). Every thread of the
// block must call it (it synchronises); blockDim.x == kGroupSetupThreads.
template <class Size, class OnGroup>
__device__ long long scan_group_rows(int64_t G, long long total, Size size, OnGroup on_group) {
  __shared__ long long scan[kGroupSetupThreads];
  const int tid = static_cast<int>(threadIdx.x);
  long long carry = 0;
  for (int64_t base = 0; base < G; base += kGroupSetupThreads) {
    const int64_t g = base + tid;
    const long long m = g < G ? max(static_cast<long long>(size(g)), 0LL) : 0;
    scan[tid] = m;
    __syncthreads();
    for (int off = 1; off < kGroupSetupThreads; off <<= 1) {  // Hillis-Steele inclusive scan
      const long long v = tid >= off ? scan[tid - off] : 0;
      __syncthreads();
      scan[tid] += v;
      __syncthreads();
    }
    const long long incl = carry + scan[tid];
    if (g < G) on_group(g, min(incl - m, total), min(incl, total));
    carry += scan[kGroupSetupThreads - 1];
    __syncthreads();  // scan[] is rewritten by the next step
  }
  return carry;
}

// Zeroes rows [valid, total) of a contiguous bf16 [total, cols] output (cols % 8 == 0: whole
// 16-byte vectors), spread over the grid.
__device__ __forceinline__ void zero_tail_rows(cutlass::bfloat16_t* out, long long valid, long long total,
                                               int64_t cols) {
  const long long n16 = (total - valid) * cols / 8;
  uint4* tail = reinterpret_cast<uint4*>(out + valid * cols);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    tail[i] = make_uint4(0u, 0u, 0u, 0u);
}

// The one dynamic (leading-dimension) stride of a 2-D operand stride: mode 0 or mode 1, whichever
// is not the static unit stride.
template <class S>
__device__ __forceinline__ void set_leading(S& s, int64_t ld) {
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value)
    cute::get<1>(s) = ld;
  else
    cute::get<0>(s) = ld;
}

// Blocks of a setup launch: enough to zero `tail16` 16-byte vectors quickly (8 a thread), at
// least 1, at most 2 per SM; every block otherwise only scans the G sizes.
inline unsigned setup_blocks(long long tail16, int sms) {
  const long long want = (tail16 + kGroupSetupThreads * 8 - 1) / (kGroupSetupThreads * 8);
  return static_cast<unsigned>(want < 1 ? 1 : (want > 2 * sms ? 2 * sms : want));
}

// Per-group argument arrays of a grouped CUTLASS call and CUTLASS's workspace, carved from one
// stream-ordered allocation (graph-capturable), each part 128-byte aligned. xs / ws: per-group
// epilogue scale pointers, allocated only when asked for (the FP8 path).
template <class Shape, class EA, class EB, class ED, class SA, class SB, class SD>
struct GroupArrays {
  Shape* shapes = nullptr;
  const EA** a = nullptr;
  const EB** b = nullptr;
  ED** d = nullptr;
  const float** xs = nullptr;
  const float** ws = nullptr;
  SA* sa = nullptr;
  SB* sb = nullptr;
  SD* sd = nullptr;
  void* workspace = nullptr;
  char* buf = nullptr;  // the allocation; run_after_setup frees it

  // Group g's problem shape (m, n, k), operand pointers and leading strides.
  __device__ __forceinline__ void put(int64_t g, int64_t m, int64_t n, int64_t k, const EA* pa, int64_t lda,
                                      const EB* pb, int64_t ldb, ED* pd, int64_t ldd) const {
    shapes[g] = Shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
    a[g] = pa;
    b[g] = pb;
    d[g] = pd;
    SA s_a{};
    set_leading(s_a, lda);
    sa[g] = s_a;
    SB s_b{};
    set_leading(s_b, ldb);
    sb[g] = s_b;
    SD s_d{};
    set_leading(s_d, ldd);
    sd[g] = s_d;
  }

  cudaError_t allocate(int64_t G, size_t ws_bytes, bool scales, cudaStream_t stream) {
    int64_t size = 0;
    auto take = [&](int64_t bytes) {
      const int64_t at = size;
      size = (size + bytes + 127) / 128 * 128;
      return at;
    };
    const int64_t ptr = G * int64_t(sizeof(void*));
    const int64_t o_shapes = take(G * int64_t(sizeof(Shape))), o_a = take(ptr), o_b = take(ptr), o_d = take(ptr);
    const int64_t o_xs = scales ? take(ptr) : 0, o_ws = scales ? take(ptr) : 0;
    const int64_t o_sa = take(G * int64_t(sizeof(SA))), o_sb = take(G * int64_t(sizeof(SB)));
    const int64_t o_sd = take(G * int64_t(sizeof(SD))), o_work = take(static_cast<int64_t>(ws_bytes));
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&buf), static_cast<size_t>(size), stream);
    if (e != cudaSuccess) return e;
    // Zeroed: CUTLASS's ptr-array epilogue copies bytes of the workspace that nothing writes
    // (compute-sanitizer initcheck); one stream-ordered memset of this small buffer defines them.
    if ((e = cudaMemsetAsync(buf, 0, static_cast<size_t>(size), stream)) != cudaSuccess) {
      cudaFreeAsync(buf, stream);
      buf = nullptr;
      return e;
    }
    shapes = reinterpret_cast<Shape*>(buf + o_shapes);
    a = reinterpret_cast<const EA**>(buf + o_a);
    b = reinterpret_cast<const EB**>(buf + o_b);
    d = reinterpret_cast<ED**>(buf + o_d);
    if (scales) {
      xs = reinterpret_cast<const float**>(buf + o_xs);
      ws = reinterpret_cast<const float**>(buf + o_ws);
    }
    sa = reinterpret_cast<SA*>(buf + o_sa);
    sb = reinterpret_cast<SB*>(buf + o_sb);
    sd = reinterpret_cast<SD*>(buf + o_sd);
    workspace = ws_bytes > 0 ? static_cast<void*>(buf + o_work) : nullptr;
    return cudaSuccess;
  }
};

// After the setup launch (its launch error `e`): initialize and run the grouped GEMM with the
// group scheduler's swizzle set to `swizzle` (1, 2, 4 or 8), then free the stream-ordered scratch
// allocation `buf` either way.
template <class Gemm>
cudaError_t run_after_setup(cudaError_t e, const typename Gemm::Arguments& args, int swizzle, void* workspace,
                            void* buf, cudaStream_t stream) {
  if (e == cudaSuccess) {
    Gemm gemm;
    cutlass::Status st = gemm.initialize(args, workspace, stream);
    typename Gemm::Params params = gemm.params();
    params.scheduler.log_swizzle_size_ = swizzle >= 8 ? 3 : swizzle >= 4 ? 2 : swizzle >= 2 ? 1 : 0;
    if (st == cutlass::Status::kSuccess) st = Gemm::run(params, stream);
    e = cudaGetLastError();
    if (st != cutlass::Status::kSuccess && e == cudaSuccess) e = cudaErrorLaunchFailure;
  }
  const cudaError_t ef = cudaFreeAsync(buf, stream);
  return e != cudaSuccess ? e : ef;
}

}  // namespace mslk::gemm::detail
