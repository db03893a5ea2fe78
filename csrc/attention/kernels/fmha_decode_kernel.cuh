// Split-K decode attention (kernels/fmha_decode.h) for fp16/bf16 on SM80+ (mma.sync m16n8k16).
// A long file: the kernel is one function whose copy paths, dequantization, softmax and combine
// share its registers and ring; the element rules live in fmha_decode_elements.cuh.
//
// Grid (split, K/V head, sequence x row chunk). The rows of a (sequence, K/V head) are the R x lq
// (query head, query) pairs of the group, row x = query i * R + head h, taken 16 at a time (one
// m16 tile; decode shapes with R x Mq <= 16 have one chunk, so K/V is read once per group). The
// split's key tiles are dealt round-robin to the CTA's warps; each warp streams its own tiles
// through a kStages-deep cp.async ring (only __syncwarp in the main loop, so no warp waits for
// another's loads) and keeps its own online softmax over the shared Q tile, exactly as the FA2
// forward does (fmha_fwd_kernel.cuh, same helpers). The warps' partial (m, l, O) are combined
// through shared memory and written as the split's float32 O and LSE; a second kernel (the
// attention merge, kernels/merge_attentions.cu) combines the splits.
//
// Quantized caches (QK = kKvFp8 / kKvInt4): the ring holds the tiles' raw int32 rows (and the FP8
// rows' scale/shift words), a half or a quarter of the bytes, so it is deeper; each warp dequantizes
// its current stage into one [K, V][BN][D] tile of T with the element rule of kv_dequant.h (float32,
// one rounding to T), and the rest of the step is the unquantized kernel's on that tile. The result
// has the bits of dequantizing the cache into a T tensor, then running the unquantized kernel with
// the same tile row and split count.
//
// Folded (kFold: FP8, and INT4 with one group, i.e. one scale and shift a cache row): the raw values
// (E4M3, or the nibbles 0..15) are exact in fp16, so the tile is converted to fp16 without the
// scale (one cvt or LOP3 + HSUB2 a pair), Q is converted to fp16 once (each row times a power of
// two), and the MMAs run in fp16. The row's scale and shift are applied outside the MMAs: K's on
// the scores (s = scale * q.k + shift * sum(q)), V's on P (P * scale, relative to a power of two
// kept per warp, as the softmax keeps its running max) and as a per-row sum of P * shift. No
// rounding of the dequantized value: the result is closer to the exact attention over the
// dequantized cache than the routes above, not bit-identical to them.
//
// Register fragments (kRegs: folded FP8 at head dims 64 and 128 with 16-byte rows): no dequantized
// tile and no ldmatrix. Each lane copies (cp.async, into its own slots of a ring) exactly the
// bytes its mma fragments take and reads them back into registers. For S = Q K^T lane (g, t) reads key
// g's bytes [t D / 4, + D / 4) of each 8-key block, so that word kk of them holds the B fragment of
// reduction step kk (head-dim columns permuted; Q's A fragments are read from the same
// permutation). For O += P V lane (g, t) reads bytes [g D / 8, + D / 8) of keys 2t, 2t + 1, 2t + 8,
// 2t + 9 of each 16-key step; byte b of them is output block b's column g (O's columns permuted,
// undone when O is written). E4M3 pairs go to fp16 by one cvt each (V's key pairs first
// interleaved by prmt). The scale words of K and V are those of the V keys a lane reads.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/kernels/fmha_decode.h"
#include "attention/kernels/fmha_decode_elements.cuh"
#include "attention/kernels/fmha_decode_merge.cuh"
#include "attention/kernels/fmha_sm80_device.cuh"
#include "common/device_attrs.h"

