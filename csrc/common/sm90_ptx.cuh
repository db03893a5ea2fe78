// Generic Hopper (sm_90) PTX helpers, the one home of each: shared-memory addresses, mbarriers
// (the parity wait with a watchdog), TMA tensor loads and stores, stmatrix, named barriers and
// tensor-map prefetch, wgmma descriptors and groups, register budgets. Domain helpers (softmax exp2, packing, accumulator views) stay with their
// kernels. No CUTLASS here: include it before or after CUTLASS headers alike.
#pragma once
#include <cuda.h>  // CUtensorMap (a type only: no -lcuda)
#include <cuda_runtime.h>

#include <cstdint>

namespace mslk::ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---- cp.async (sm_80 and later): `kBytes` (4, 8 or 16) global bytes to shared memory, bypassing
// registers; src_bytes < kBytes reads that many and zero-fills the rest (0: reads nothing). 16-byte
// copies skip L1 (.cg). Completion per thread, in commit groups.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(smem_u32(smem)), "l"(gmem), "n"(kBytes),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's commit groups are pending; other threads' copies need a
// barrier as well.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Byte offset of 16-byte chunk c of row r in a tile of 128-byte rows under TMA's SWIZZLE_128B (the
// tile 1024-byte aligned): the chunk index XOR the row's low three bits.
__device__ __forceinline__ int swizzle128(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// ---- mbarriers
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// The barriers of a TMA ring of `stages` slots: `full` completes on the producer's arrive and its
// bytes, `empty` on `consumers` arrivals. One thread calls it, then the CTA syncs.
__device__ __forceinline__ void ring_init(uint64_t* full, uint64_t* empty, int stages, int consumers) {
  for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], consumers);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
}
// One arrival that also expects `bytes` of TMA transaction on the barrier.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Parity wait with a watchdog: a protocol bug traps (a launch error; compute-sanitizer names the
// line) instead of hanging the GPU. 20 s is far beyond any legitimate wait. One asm block (labels
// are local to its braces), so the hot path adds no live registers or branches to the caller.
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

// Parity wait without the watchdog, for streaming rings whose consumers wait on every chunk:
// the watchdog's scheduling around the wait cost the FP8 quantizer's 256x256 ring 8-14% on the
// H200 (docs/design/quantize.md). Protocols that can deadlock on a bug use mbar_wait.
__device__ __forceinline__ void mbar_wait_spin(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA loads: one box of a 2-D / 3-D / 4-D tensor map into shared memory, completing its bytes
// of the transaction on `bar`; out-of-bounds elements land as zeros and count toward the bytes.
__device__ __forceinline__ void tma_load_2d(const CUtensorMap* map, uint64_t* bar, void* dst, int c, int r) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(r), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

// The same with an L2 cache policy (createpolicy_evict_first: data read once, first out of L2).
__device__ __forceinline__ void tma_load_2d_hint(const CUtensorMap* map, uint64_t* bar, void* dst, int c, int r,
                                                 uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, "
      "{%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(r), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ uint64_t createpolicy_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// ---- TMA stores: one box from shared memory to global (bulk async-group; rows / columns past the
// tensor's extents are not written).
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

// ---- bulk reductions: `bytes` (a multiple of 16, both addresses 16-byte aligned) of float32 from
// shared memory added element-wise into global memory by the async proxy (one L2 request stream
// instead of per-thread atomics); completion as the TMA stores above (bulk async-group).
__device__ __forceinline__ void bulk_reduce_add_f32(float* gdst, const float* ssrc, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gdst),
               "r"(smem_u32(ssrc)), "r"(bytes)
               : "memory");
}
// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads (TMA
// stores, bulk reductions, wgmma operands).
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- vector reduction: two float32 added at `base + kOffsetBytes` when `pred`; the offset is an
// immediate and the predicate a guard, so a run of them shares one address register (no branch or
// address arithmetic between the reductions). No "memory" clobber: the sums are read only after
// the kernel, and a clobber would pin every shared-memory access of the caller around it.
template <int kOffsetBytes>
__device__ __forceinline__ void red_add_f32x2(float* base, float a, float b, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p red.global.add.v2.f32 [%0+%4], {%1, %2};\n}\n" ::"l"(base),
      "f"(a), "f"(b), "r"(int(pred)), "n"(kOffsetBytes));
}

// The 128-byte line holding ptr into L1 (no register waits on it).
__device__ __forceinline__ void prefetch_l1(const void* ptr) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(ptr));
}

// Keeps a tensor map (a __grid_constant__ parameter's address) in the descriptor cache.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// One 32-bit word to shared memory at a shared-state address (st.shared: a generic store would have
// to resolve the window first).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Four 8x8 16-bit matrices from the registers of a warp (an mma accumulator's pair layout) to shared
// memory: lane l gives the address of row l % 8 of matrix l / 8, register i holds its pair of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// Four 8x8 16-bit matrices from shared memory into a warp's registers, the inverse of stmatrix_x4:
// lane l gives the address of row l % 8 of matrix l / 8; register i gets the pair of row l / 4,
// columns 2 (l % 4), + 1 of matrix i (an mma accumulator's layout).
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// ---- named barriers (0 is __syncthreads)
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- warpgroup MMA (wgmma) bookkeeping and register budgets
// A shared-memory matrix descriptor for a K-major operand laid out as TMA's SWIZZLE_128B writes it:
// rows of 128 bytes, 8-row atoms 1024 bytes apart (the stride byte offset), the tile 1024-byte
// aligned (base offset 0). A K step of b bytes inside the 128-byte row adds b / 16 to the descriptor.
__device__ __forceinline__ uint64_t gmma_desc_sw128(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// Before the first wgmma of a batch: orders earlier register accesses of its operands.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// An accumulator register redefined here for the compiler: its uses stay after a wgmma wait.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// The warpgroup's register budget (a multiple of 8, 24..256): producers give registers away so
// consumer warpgroups can hold more accumulators than an even split of the register file allows.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace mslk::ptx
