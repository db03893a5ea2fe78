// Device helpers of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh): TMA loads, mbarrier
// waits with a watchdog, named barriers, exp2, 16-bit packing and the accumulator's row view.
#pragma once
#if MSLK_HAS_CUTLASS
#include <cuda.h>  // CUtensorMap and the driver enums (types only: no -lcuda)
// Before any CUTLASS header: cutlass/cuda_host_adapter.hpp includes it inside namespace cutlass,
// which would leave the driver typedefs (PFN_cuTensorMapEncodeTiled_v12000) out of global scope.
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cutlass/numeric_types.h>

#include <cstdint>
#include <cute/tensor.hpp>
#include <type_traits>

namespace mslk::attention::sm90 {
using namespace cute;

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
// One TMA box into shared memory, completing `bytes` of the transaction on `bar`.
__device__ __forceinline__ void tma_load_4d(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}
// One TMA box from shared memory to global (bulk async-group; rows / columns past the tensor's
// extents are not written).
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's bulk stores have read their shared memory (it may be written again).
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Four 8x8 16-bit matrices from the registers of a warp (an mma accumulator's pair layout) to shared
// memory: lane l gives the address of row l % 8 of matrix l / 8, register i holds its pair of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// mbarrier parity wait with a watchdog: a protocol bug traps (a launch error; compute-sanitizer
// names the line) instead of hanging the GPU. 20 s is far beyond any legitimate wait. One asm
// block (labels are local to its braces), so the hot path adds no live registers or branches
// to the surrounding code.
constexpr uint64_t kWatchdogNs = 20ull * 1000 * 1000 * 1000;
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      ".reg .u64 t0, t1;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra.uni WAIT_DONE;\n"
      "mov.u64 t0, %%globaltimer;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra.uni WAIT_DONE;\n"
      "mov.u64 t1, %%globaltimer;\n"
      "sub.u64 t1, t1, t0;\n"
      "setp.gt.u64 p, t1, %2;\n"
      "@p trap;\n"
      "bra.uni WAIT_LOOP;\n"
      "WAIT_DONE:\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity), "l"(kWatchdogNs)
      : "memory");
}
__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Stream-K flags (another CTA's partial is ready): a release store after the partial's stores, an
// acquire spin with the same watchdog as mbar_wait.
__device__ __forceinline__ void flag_release(unsigned long long* flag, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(flag), "l"(v) : "memory");
}
// Waits until *flag is v or v + 1 (v even) and returns the low bit (stream_k_item: more of the tile
// in the next slot).
__device__ __forceinline__ unsigned flag_wait(const unsigned long long* flag, unsigned long long v) {
  unsigned long long f;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      ".reg .u64 t0, t1, e;\n"
      "mov.u64 t0, %%globaltimer;\n"
      "FLAG_LOOP:\n"
      "ld.acquire.gpu.global.u64 %0, [%1];\n"
      "or.b64 e, %0, 1;\n"
      "setp.eq.u64 p, e, %2;\n"
      "@p bra.uni FLAG_DONE;\n"
      "nanosleep.u32 32;\n"
      "mov.u64 t1, %%globaltimer;\n"
      "sub.u64 t1, t1, t0;\n"
      "setp.gt.u64 p, t1, %3;\n"
      "@p trap;\n"
      "bra.uni FLAG_LOOP;\n"
      "FLAG_DONE:\n"
      "}\n"
      : "=l"(f)
      : "l"(flag), "l"(v | 1), "l"(kWatchdogNs)
      : "memory");
  return unsigned(f & 1);
}
// Named barriers (0 is __syncthreads): per-warpgroup V-tail zeroing, and the ping-pong turns.
constexpr int kBarTail = 1;  // + consumer warpgroup (128 threads): 1..4
constexpr int kBarTurn = 5;  // + consumer warpgroup whose turn it is (256 threads: 128 arrive, 128 sync)
template <typename Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// A wgmma accumulator fragment ((2 cols, 2 rows, N/8), 1, 1) seen as (2 rows, (2 cols, N/8)).
template <class L>
CUTE_HOST_DEVICE constexpr auto acc_rowcol(L l) {
  static_assert(rank(L{}) == 3 && size<1>(L{}) == 1 && size<2>(L{}) == 1, "one wgmma tile per thread");
  auto v = get<0>(l);
  return make_layout(get<1>(v), make_layout(get<0>(v), get<2>(v)));
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