namespace mslk::attention::decode_detail {

using namespace sm80;  // NOLINT: the shared device helpers

// Tiles per padded head dim (tuning data), row V = FmhaDecodeParams::tile_cfg: warps per CTA,
// keys per warp tile, ring depth, CTAs an SM holds (launch bounds; the split heuristic's table in
// fmha_decode.cu says the same). Row 0: four warps, one CTA an SM; 1: eight warps on half the keys
// (two warps per scheduler hide the mma / exp latency); 2: four warps on half the keys in half the
// shared memory, two CTAs an SM (one's prologue and combine overlap the other's stream); 3: as 2
// with a two-stage ring, three CTAs. d256 has room for row 0 only.
template <int D, int V> struct DecodeCfg;
template <int W, int BN, int S, int CTAS> struct DecodeRow {
  static constexpr int kWarps = W, kBN = BN, kStages = S, kCtasPerSm = CTAS;
};
template <> struct DecodeCfg<64, 0> : DecodeRow<4, 64, 3, 1> {};
template <> struct DecodeCfg<128, 0> : DecodeRow<4, 32, 3, 1> {};
template <> struct DecodeCfg<256, 0> : DecodeRow<4, 16, 3, 1> {};
template <> struct DecodeCfg<64, 1> : DecodeRow<8, 32, 3, 1> {};
template <> struct DecodeCfg<128, 1> : DecodeRow<8, 16, 3, 1> {};
template <> struct DecodeCfg<256, 1> : DecodeCfg<256, 0> {};
template <> struct DecodeCfg<64, 2> : DecodeRow<4, 32, 3, 2> {};
template <> struct DecodeCfg<128, 2> : DecodeRow<4, 16, 3, 2> {};
template <> struct DecodeCfg<256, 2> : DecodeCfg<256, 0> {};
template <> struct DecodeCfg<64, 3> : DecodeRow<4, 32, 2, 3> {};
template <> struct DecodeCfg<128, 3> : DecodeRow<4, 16, 2, 3> {};
template <> struct DecodeCfg<256, 3> : DecodeCfg<256, 0> {};

constexpr int kRows = 16;  // query rows per CTA (one mma row tile)

// Quantized caches: the one tile row per padded head dim (fmha_decode_plan.cpp's kTileTable says
// the same, so the split count matches the unquantized kernel's), the raw row pitch in shared memory
// (FP8: D bytes; INT4: up to 8 scale/shift words and D / 2 bytes, 16-byte padded) and the ring depth
// (tuning data: about the unquantized ring's bytes in flight, within the row's shared memory).
template <int D> constexpr int kQuantRow = D <= 128 ? 2 : 0;
template <int D, int QK> constexpr int quant_pitch() { return QK == kKvFp8 ? D : (32 + D / 2 + 15) / 16 * 16; }
template <int D, int QK, int V = kQuantRow<D>> constexpr int quant_stages() {
  return V == 3 ? 2 : QK == kKvFp8 ? 4 : D <= 64 ? 4 : D <= 128 ? 5 : 6;
}
// One ring stage of a warp: raw K rows, raw V rows, K scale/shift words, V scale/shift words.
template <int D, int QK, int BN> constexpr int quant_stage_bytes() { return 2 * BN * quant_pitch<D, QK>() + 2 * BN * 4; }

// Register fragments (kRegs): a warp's ring stage holds each lane's K chunks (16 bytes), its V
// pieces (D / 8 bytes) and the tile's 2 BN scale words. Tuning data: 32 keys a warp tile (the
// softmax's per-tile work over twice tile row 2's keys at d128), a 3-stage ring (two tiles, 16 KB a
// warp, in flight), two CTAs an SM.
template <int D, int BN> constexpr int regs_stage_bytes() { return 32 * (BN / 8) * (D / 4) + 32 * (BN / 4) * (D / 8) + 2 * BN * 4; }
constexpr int kRegsStages = 3, kRegsBN = 32;

template <int D, int V, int QK = kKvPlain, bool kRegs = false>
constexpr size_t smem_bytes(size_t elem) {
  using C = DecodeCfg<D, V>;
  if constexpr (kRegs) {  // the Q tile and the warps' fragment rings (which the combine reuses)
    return size_t(kRows) * D * elem + size_t(C::kWarps) * kRegsStages * regs_stage_bytes<D, kRegsBN>();
  } else if constexpr (QK == kKvPlain) {
    return (size_t(kRows) * D + size_t(C::kWarps) * C::kStages * 2 * C::kBN * D) * elem;
  } else {
    const size_t per_warp = size_t(quant_stages<D, QK, V>()) * quant_stage_bytes<D, QK, C::kBN>() + 2 * C::kBN * D * elem;
    return size_t(kRows) * D * elem + C::kWarps * per_warp;
  }
}

// Element offset of chunk row r of the Q tile: row x = r0 + r is query x / R, head x % R; -1 for
// rows past the block.
struct QRows {
  int64_t base, q_sm, q_sh;
  int r0, R, rows_used;
  __device__ __forceinline__ int64_t operator()(int r) const {
    if (r >= rows_used) return -1;
    const int x = r0 + r;
    return base + int64_t(x / R) * q_sm + int64_t(x % R) * q_sh;
  }
};

// cp.async of a whole 16-byte chunk (no zero-fill operand).
__device__ __forceinline__ void cp_async_16_full(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
// 8-byte async copy (the d64 V pieces of the register-fragment ring); src_bytes == 0 zero-fills.
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 4-byte async copy (rows of quantized caches that are not 16-byte aligned); src_bytes == 0 zero-fills.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

// Folded FP8 with 16-byte rows, K == Kv == D: the register-fragment kernel (kRegs) takes it.
template <int D> constexpr bool kRegsHeadDim = D == 64 || D == 128;

template <typename T, int D, int V, int QK = kKvPlain, bool kFold = false, bool kRegs = false>
__global__ void __launch_bounds__(DecodeCfg<D, V>::kWarps * 32, DecodeCfg<D, V>::kCtasPerSm)
    fmha_decode_kernel(const FmhaDecodeParams p) {
  using C = DecodeCfg<D, V>;
  using TM = std::conditional_t<kFold, __half, T>;  // the MMA operands' type
  constexpr bool kQuant = QK != kKvPlain;
  static_assert(!kFold || kQuant, "folding is for quantized caches");
  static_assert(!kRegs || (kFold && QK == kKvFp8 && kRegsHeadDim<D>), "register fragments: folded FP8, d64 / d128");
  constexpr int NW = C::kWarps, BN = kRegs ? kRegsBN : C::kBN;
  constexpr int STAGES = kRegs ? kRegsStages : kQuant ? quant_stages<D, QK, V>() : C::kStages;
  constexpr int THREADS = NW * 32;
  constexpr int NB = BN / 8;  // score n-blocks per warp tile
  constexpr int OB = D / 8;   // output n-blocks
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  static_assert(BN % 16 == 0 && STAGES >= 2, "tile shape");
  static_assert(NW * kRows * D * sizeof(float) <= smem_bytes<D, V, QK, kRegs>(sizeof(T)) - kRows * D * sizeof(T),
                "the combine buffer reuses the ring");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // [kRows][D], swizzled
  T* ring = sQ + kRows * D;                // [NW][STAGES][K, V][BN][D], swizzled tiles
  __shared__ float sM[NW][kRows], sL[NW][kRows];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y;
  const int n_chunks = (p.R * p.max_seqlen_q + kRows - 1) / kRows;
  const int s = blockIdx.z / n_chunks, chunk = blockIdx.z % n_chunks;

  if (p.merge_ctr != nullptr && p.seqstart_q != nullptr && split == 0 && chunk == 0 &&
      (s == 0 || s == p.num_seqs - 1))
    write_rows_outside<THREADS>(p, s, kvh);  // before the returns below: those CTAs may have no rows

  const bool paged = p.block_table != nullptr;
  SeqBlock sb;
  if (!seq_block(p, s, paged ? p.bt_cols * p.page_size : p.Mkv, sb)) return;
  const int r0 = chunk * kRows;
  const int rows_used = min(kRows, sb.lq * p.R - r0);
  if (rows_used <= 0) return;  // uniform over the CTA

  // ---- this split's key tiles: the keys some row may see, in BN-tiles dealt evenly to the splits
  const MaskBand band = MaskBand::make(p.mask_kind, p.window_left, p.window_right, sb.lq, sb.lk);
  const int i_first = r0 / p.R, i_last = (r0 + rows_used - 1) / p.R;
  int64_t jb, je;
  band.keys_of(i_first, i_last, sb.lk, &jb, &je);
  const int base = int(jb) / BN * BN;
  const int n_tiles = je > jb ? int((je - base + BN - 1) / BN) : 0;
  const int per_split = (n_tiles + p.num_splits - 1) / p.num_splits;
  const int t_begin = min(n_tiles, split * per_split), t_end = min(n_tiles, t_begin + per_split);
  const int my_tiles = t_end - t_begin > warp ? (t_end - t_begin - warp + NW - 1) / NW : 0;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int64_t k_off = int64_t(sb.bq) * p.k_sb + int64_t(sb.k0) * p.k_sm + int64_t(kvh) * p.k_sg;
  const int64_t v_off = int64_t(sb.bq) * p.v_sb + int64_t(sb.k0) * p.v_sm + int64_t(kvh) * p.v_sg;
  const int* bt_row = paged ? p.block_table + int64_t(s) * p.bt_stride : nullptr;
  T* wring = ring + warp * C::kStages * 2 * BN * D;  // the unquantized ring (STAGES == C::kStages there)
  // Quantized caches: this warp's raw ring, then its dequantized [K, V][BN][D] tile.
  constexpr int QP = kQuant ? quant_pitch<D, QK>() : 16, QSB = kQuant ? quant_stage_bytes<D, QK, BN>() : 16;
  unsigned char* qring = reinterpret_cast<unsigned char*>(ring) + warp * (STAGES * QSB + 2 * BN * D * sizeof(T));
  TM* deq = reinterpret_cast<TM*>(qring + STAGES * QSB);
  // Warp tile `it` (keys [n, n + BN) of the lane) into ring stage st, by this warp's lanes.
  auto tile_key = [&](int it) { return base + (t_begin + warp + it * NW) * BN; };
  // A dense tile with every row below the sequence's end and K == Kv == D (the common case) skips
  // load_rows' per-chunk bounds and index math, which dominated the instruction count: lane l
  // copies column chunk l % CPR of rows l / CPR + j * RPI, and the swizzle's row phase repeats
  // every PER loads, so the shared-memory offsets are PER lane constants plus immediates.
  constexpr int CPR = D / 8, RPI = 32 / CPR, NLD = BN / RPI, PER = 8 / RPI;
  static_assert(32 % CPR == 0 && BN % RPI == 0 && NLD % PER == 0, "fast tile load shape");
  const bool fast_cols = !paged && p.K == D && p.Kv == D;
  const int lane_r = lane / CPR, lane_c = (lane % CPR) * 8;
  uint32_t sm_off[PER];
#pragma unroll
  for (int j = 0; j < PER; ++j) sm_off[j] = uint32_t(swz<D>(lane_r + j * RPI, lane_c) * sizeof(T));
  const T* k_lane = k + k_off + lane_r * p.k_sm + lane_c;
  const T* v_lane = v + v_off + lane_r * p.v_sm + lane_c;
  const int64_t k_step = RPI * p.k_sm, v_step = RPI * p.v_sm;
  auto load = [&](int it, int st) {
    const int n = tile_key(it);
    T* dk = wring + st * 2 * BN * D;
    T* dv = dk + BN * D;
    if (fast_cols && n + BN <= sb.lk) {
      const uint32_t sk = smem_u32(dk), sv = smem_u32(dv);
      const T* gk = k_lane + n * p.k_sm;
      const T* gv = v_lane + n * p.v_sm;
#pragma unroll
      for (int j = 0; j < NLD; ++j) cp_async_16_full(sk + sm_off[j % PER] + (j / PER) * 8 * D * sizeof(T), gk + j * k_step);
#pragma unroll
      for (int j = 0; j < NLD; ++j) cp_async_16_full(sv + sm_off[j % PER] + (j / PER) * 8 * D * sizeof(T), gv + j * v_step);
    } else if (paged) {
      const PagedRows rk{bt_row, int64_t(sb.k0) + n, int64_t(kvh) * p.k_sg, p.k_sm, p.kv_rows, p.page_size};
      const PagedRows rv{bt_row, int64_t(sb.k0) + n, int64_t(kvh) * p.v_sg, p.v_sm, p.kv_rows, p.page_size};
      load_rows<T, D, BN, 32>(dk, k, rk, sb.lk - n, p.K, lane);
      load_rows<T, D, BN, 32>(dv, v, rv, sb.lk - n, p.Kv, lane);
    } else {
      load_rows<T, D, BN, 32>(dk, k, DenseRows{k_off + int64_t(n) * p.k_sm, p.k_sm}, sb.lk - n, p.K, lane);
      load_rows<T, D, BN, 32>(dv, v, DenseRows{v_off + int64_t(n) * p.v_sm, p.v_sm}, sb.lk - n, p.Kv, lane);
    }
  };

  // Quantized caches: the raw int32 rows of tile `it` (and the FP8 rows' scale/shift words) into ring
  // stage st. Lane r < BN finds row r (a pool row through the page table when paged; -1 reads as
  // zeros, which dequantize to zeros) and the lanes share it by shuffles.
  const int32_t* kq = static_cast<const int32_t*>(p.k);
  const int32_t* vq = static_cast<const int32_t*>(p.v);
  const int64_t kq_head = (paged ? 0 : int64_t(sb.bq) * p.k_sb) + int64_t(kvh) * p.k_sg;
  const int64_t vq_head = (paged ? 0 : int64_t(sb.bq) * p.v_sb) + int64_t(kvh) * p.v_sg;
  const int64_t ks_head = (paged ? 0 : int64_t(sb.bq) * p.ks_sb) + int64_t(kvh) * p.ks_sg;
  const int64_t vs_head = (paged ? 0 : int64_t(sb.bq) * p.vs_sb) + int64_t(kvh) * p.vs_sg;
  // Dense full tiles (the common case) skip the per-row lookup below: lane l copies row l / LPR of
  // the tile (LPR lanes a row), its units [qu0, qu1) (16-byte chunks, or words where rows are not
  // 16-byte aligned), from a lane-constant pointer: no shuffle, division or page lookup a tile.
  constexpr int LPR = BN <= 32 ? 32 / BN : 1;  // (the unquantized rows' BN 64 never gets here)
  static_assert(!kQuant || (BN <= 32 && 32 % BN == 0), "quantized tiles of at most 32 keys");
  const int q_row = lane / LPR;
  const int q_units = p.kv_vec16 ? p.kv_row_words / 4 : p.kv_row_words;
  const int q_upl = (q_units + LPR - 1) / LPR;
  const int qu0 = min(q_units, (lane % LPR) * q_upl), qu1 = min(q_units, qu0 + q_upl);
  const int32_t* kq_lane = kq + kq_head + (int64_t(sb.k0) + q_row) * p.k_sm;
  const int32_t* vq_lane = vq + vq_head + (int64_t(sb.k0) + q_row) * p.v_sm;
  const int32_t* ks_lane = nullptr;
  const int32_t* vs_lane = nullptr;
  if constexpr (QK == kKvFp8) {
    ks_lane = static_cast<const int32_t*>(p.k_ss) + ks_head + (int64_t(sb.k0) + lane) * p.ks_sm;
    vs_lane = static_cast<const int32_t*>(p.v_ss) + vs_head + (int64_t(sb.k0) + lane) * p.vs_sm;
  }
  auto qload = [&](int it, int st) {
    const int n = tile_key(it);
    if (!paged && n + BN <= sb.lk) {
      const uint32_t d_k = smem_u32(qring + st * QSB), d_v = d_k + BN * QP, o = uint32_t(q_row * QP);
      const int32_t* gk = kq_lane + int64_t(n) * p.k_sm;
      const int32_t* gv = vq_lane + int64_t(n) * p.v_sm;
      if (p.kv_vec16) {
#pragma unroll 4
        for (int u = qu0; u < qu1; ++u) {
          cp_async_16_full(d_k + o + u * 16, gk + u * 4);
          cp_async_16_full(d_v + o + u * 16, gv + u * 4);
        }
      } else {
#pragma unroll 4
        for (int u = qu0; u < qu1; ++u) {
          cp_async_4(d_k + o + u * 4, gk + u, 4);
          cp_async_4(d_v + o + u * 4, gv + u, 4);
        }
      }
      if (QK == kKvFp8 && lane < BN) {
        const uint32_t d_ss = d_k + 2 * BN * QP + lane * 4;
        cp_async_4(d_ss, ks_lane + int64_t(n) * p.ks_sm, 4);
        cp_async_4(d_ss + BN * 4, vs_lane + int64_t(n) * p.vs_sm, 4);
      }
      return;
    }
    int64_t my_row = -1;
    if (lane < BN && lane < sb.lk - n) {
      const int64_t x = int64_t(sb.k0) + n + lane;
      if (!paged) {
        my_row = x;
      } else {
        const int64_t page = bt_row[x / p.page_size];
        const int64_t row = page * p.page_size + x % p.page_size;
        my_row = page < 0 || row >= p.kv_rows ? -1 : row;
      }
    }
    unsigned char* dst = qring + st * QSB;
    const uint32_t d_k = smem_u32(dst), d_v = d_k + BN * QP;
    const int cbytes = p.kv_vec16 ? 16 : 4, per_row = p.kv_row_words * 4 / cbytes;
    for (int b0 = 0; b0 < BN * per_row; b0 += 32) {
      const int i = b0 + lane, r = min(i / per_row, BN - 1), c = i - r * per_row;
      const int64_t row = __shfl_sync(0xffffffffu, my_row, r);
      if (i >= BN * per_row) continue;
      const int64_t wk = row >= 0 ? kq_head + row * p.k_sm + c * (cbytes / 4) : 0;
      const int64_t wv = row >= 0 ? vq_head + row * p.v_sm + c * (cbytes / 4) : 0;
      const uint32_t o = uint32_t(r * QP + c * cbytes);
      if (cbytes == 16) {
        cp_async_16(d_k + o, kq + wk, row >= 0 ? 16 : 0);
        cp_async_16(d_v + o, vq + wv, row >= 0 ? 16 : 0);
      } else {
        cp_async_4(d_k + o, kq + wk, row >= 0 ? 4 : 0);
        cp_async_4(d_v + o, vq + wv, row >= 0 ? 4 : 0);
      }
    }
    if (QK == kKvFp8 && lane < BN) {
      const uint32_t d_ss = d_k + 2 * BN * QP + lane * 4;
      const int32_t* ks = static_cast<const int32_t*>(p.k_ss);
      const int32_t* vs = static_cast<const int32_t*>(p.v_ss);
      cp_async_4(d_ss, my_row >= 0 ? ks + ks_head + my_row * p.ks_sm : ks, my_row >= 0 ? 4 : 0);
      cp_async_4(d_ss + BN * 4, my_row >= 0 ? vs + vs_head + my_row * p.vs_sm : vs, my_row >= 0 ? 4 : 0);
    }
  };
  // An FP8 row's scale word as (scale, shift).
  auto scale_word = [&](uint32_t w, float& scale, float& shift) {
    scale = p.ss_fp32 ? __uint_as_float(w) : half_bits(w & 0xFFFFu);
    shift = p.ss_fp32 ? 0.0f : half_bits(w >> 16);
  };
  // Quantized caches: ring stage st to the warp's T tile, eight elements (one 16-byte chunk of the
  // swizzled tile) at a time. 32 is a multiple of D / 8, so each lane keeps one column chunk; columns
  // past the head dim are zeros, as the unquantized loads' zero-fill leaves them.
  constexpr int QCPR = D / 8, QRSTEP = 32 / QCPR, QN = BN * QCPR / 32;
  static_assert(32 % QCPR == 0 && (BN * QCPR) % 32 == 0, "dequant chunk shape");
  const int qc = lane % QCPR, qr0 = lane / QCPR;
  const bool qcol = qc * 8 < p.K;
  const int qgroup = p.kv_groups > 0 ? qc * 8 / (p.K / p.kv_groups) : 0;  // INT4 scale/shift word of the chunk
  auto dequant = [&](int st) {
    const unsigned char* src = qring + st * QSB;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const unsigned char* raw = src + kv * BN * QP;
      const uint32_t* ss = reinterpret_cast<const uint32_t*>(src + 2 * BN * QP) + kv * BN;
      T* out = reinterpret_cast<T*>(deq) + kv * BN * D;
#pragma unroll
      for (int j = 0; j < QN; ++j) {
        const int r = qr0 + j * QRSTEP;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (qcol) {
          const unsigned char* row = raw + r * QP;
          if constexpr (QK == kKvFp8) {
            const uint2 w = *reinterpret_cast<const uint2*>(row + qc * 8);
            float scale, shift;
            scale_word(ss[r], scale, shift);
            val = dequant_fp8x8<T>(w.x, w.y, scale, shift);
          } else {
            const uint32_t* words = reinterpret_cast<const uint32_t*>(row);
            const uint32_t s = words[qgroup];
            val = dequant_int4x8<T>(words[p.kv_groups + qc], half_bits(s & 0xFFFFu), half_bits(s >> 16));
          }
        }
        *reinterpret_cast<uint4*>(out + swz<D>(r, qc * 8)) = val;
      }
    }
  };
  // Folded caches: ring stage st to the warp's fp16 tile of raw values (raw_fp8x8 / raw_int4x8).
  auto dequant_fold = [&](int st) {
    const unsigned char* src = qring + st * QSB;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const unsigned char* raw = src + kv * BN * QP;
      TM* out = deq + kv * BN * D;
#pragma unroll
      for (int j = 0; j < QN; ++j) {
        const int r = qr0 + j * QRSTEP;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (qcol) {
          const unsigned char* row = raw + r * QP;
          if constexpr (QK == kKvFp8) {
            const uint2 w = *reinterpret_cast<const uint2*>(row + qc * 8);
            val = raw_fp8x8(w.x, w.y);
          } else {
            val = raw_int4x8(reinterpret_cast<const uint32_t*>(row)[1 + qc]);  // one scale/shift word first
          }
        }
        *reinterpret_cast<uint4*>(out + swz<D>(r, qc * 8)) = val;
      }
    }
  };
  // Folded caches: the scale and shift of row r (of K: kv 0, of V: 1) in ring stage st.
  auto row_scale = [&](int st, int kv, int r, float& scale, float& shift) {
    const unsigned char* src = qring + st * QSB;
    if constexpr (QK == kKvFp8) {
      scale_word(reinterpret_cast<const uint32_t*>(src + 2 * BN * QP)[kv * BN + r], scale, shift);
    } else {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(src + kv * BN * QP + r * QP);
      scale = half_bits(w & 0xFFFFu);
      shift = half_bits(w >> 16);
    }
  };

