// Device helpers of the Hopper attention forward (fmha_fwd_sm90_kernel.cuh): exp2, the stream-K
// flags, 16-bit packing and the accumulator's row view; the generic PTX (TMA, mbarriers, named
// barriers, stmatrix) comes from common/sm90_ptx.cuh.
#pragma once
#if MSLK_HAS_CUTLASS
#include <cuda.h>  // CUtensorMap and the driver enums (types only: no -lcuda)
// Before any CUTLASS header: cutlass/cuda_host_adapter.hpp includes it inside namespace cutlass,
// which would leave the driver typedefs (PFN_cuTensorMapEncodeTiled_v12000) out of global scope.
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cutlass/numeric_types.h>

#include "common/sm90_ptx.cuh"

#include <cstdint>
#include <cute/tensor.hpp>
#include <type_traits>

namespace mslk::attention::sm90 {
using namespace cute;

// The generic Hopper PTX helpers (common/sm90_ptx.cuh) under their local names.
using ptx::fence_proxy_async_smem;
using ptx::kWatchdogNs;
using ptx::ldmatrix_x4;
using ptx::mbar_wait;
using ptx::named_barrier_arrive;
using ptx::named_barrier_sync;
using ptx::prefetch_tensormap;
using ptx::smem_u32;
using ptx::stmatrix_x4;
using ptx::tma_load_4d;
using ptx::tma_store_4d;
using ptx::tma_store_commit;
using ptx::tma_store_wait_all;
using ptx::tma_store_wait_read;

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// Stream-K flags (another CTA's partial is ready): a release store after the partial's stores, an
// acquire spin with the same watchdog as ptx::mbar_wait.
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

// The two 16-bit values of a 32-bit pair as floats (lo: the lower address).
template <typename Element>
__device__ __forceinline__ void unpack2(uint32_t v, float& lo, float& hi) {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    lo = __uint_as_float(v << 16);
    hi = __uint_as_float(v & 0xffff0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
    lo = f.x;
    hi = f.y;
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
