// Device helpers shared by the FA2-style (SM80+ mma.sync) attention kernels, forward and backward:
// mma / pack per dtype, cp.async and ldmatrix wrappers, the XOR-swizzled [rows][D] shared-memory
// tile (16-byte chunks of a row XORed with row & 7, so ldmatrix over 8 consecutive rows is
// bank-conflict free when D / 8 >= 8) and its loaders, and the mask band of FmhaFwdParams.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_dropout.h"
#include "attention/kernels/fmha_fwd.h"

namespace mslk::attention::sm80 {

template <typename T> struct Traits;
template <> struct Traits<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
};
template <> struct Traits<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16-byte async copy; src_bytes == 0 zero-fills the destination without reading src.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// Element offset of (row, col) in a swizzled [rows][D] tile.
template <int D> __device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Warp-level mma steps on swizzled [rows][D] tiles (g = lane / 4, t = lane % 4 as in the PTX
// fragment tables).
// acc[n] += A B^T over the 16 columns [16 * kk, + 16) of both tiles: A the 16 rows [a_row, + 16) of
// sA, B the rows [0, 8 * NB) of sB (e.g. S = Q K^T with the reduction along D).
// The A fragment of rows [a_row, + 16), columns [16 * kk, + 16) of a swizzled tile.
template <int D, typename T>
__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], const T* sA, int a_row, int kk, int lane) {
  ldsm_x4(a[0], a[1], a[2], a[3], smem_u32(sA + swz<D>(a_row + (lane & 15), kk * 16 + (lane >> 4) * 8)));
}
// acc[n] += a B^T with A already in registers (load_a_frag).
template <typename T, int D, int NB>
__device__ __forceinline__ void mma_frag_rows(float (&acc)[NB][4], const uint32_t (&a)[4], const T* sB, int kk,
                                              int lane) {
#pragma unroll
  for (int nb2 = 0; nb2 < NB / 2; ++nb2) {
    uint32_t b0, b1, b2, b3;
    const int row = nb2 * 16 + (lane & 7) + ((lane >> 4) << 3);
    ldsm_x4(b0, b1, b2, b3, smem_u32(sB + swz<D>(row, kk * 16 + ((lane >> 3) & 1) * 8)));
    Traits<T>::mma(acc[2 * nb2], a, b0, b1);
    Traits<T>::mma(acc[2 * nb2 + 1], a, b2, b3);
  }
}
template <typename T, int D, int NB>
__device__ __forceinline__ void mma_rows_rows(float (&acc)[NB][4], const T* sA, int a_row, const T* sB, int kk,
                                              int lane) {
  uint32_t a[4];
  load_a_frag<D>(a, sA, a_row, kk, lane);
  mma_frag_rows<T, D, NB>(acc, a, sB, kk, lane);
}
// The A operand of reduction step kk from accumulators x[2 kk], x[2 kk + 1] (the C layout of a
// 16 x 16 block is the A layout, repacked to the input dtype).
template <typename T, int N>
__device__ __forceinline__ void acc_to_a(const float (&x)[N][4], int kk, uint32_t (&a)[4]) {
  a[0] = Traits<T>::pack(x[2 * kk][0], x[2 * kk][1]);
  a[1] = Traits<T>::pack(x[2 * kk][2], x[2 * kk][3]);
  a[2] = Traits<T>::pack(x[2 * kk + 1][0], x[2 * kk + 1][1]);
  a[3] = Traits<T>::pack(x[2 * kk + 1][2], x[2 * kk + 1][3]);
}
// c0, c1 (output columns [col, + 8), [col + 8, + 8)) += A B: B the rows [16 * kk, + 16) of sB taken
// as the reduction dim (ldmatrix.trans), e.g. O += P V; row = trans_row(kk, lane), hoisted by the
// caller out of its column loop.
__device__ __forceinline__ int trans_row(int kk, int lane) { return kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8; }
template <typename T, int D>
__device__ __forceinline__ void mma_a_trans(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4], const T* sB,
                                            int row, int col, int lane) {
  uint32_t b0, b1, b2, b3;
  ldsm_x4_t(b0, b1, b2, b3, smem_u32(sB + swz<D>(row, col + (lane >> 4) * 8)));
  Traits<T>::mma(c0, a, b0, b1);
  Traits<T>::mma(c1, a, b2, b3);
}