  // Register fragments (kRegs): one warp tile's K and V bytes and scale words, as this lane's
  // fragments take them (the header comment), copied by the lane into its own slots of ring stage st
  // (chunk c of lane l at (32 c + l) x its size: conflict-free reads back) and the tile's scale words
  // (K's keys, then V's) by the warp. Keys past the sequence and paged keys whose page is missing
  // read as zeros (zero-fill), as the other rings leave them.
  constexpr int RKW = kRegs ? D / 16 : 1, RVW = kRegs ? D / 32 : 1, RNB = kRegs ? NB : 1, RKK = kRegs ? BN / 16 : 1;
  constexpr int RKB = 32 * (BN / 8) * (D / 4), RVB = 32 * (BN / 4) * (D / 8), RSB = regs_stage_bytes<D, BN>();
  unsigned char* rring = reinterpret_cast<unsigned char*>(ring) + warp * STAGES * RSB;
  auto key_row = [&](int key, bool& ok) -> int64_t {
    const int x = sb.k0 + min(key, sb.lk - 1);  // < 2^31 (the glue's bound)
    ok = key < sb.lk;
    if (!paged) return x;
    const int64_t page = bt_row[x / p.page_size];
    const int64_t row = page * p.page_size + x % p.page_size;
    ok = ok && page >= 0 && row < p.kv_rows;
    return ok ? row : 0;
  };
  // Dense full tiles (the common case): lane-constant pointers to the tile's first key, advanced by
  // the tile's key offset; no per-row bounds or page lookups (these dominated the instruction count).
  const int32_t* rk_lane = kq + kq_head + (int64_t(sb.k0) + g) * p.k_sm + t4 * RKW;      // key 8 nb + g
  const int32_t* rv_lane = vq + vq_head + (int64_t(sb.k0) + 2 * t4) * p.v_sm + g * RVW;  // key 16 kk + 2t
  const int64_t rk8 = 8 * p.k_sm, rv1 = p.v_sm, rv8 = 8 * p.v_sm, rv16 = 16 * p.v_sm;
  constexpr int RSW = kRegs ? (2 * BN + 31) / 32 : 1;  // scale words a lane copies
  const int32_t* rs_lane[RSW];
  int64_t rs_step[RSW];
#pragma unroll
  for (int j = 0; j < RSW; ++j) {
    const int i = j * 32 + lane, key = i % BN;
    const bool kv = i >= BN;
    rs_step[j] = QK == kKvFp8 ? (kv ? p.vs_sm : p.ks_sm) : 0;
    rs_lane[j] = QK != kKvFp8 ? kq
                 : kv ? static_cast<const int32_t*>(p.v_ss) + vs_head + (int64_t(sb.k0) + key) * p.vs_sm
                      : static_cast<const int32_t*>(p.k_ss) + ks_head + (int64_t(sb.k0) + key) * p.ks_sm;
  }
  auto rissue = [&](int it, int st) {
    const int n = tile_key(it);
    const uint32_t base = smem_u32(rring + st * RSB);
    if (!paged && n + BN <= sb.lk) {
      const int32_t* kp = rk_lane + int64_t(n) * p.k_sm;
#pragma unroll
      for (int nb = 0; nb < RNB; ++nb)
#pragma unroll
        for (int u = 0; u < RKW / 4; ++u)
          cp_async_16_full(base + ((nb * (RKW / 4) + u) * 32 + lane) * 16, kp + nb * rk8 + 4 * u);
      const int32_t* vp = rv_lane + int64_t(n) * p.v_sm;
#pragma unroll
      for (int kk = 0; kk < RKK; ++kk)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int32_t* src = vp + kk * rv16 + ((c & 1) ? rv1 : 0) + ((c >> 1) ? rv8 : 0);
          const uint32_t dst = base + RKB + ((kk * 4 + c) * 32 + lane) * (RVW * 4);
          if constexpr (RVW == 4)
            cp_async_16_full(dst, src);
          else
            cp_async_8(dst, src, 8);
        }
#pragma unroll
      for (int j = 0; j < RSW; ++j)
        if (j * 32 + lane < 2 * BN) cp_async_4(base + RKB + RVB + (j * 32 + lane) * 4, rs_lane[j] + n * rs_step[j], 4);
      return;
    }
#pragma unroll
    for (int nb = 0; nb < RNB; ++nb) {
      bool ok;
      const int64_t row = key_row(n + nb * 8 + g, ok);
      const int32_t* src = kq + kq_head + row * p.k_sm + t4 * RKW;
#pragma unroll
      for (int u = 0; u < RKW / 4; ++u)
        cp_async_16(base + ((nb * (RKW / 4) + u) * 32 + lane) * 16, src + 4 * u, ok ? 16 : 0);
    }
#pragma unroll
    for (int kk = 0; kk < RKK; ++kk)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        bool ok;
        const int64_t row = key_row(n + kk * 16 + 2 * t4 + (c & 1) + 8 * (c >> 1), ok);
        const int32_t* src = vq + vq_head + row * p.v_sm + g * RVW;
        const uint32_t dst = base + RKB + ((kk * 4 + c) * 32 + lane) * (RVW * 4);
        if constexpr (RVW == 4)
          cp_async_16(dst, src, ok ? 16 : 0);
        else
          cp_async_8(dst, src, ok ? 8 : 0);
      }
    if constexpr (QK == kKvFp8) {
#pragma unroll
      for (int i0 = 0; i0 < 2 * BN; i0 += 32) {
        const int i = i0 + lane, kv = i / BN;
        bool ok;
        const int64_t row = key_row(n + i % BN, ok);
        const int32_t* src = kv == 0 ? static_cast<const int32_t*>(p.k_ss) + ks_head + row * p.ks_sm
                                     : static_cast<const int32_t*>(p.v_ss) + vs_head + row * p.vs_sm;
        cp_async_4(base + RKB + RVB + i * 4, src, ok ? 4 : 0);
      }
    }
  };
  // Ring stage st back into registers, read where used (after the wait and __syncwarp that make
  // the warp's scale words visible): K words of 8-key block nb, V words of key 16 kk + 2t + (c & 1) +
  // 8 (c >> 1), scale word i (K's keys, then V's).
  auto rk_words = [&](int st, int nb, uint32_t (&w)[RKW]) {
    const unsigned char* base = rring + st * RSB;
#pragma unroll
    for (int u = 0; u < RKW / 4; ++u) {
      const uint4 x = *reinterpret_cast<const uint4*>(base + ((nb * (RKW / 4) + u) * 32 + lane) * 16);
      w[4 * u] = x.x, w[4 * u + 1] = x.y, w[4 * u + 2] = x.z, w[4 * u + 3] = x.w;
    }
  };
  auto rv_words = [&](int st, int kk, int c, uint32_t (&w)[RVW]) {
    const unsigned char* src = rring + st * RSB + RKB + ((kk * 4 + c) * 32 + lane) * (RVW * 4);
    if constexpr (RVW == 4) {
      const uint4 x = *reinterpret_cast<const uint4*>(src);
      w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
    } else {
      static_assert(RVW == 2 || !kRegs, "V words a lane");
      const uint2 x = *reinterpret_cast<const uint2*>(src);
      w[0] = x.x, w[RVW - 1] = x.y;
    }
  };
  auto rs_word = [&](int st, int i) { return reinterpret_cast<const uint32_t*>(rring + st * RSB + RKB + RVB)[i]; };
  auto load_any = [&](int it, int st) {
    if constexpr (kRegs)
      rissue(it, st);
    else if constexpr (kQuant)
      qload(it, st);
    else
      load(it, st);
  };

  // ---- prologue: Q (every thread), then the first STAGES - 1 tiles of each warp
  const QRows qrows{int64_t(sb.bq) * p.q_sb + int64_t(sb.q0) * p.q_sm + int64_t(kvh) * p.q_sg, p.q_sm, p.q_sh, r0,
                    p.R, rows_used};
  constexpr int QT = kRows * (D / 8) < THREADS ? kRows * (D / 8) : THREADS;  // threads loading Q
  if (tid < QT) load_rows<T, D, kRows, QT>(sQ, q, qrows, kRows, p.K, tid);
  cp_async_commit();
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < my_tiles) load_any(st, st);
    cp_async_commit();  // possibly empty: keeps the group count uniform
  }
  cp_async_wait<STAGES - 2>();  // Q and this thread's part of tile 0 landed
  __syncthreads();              // ... every thread's Q chunks (the only CTA-wide barriers before the combine)
  const float scale_log2 = p.scale * kLog2e;
  __shared__ float sQmul[kFold ? kRows : 1], sQsum[kFold ? kRows : 1];
  float qmul[2] = {0.f, 0.f}, qsum[2] = {0.f, 0.f};
  if constexpr (kFold) {
    fold_q<T, D, kRows, THREADS, QK == kKvInt4>(sQ, sQmul, sQsum, scale_log2, tid);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) qmul[rr] = sQmul[g + 8 * rr], qsum[rr] = sQsum[g + 8 * rr];
  }
  const TM* sQm = reinterpret_cast<const TM*>(sQ);

  // Rows g and g + 8 of the chunk held by this thread: their query index.
  int qi[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) qi[rr] = (r0 + g + rr * 8) / p.R;
  const int k_steps = (p.K + 15) / 16;
  const int v_steps = (p.Kv + 15) / 16;

  // Q's A fragments stay in registers up to d128 (32 registers: 8 fewer ldmatrix a key tile)
  // unless three CTAs must share an SM's registers.
  constexpr bool kQRegs = kRegs || (D <= 128 && C::kCtasPerSm < 3);
  uint32_t qa[kQRegs ? D / 16 : 1][4];
  if constexpr (kRegs) {  // step kk's columns 2t, 2t + 1 / 2t + 8, 2t + 9 are Q's t D / 4 + 4 kk + 0, 1 / 2, 3
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int col = t4 * (D / 4) + 4 * kk;
      auto pair = [&](int r, int c) { return *reinterpret_cast<const uint32_t*>(sQm + swz<D>(r, c)); };
      qa[kk][0] = pair(g, col), qa[kk][1] = pair(g + 8, col);
      qa[kk][2] = pair(g, col + 2), qa[kk][3] = pair(g + 8, col + 2);
    }
  } else if constexpr (kQRegs) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) load_a_frag<D>(qa[kk], sQm, 0, kk, lane);
  }

  float o[OB][4];
#pragma unroll
  for (int i = 0; i < OB; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_i[2] = {-INFINITY, -INFINITY};
  float l_i[2] = {0.f, 0.f};
  // Folded caches: O is kept in units of 2^(ev - 15), ev the largest V scale's power of two seen so
  // far (at least 2^-110): P * scale / 2^(ev - 15) < 2^15 stays an fp16 normal down to P ~ 2^-29,
  // where relative to 2^ev it would lose bits below 2^-14 (large V rows with small weights).
  // osh is the row's sum of P * V shift.
  int ev = -110;
  float ev_inv = ldexpf(1.f, 15 + 110);
  float osh[2] = {0.f, 0.f};

  for (int it = 0; it < my_tiles; ++it) {
    cp_async_wait<STAGES - 2>();  // this lane's part of tile it landed
    __syncwarp();                 // ... every lane's; and every lane is done with stage (it - 1) % STAGES
    if (it + STAGES - 1 < my_tiles) load_any(it + STAGES - 1, (it + STAGES - 1) % STAGES);
    cp_async_commit();
    const TM* sKc = deq;  // quantized caches: the warp's dequantized tile (kRegs: none, read where used)
    if constexpr (kRegs) {
      (void)sKc;
    } else if constexpr (kFold) {
      dequant_fold(it % STAGES);
      __syncwarp();  // the tile is whole before any lane's ldmatrix
    } else if constexpr (kQuant) {
      dequant(it % STAGES);
      __syncwarp();
    } else {
      sKc = reinterpret_cast<const TM*>(wring + (it % STAGES) * 2 * BN * D);
    }
    const TM* sVc = sKc + BN * D;
    // Folded caches: the scale and shift of K and V for this lane's keys nb * 8 + 2 t4 + c.
    float ksc[kFold ? NB : 1][2], ksh[kFold ? NB : 1][2], vsc[kFold ? NB : 1][2], vsh[kFold ? NB : 1][2];
    if constexpr (kRegs) {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          scale_word(rs_word(it % STAGES, nb * 8 + 2 * t4 + c), ksc[nb][c], ksh[nb][c]);
          scale_word(rs_word(it % STAGES, BN + nb * 8 + 2 * t4 + c), vsc[nb][c], vsh[nb][c]);
        }
    } else if constexpr (kFold) {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          row_scale(it % STAGES, 0, nb * 8 + 2 * t4 + c, ksc[nb][c], ksh[nb][c]);
          row_scale(it % STAGES, 1, nb * 8 + 2 * t4 + c, vsc[nb][c], vsh[nb][c]);
        }
    }
    const int n0 = tile_key(it);

    // ---- S = Q K^T, 16 rows x BN keys
    float sc[NB][4];