// Async load of a [ROWS][D] tile: row r of the tile is base + off + r * row_stride; rows >= rows_valid
// and columns >= cols_valid (a multiple of 8) are zero-filled.
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(T* s, const T* base, int64_t off, int64_t row_stride, int rows_valid,
                                          int cols_valid, int tid) {
  constexpr int CPR = D / 8;  // 16-byte chunks per row
  static_assert(ROWS * CPR % THREADS == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
  for (int n = 0; n < ROWS * CPR / THREADS; ++n) {
    const int i = tid + n * THREADS;
    const int r = i / CPR, c = (i % CPR) * 8;
    const bool ok = r < rows_valid && c < cols_valid;
    const T* src = ok ? base + off + r * row_stride + c : base;
    cp_async_16(smem_u32(s + swz<D>(r, c)), src, ok ? 16 : 0);
  }
}

// Element offset of tile row r of a K/V tile: dense rows (off + r * row_stride), or through the
// page table (paged K/V); -1 for a row that must read as zeros.
struct DenseRows {
  int64_t off, row_stride;
  __device__ __forceinline__ int64_t operator()(int r) const { return off + r * row_stride; }
};
struct PagedRows {
  const int* bt;     // this lane's block-table row
  int64_t first;     // logical key of tile row 0
  int64_t head_off;  // element offset of this head in a row
  int64_t row_stride, kv_rows;
  int page_size;
  __device__ __forceinline__ int64_t operator()(int r) const {
    const int64_t x = first + r;
    const int64_t page = bt[x / page_size];
    const int64_t row = page * page_size + x % page_size;
    return page < 0 || row >= kv_rows ? -1 : head_off + row * row_stride;
  }
};

// Async load of a [ROWS][D] K/V tile whose row r sits at element offset rows(r) (see above);
// rows >= rows_valid, rows at offset -1 and columns >= cols_valid are zero-filled.
template <typename T, int D, int ROWS, int THREADS, typename Rows>
__device__ __forceinline__ void load_rows(T* s, const T* base, const Rows& rows, int rows_valid, int cols_valid,
                                          int tid) {
  constexpr int CPR = D / 8;
  static_assert(ROWS * CPR % THREADS == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
  for (int n = 0; n < ROWS * CPR / THREADS; ++n) {
    const int i = tid + n * THREADS;
    const int r = i / CPR, c = (i % CPR) * 8;
    const int64_t ro = r < rows_valid && c < cols_valid ? rows(r) : -1;
    const T* src = ro >= 0 ? base + ro + c : base;
    cp_async_16(smem_u32(s + swz<D>(r, c)), src, ro >= 0 ? 16 : 0);
  }
}

constexpr int64_t kUnbounded = int64_t(1) << 40;

// The allowed band of one (query block, key lane) (FmhaFwdParams comment): key j is allowed for
// query i iff j < lk and lo <= j - i - shift <= hi.
struct MaskBand {
  int64_t lo, hi, shift;
  __device__ __forceinline__ static MaskBand make(int kind, int64_t window_left, int64_t window_right, int lq,
                                                  int lk) {
    const bool causal = kind == kMaskCausalTopLeft || kind == kMaskCausalBottomRight;
    const bool bottom_right = kind == kMaskCausalBottomRight || kind == kMaskLocalBottomRight;
    MaskBand b;
    b.shift = bottom_right ? int64_t(lk) - lq : 0;
    b.hi = causal ? 0 : kUnbounded;
    if (window_right >= 0 && window_right < b.hi) b.hi = window_right;
    b.lo = window_left >= 0 ? -window_left : -kUnbounded;
    return b;
  }
  __device__ __forceinline__ static int64_t clamp(int64_t x, int n) { return x < 0 ? 0 : (x > n ? n : x); }
  // Keys [*jb, *je) of [0, lk) that some query of rows [r_first, r_last] may see.
  __device__ __forceinline__ void keys_of(int64_t r_first, int64_t r_last, int lk, int64_t* jb, int64_t* je) const {
    *jb = clamp(r_first + shift + lo, lk);
    *je = clamp(r_last + shift + hi + 1, lk);
  }
  // Queries [*ib, *ie) of [0, lq) that may see some key of [c_first, c_last].
  __device__ __forceinline__ void queries_of(int64_t c_first, int64_t c_last, int lq, int64_t* ib,
                                            int64_t* ie) const {
    *ib = clamp(c_first - shift - hi, lq);
    *ie = clamp(c_last - shift - lo + 1, lq);
  }
  // Whether every (i, j) of rows [r_first, r_last] x keys [c_first, c_last] lies inside the band.
  __device__ __forceinline__ bool inside(int64_t r_first, int64_t r_last, int64_t c_first, int64_t c_last) const {
    return c_first - r_last - shift >= lo && c_last - r_first - shift <= hi;
  }
  __device__ __forceinline__ bool allowed(int64_t i, int64_t j) const {
    const int64_t d = j - i - shift;
    return d >= lo && d <= hi;
  }
};

// Keep bits of elements (i, j) and (i, j + 1) of head bh (bit 0: j): one Philox call, two where the
// pair straddles a group of four keys.
__device__ __forceinline__ uint32_t dropout_keep2(const FmhaDropout& d, int64_t bh, int64_t i, int64_t j) {
  uint32_t bits = fmha_dropout_keep4(d, bh, i, j >> 2) >> (j & 3);
  if ((j & 3) == 3) bits |= fmha_dropout_keep4(d, bh, i, (j >> 2) + 1) << 1;
  return bits & 3u;
}

// The (query block, key lane) of sequence s (FmhaFwdParams comment), clamped so that an
// inconsistent descriptor (device-side values the glue cannot check) stays in bounds: queries
// [q0, q0 + lq) of the Mq rows, keys [k0, k0 + lk) of kv_rows. False: a negative start, nothing to do.
struct SeqBlock {
  int bq, q0, lq, k0, lk;
};
template <class Params>
__device__ __forceinline__ bool seq_block(const Params& p, int s, int kv_rows, SeqBlock& b) {
  if (p.seqstart_q != nullptr) {
    b.bq = 0;
    b.q0 = p.seqstart_q[s];
    b.lq = p.seqstart_q[s + 1] - b.q0;
    b.k0 = p.seqstart_k[s];
    b.lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.seqstart_k[s + 1] - b.k0;
  } else {
    b.bq = s;
    b.q0 = 0;
    b.lq = p.Mq;
    b.k0 = 0;
    b.lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.Mkv;
  }
  b.lq = max(0, min(b.lq, p.Mq - max(b.q0, 0)));
  b.lk = max(0, min(b.lk, kv_rows - max(b.k0, 0)));
  return b.q0 >= 0 && b.k0 >= 0;
}

}  // namespace mslk::attention::sm80