#pragma unroll
    for (int i = 0; i < NB; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
    if constexpr (kRegs) {  // K == D
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        uint32_t kw[RKW];
        rk_words(it % STAGES, nb, kw);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          Traits<__half>::mma(sc[nb], qa[kk], fp8x2_half2(kw[kk]), fp8x2_half2(kw[kk] >> 16));
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        if (kk >= k_steps) continue;
        if constexpr (kQRegs)
          mma_frag_rows<TM, D, NB>(sc, qa[kk], sKc, kk, lane);
        else
          mma_rows_rows<TM, D, NB>(sc, sQm, 0, sKc, kk, lane);
      }
    }

    // ---- scale and mask (log2 domain)
    // Rows past rows_used are never written and their zero Q rows keep their scores finite, so they
    // need no mask: at GQA 4 with one query (4 of 16 rows) every tile would otherwise be masked.
    const bool need_mask = n0 + BN > sb.lk || !band.inside(i_first, i_last, n0, n0 + BN - 1);
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = e >> 1;
        if constexpr (kFold)
          sc[nb][e] = sc[nb][e] * (ksc[nb][e & 1] * qmul[rr]) + ksh[nb][e & 1] * qsum[rr];  // K's scale and shift
        else
          sc[nb][e] *= scale_log2;
      }
    }
    if (need_mask) {  // one branch a tile: most tiles need no mask
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = e >> 1, j = n0 + nb * 8 + 2 * t4 + (e & 1);
          if (j >= sb.lk || !band.allowed(qi[rr], j)) sc[nb][e] = -INFINITY;
        }
    }

    // ---- online softmax; rows g (rr = 0) and g + 8 (rr = 1)
    float alpha_r[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) mx = fmaxf(mx, fmaxf(sc[nb][2 * rr], sc[nb][2 * rr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_i[rr], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: keep exp2 finite
      const float alpha = exp2f(m_i[rr] - m_use);
      m_i[rr] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        sc[nb][2 * rr] = exp2f(sc[nb][2 * rr] - m_use);
        sc[nb][2 * rr + 1] = exp2f(sc[nb][2 * rr + 1] - m_use);
        sum += sc[nb][2 * rr] + sc[nb][2 * rr + 1];
      }
      l_i[rr] = l_i[rr] * alpha + sum;
      alpha_r[rr] = alpha;
      if constexpr (kFold) {
        float sh = 0.f;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) sh += sc[nb][2 * rr] * vsh[nb][0] + sc[nb][2 * rr + 1] * vsh[nb][1];
        osh[rr] = osh[rr] * alpha + sh;
      }
    }
    if constexpr (kFold) {
      // V's scale on P, relative to 2^ev; a tile with a larger scale raises ev and rescales O.
      float vmax = 0.f;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) vmax = fmaxf(vmax, fmaxf(fabsf(vsc[nb][0]), fabsf(vsc[nb][1])));
      vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
      vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 2));  // the tile's keys are the t4 lanes'
      int ex = 0;
      frexpf(vmax, &ex);  // vmax < 2^ex; uniform over the warp
      if (ex > ev) {
        const float f = ldexpf(1.f, ev - ex);
        alpha_r[0] *= f, alpha_r[1] *= f;
        ev = ex;
        ev_inv = ldexpf(1.f, 15 - ev);
      }
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[nb][e] *= vsc[nb][e & 1] * ev_inv;
    }
    // Rescale O only when some row's running max moved (rare once it settles): 2 x OB x 2
    // multiplies a tile otherwise.
    if (__any_sync(0xffffffffu, alpha_r[0] != 1.f || alpha_r[1] != 1.f)) {
#pragma unroll
      for (int ob = 0; ob < OB; ++ob) {
        o[ob][0] *= alpha_r[0];
        o[ob][1] *= alpha_r[0];
        o[ob][2] *= alpha_r[1];
        o[ob][3] *= alpha_r[1];
      }
    }

    // ---- O += P V
    if constexpr (kRegs) {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        acc_to_a<TM>(sc, kk, a);
        uint32_t vw[4][RVW];
#pragma unroll
        for (int c = 0; c < 4; ++c) rv_words(it % STAGES, kk, c, vw[c]);
#pragma unroll
        for (int w = 0; w < RVW; ++w) {
          // byte b of word w is block 4 w + b: keys (2t, 2t + 1) and (2t + 8, 2t + 9) interleaved
          const uint32_t lo0 = __byte_perm(vw[0][w], vw[1][w], 0x5140u);
          const uint32_t hi0 = __byte_perm(vw[0][w], vw[1][w], 0x7362u);
          const uint32_t lo1 = __byte_perm(vw[2][w], vw[3][w], 0x5140u);
          const uint32_t hi1 = __byte_perm(vw[2][w], vw[3][w], 0x7362u);
          Traits<__half>::mma(o[4 * w], a, fp8x2_half2(lo0), fp8x2_half2(lo1));
          Traits<__half>::mma(o[4 * w + 1], a, fp8x2_half2(lo0 >> 16), fp8x2_half2(lo1 >> 16));
          Traits<__half>::mma(o[4 * w + 2], a, fp8x2_half2(hi0), fp8x2_half2(hi1));
          Traits<__half>::mma(o[4 * w + 3], a, fp8x2_half2(hi0 >> 16), fp8x2_half2(hi1 >> 16));
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        acc_to_a<TM>(sc, kk, a);
        const int key = trans_row(kk, lane);
#pragma unroll
        for (int ob2 = 0; ob2 < OB / 2; ++ob2) {
          if (ob2 < v_steps) mma_a_trans<TM, D>(o[2 * ob2], o[2 * ob2 + 1], a, sVc, key, ob2 * 16, lane);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the ring: it becomes the combine buffer

  // ---- combine the warps: (m, l, unnormalized O) of each warp through shared memory
  float* sO = reinterpret_cast<float*>(ring);  // [NW][kRows][D]
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = l_i[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = g + rr * 8;
    if (t4 == 0) sM[warp][row] = m_i[rr], sL[warp][row] = l;
    float* orow = sO + (warp * kRows + row) * D;
    if constexpr (kFold) {  // O back in units of 1 plus the shift's sum; INT4 columns back in order
      float sh = osh[rr];
      sh += __shfl_xor_sync(0xffffffffu, sh, 1);
      sh += __shfl_xor_sync(0xffffffffu, sh, 2);
#pragma unroll
      for (int ob = 0; ob < OB; ++ob)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int c = kRegs ? (2 * t4 + x) * (D / 8) + ob : ob * 8 + 2 * t4 + x;
          orow[QK == kKvInt4 ? int4_fold_col(c) : c] = ldexpf(o[ob][2 * rr + x], ev - 15) + sh;
        }
    } else {
#pragma unroll
      for (int ob = 0; ob < OB; ++ob) {
        orow[ob * 8 + 2 * t4] = o[ob][2 * rr];
        orow[ob * 8 + 2 * t4 + 1] = o[ob][2 * rr + 1];
      }
    }
  }
  __syncthreads();

  const int64_t rows_total = int64_t(p.B) * p.Mq * p.Hkv * p.R;  // rows of one split's O
  for (int idx = tid; idx < kRows * D; idx += THREADS) {
    const int row = idx / D, col = idx % D;
    if (row >= rows_used || col >= p.Kv) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; ++w) mx = fmaxf(mx, sM[w][row]);
    float den = 0.f, acc = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < NW; ++w) {
        const float f = exp2f(sM[w][row] - mx);  // 0 for a warp that saw no allowed key
        den += sL[w][row] * f;
        acc += sO[(w * kRows + row) * D + col] * f;
      }
    }
    const int x = r0 + row, i = x / p.R, h = x % p.R;
    const int64_t head_row = ((int64_t(sb.bq) * p.Mq + sb.q0 + i) * p.Hkv + kvh) * p.R + h;  // of [B, Mq, Hkv, R]
    const float val = den > 0.f ? acc / den : 0.f;
    const int64_t oi = (int64_t(split) * rows_total + head_row) * p.Kv + col;
    if (p.o_kind == 2)
      static_cast<__nv_bfloat16*>(p.o_out)[oi] = __float2bfloat16_rn(val);
    else if (p.o_kind == 1)
      static_cast<__half*>(p.o_out)[oi] = __float2half_rn(val);
    else
      p.o_part[oi] = val;
    if (col == 0) {
      const int64_t l_row = ((int64_t(sb.bq) * p.Hkv + kvh) * p.R + h) * p.Mq + sb.q0 + i;  // of [B, Hkv, R, Mq]
      p.lse_part[int64_t(split) * rows_total + l_row] = den > 0.f ? (mx + log2f(den)) * kLn2 : -INFINITY;
    }
  }
  static_assert((1 + kMaxMergedSplits) * kRows * sizeof(float) <= smem_bytes<D, V, QK, kRegs>(sizeof(T)) - kRows * D * sizeof(T),
                "the merge's scratch reuses the ring");
  if (p.merge_ctr != nullptr && p.num_splits <= kMaxMergedSplits) {  // the ring is free again: the merge's scratch
    __shared__ int s_last;
    if (last_split(p, int64_t(blockIdx.z) * p.Hkv + kvh, &s_last))
      merge_chunk<kRows, THREADS>(p, reinterpret_cast<float*>(ring), sb.bq, sb.q0, kvh, r0, rows_used);
  }
}

template <typename T, int D, int V, int QK = kKvPlain, bool kFold = false, bool kRegs = false>
cudaError_t launch(const FmhaDecodeParams& p, cudaStream_t stream) {
  if (p.num_seqs <= 0 || p.Hkv <= 0 || p.R <= 0 || p.max_seqlen_q <= 0 || p.num_splits <= 0) return cudaSuccess;
  const int64_t n_chunks = (int64_t(p.R) * p.max_seqlen_q + kRows - 1) / kRows;
  const int64_t z = n_chunks * p.num_seqs;
  if (z > 65535 || p.Hkv > 65535 || int64_t(p.R) * p.max_seqlen_q > (int64_t(1) << 30)) return cudaErrorInvalidValue;
  const size_t smem = smem_bytes<D, V, QK, kRegs>(sizeof(T));
  auto kern = fmha_decode_kernel<T, D, V, QK, kFold, kRegs>;
  static mslk::cuda::SmemLimitOnce smem_limit;  // the cap raised once per device
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = smem_limit.ensure(kern, dev, smem);
  if (err != cudaSuccess) return err;
  kern<<<dim3(unsigned(p.num_splits), unsigned(p.Hkv), unsigned(z)), DecodeCfg<D, V>::kWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_dtype(const FmhaDecodeParams& p, cudaStream_t stream) {
  if (p.tile_cfg == 3) return p.is_bf16 ? launch<__nv_bfloat16, D, 3>(p, stream) : launch<__half, D, 3>(p, stream);
  if (p.tile_cfg == 2) return p.is_bf16 ? launch<__nv_bfloat16, D, 2>(p, stream) : launch<__half, D, 2>(p, stream);
  if (p.tile_cfg == 1) return p.is_bf16 ? launch<__nv_bfloat16, D, 1>(p, stream) : launch<__half, D, 1>(p, stream);
  return p.is_bf16 ? launch<__nv_bfloat16, D, 0>(p, stream) : launch<__half, D, 0>(p, stream);
}

}  // namespace mslk::attention::decode_detail

namespace mslk::attention::decode_detail {

// Quantized caches: the one tile row of head dim D (the caller's tile_cfg must name it).
template <int D>
cudaError_t launch_quant(const FmhaDecodeParams& p, cudaStream_t stream) {
  constexpr int V = kQuantRow<D>;
  if (p.tile_cfg != V) return cudaErrorInvalidValue;
  if (p.kv_quant == kKvFp8)
    return p.is_bf16 ? launch<__nv_bfloat16, D, V, kKvFp8>(p, stream) : launch<__half, D, V, kKvFp8>(p, stream);
  if (p.kv_quant == kKvInt4)
    return p.is_bf16 ? launch<__nv_bfloat16, D, V, kKvInt4>(p, stream) : launch<__half, D, V, kKvInt4>(p, stream);
  return cudaErrorInvalidValue;
}

// Folded quantized caches (FP8, INT4 with one group): the same tile row, or up to d128 row 3 (three
// CTAs an SM with a two-stage ring; MSLK_DECODE_TILE_CFG=3).
template <int D, int V>
cudaError_t launch_fold_row(const FmhaDecodeParams& p, cudaStream_t stream) {
  if (p.kv_quant == kKvFp8)
    return p.is_bf16 ? launch<__nv_bfloat16, D, V, kKvFp8, true>(p, stream)
                     : launch<__half, D, V, kKvFp8, true>(p, stream);
  if (p.kv_quant == kKvInt4)
    return p.is_bf16 ? launch<__nv_bfloat16, D, V, kKvInt4, true>(p, stream)
                     : launch<__half, D, V, kKvInt4, true>(p, stream);
  return cudaErrorInvalidValue;
}
template <int D>
cudaError_t launch_fold(const FmhaDecodeParams& p, cudaStream_t stream) {
  if (p.kv_quant == kKvInt4 && p.kv_groups != 1) return cudaErrorInvalidValue;
  if (p.tile_cfg == kQuantRow<D>) return launch_fold_row<D, kQuantRow<D>>(p, stream);
  if constexpr (D <= 128) {
    if (p.tile_cfg == 3) return launch_fold_row<D, 3>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// Folded FP8 through register fragments (kRegs): tile row 2, head dims 64 and 128.
template <int D>
cudaError_t launch_regs(const FmhaDecodeParams& p, cudaStream_t stream) {
  static_assert(kRegsHeadDim<D>, "register fragments: d64 / d128");
  if (p.kv_quant != kKvFp8 || p.tile_cfg != 2 || p.K != D || p.Kv != D || !p.kv_vec16) return cudaErrorInvalidValue;
  return p.is_bf16 ? launch<__nv_bfloat16, D, 2, kKvFp8, true, true>(p, stream)
                   : launch<__half, D, 2, kKvFp8, true, true>(p, stream);
}

}  // namespace mslk::attention::decode_detail
