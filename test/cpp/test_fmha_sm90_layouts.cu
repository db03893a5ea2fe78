// Host-side check of the layout assumptions of csrc/attention/kernels/fmha_fwd_sm90_kernel.cuh
// (runs on any machine, no GPU): CuTe computes the layouts, this program compares them with what
// the TMA boxes write and what the kernel's index math assumes.
//   1. Q/K/V shared-memory layouts == the bytes a CU_TENSOR_MAP_SWIZZLE_128B box [rows][64]
//      writes at tile offset (col/64)*rows*64 (+ stage * BN * D).
//   2. S accumulator: each warpgroup owns 64 rows; the 4 lanes of a quad share a row and together
//      cover every column once; acc_rowcol pairs (c, c+1) are adjacent columns.
//   3. P: register offset i of the S accumulator is the A-operand value of the P V wgmma at the
//      same (row, key) -- the reinterpretation `tOrP(i) = tSrS(i)` is exact.
//   4. The Q operand of each thread's wgmma lies in its own warpgroup's 64 rows.
//   5. The shared-memory operands partition alike for every thread of a warpgroup.
//   6. The stream-K walk (check_stream_k).
//   7. The backward's dQ part (fmha_bwd_sm90_kernel.cuh): the accumulator coordinates of each
//      thread's values are the ones fmha_bwd_dq_tiles.h's register order (and the conversion of the
//      tile-contiguous sums) assumes; the sequences' tiles of those sums are disjoint and in bounds.
//   9. The d64 / d128 backward's Q, K and dS views, TMA boxes and stmatrix addresses, 64- and 128-row
//      query tiles (check_bwd_views).
//   8. The d256 backward (fmha_bwd_sm90_d256_kernel.cuh): the K-major and MN-major views of Q / dO,
//      K, and P / dS are the same bytes; the TMA boxes write Q / K where the K-major views read them;
//      its dQ accumulator's register order is the one its reductions assume.
// A ctest (mslk_test_fmha_sm90_layouts, host-only: runs without a GPU). By hand, from the repo root:
//   nvcc -std=c++17 --expt-relaxed-constexpr -DMSLK_HAS_CUTLASS=1 -Icsrc -I$CUTLASS/include \
//     -gencode=arch=compute_90a,code=sm_90a -x cu test/cpp/test_fmha_sm90_layouts.cu \
//     -o /tmp/check_sm90 && /tmp/check_sm90
#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "attention/kernels/fmha_bwd_dq_tiles.h"
#include "attention/kernels/fmha_bwd_sm90_d256_kernel.cuh"
#include "attention/kernels/fmha_fwd_sm90_kernel.cuh"

using namespace cute;
using namespace mslk::attention::sm90;

static int g_fail = 0;
#define EXPECT(cond, ...)                               \
  do {                                                  \
    if (!(cond)) {                                      \
      if (g_fail < 20) {                                \
        std::printf("FAIL %s:%d ", __FILE__, __LINE__); \
        std::printf(__VA_ARGS__);                       \
        std::printf("\n");                              \
      }                                                 \
      ++g_fail;                                         \
    }                                                   \
  } while (0)

// Element offset written by a SWIZZLE_128B TMA box of [rows][64] (2-byte elements) for (row, col)
// of a tile whose 64-column blocks are boxes placed rows*64 elements apart.
static int tma_offset(int row, int col, int rows) {
  const int cb = col / 64, c = col % 64;
  return cb * rows * 64 + row * 64 + (((c / 8) ^ (row % 8)) * 8) + c % 8;
}

// Element offset of a CuTe swizzled smem layout: the swizzle acts on byte addresses (the pointer
// flag says so), so apply it to 2 * the unswizzled element offset.
template <class L, class... C>
int smem_offset(const L& l, C... c) {
  return int(l.layout_a()(2 * int(l.layout_b()(c...)))) / 2;
}

template <typename Element, int C>
void check() {
  constexpr int D = kTileCfgs[C].d;
  using Tr = Traits<Element, D, C>;
  constexpr int BN = Tr::kBN, S = Tr::kStages, kBM = Tr::kBM;
  std::printf("D=%d %s BN=%d stages=%d smem=%zu bytes\n", D,
              sizeof(Element) == 2 && std::is_same_v<Element, cutlass::bfloat16_t> ? "bf16" : "fp16", BN, S,
              sizeof(SharedStorage<Element, D, C>) + 1024);
  EXPECT(sizeof(SharedStorage<Element, D, C>) + 1024 <= 232448, "smem over 227 KiB");

  // 1. shared-memory layouts vs TMA boxes
  typename Tr::SmemLayoutQ lq;
  typename Tr::SmemLayoutK lk;
  typename Tr::SmemLayoutVt lv;
  EXPECT(int(cosize(lq.layout_b())) == kBM * D, "Q cosize");
  EXPECT(int(cosize(lk.layout_b())) == BN * D * S, "K cosize");
  EXPECT(int(cosize(lv.layout_b())) == BN * D * S, "V cosize");
  for (int r = 0; r < kBM; ++r)
    for (int c = 0; c < D; ++c)
      EXPECT(smem_offset(lq, r, c) == tma_offset(r, c, kBM), "Q (%d,%d): %d", r, c, smem_offset(lq, r, c));
  for (int st = 0; st < S; ++st)
    for (int r = 0; r < BN; ++r)
      for (int c = 0; c < D; ++c) {
        const int want = st * BN * D + tma_offset(r, c, BN);
        EXPECT(smem_offset(lk, r, c, st) == want, "K (%d,%d,%d): %d want %d", r, c, st, smem_offset(lk, r, c, st),
               want);
        EXPECT(smem_offset(lv, c, r, st) == want, "Vt (%d,%d,%d): %d want %d", c, r, st, smem_offset(lv, c, r, st),
               want);
      }

  // 2-4. fragments, per consumer thread
  typename Tr::MmaQK mma_qk;
  typename Tr::MmaPV mma_pv;
  auto cS = make_identity_tensor(Shape<Int<kBM>, Int<BN>>{});
  auto cO = make_identity_tensor(Shape<Int<kBM>, Int<D>>{});
  auto cQ = make_identity_tensor(Shape<Int<kBM>, Int<D>>{});
  auto cK = make_identity_tensor(Shape<Int<BN>, Int<D>>{});
  auto cVt = make_identity_tensor(Shape<Int<D>, Int<BN>>{});
  auto fragS = partition_fragment_C(mma_qk, Shape<Int<kBM>, Int<BN>>{});
  auto fragO = partition_fragment_C(mma_pv, Shape<Int<kBM>, Int<D>>{});
  auto layS = fragS.layout();
  typename Tr::LayoutP layP;
  EXPECT(size(layS) == BN / 2, "S fragment size %d", int(size(layS)));
  EXPECT(size(fragO) == D / 2, "O fragment size %d", int(size(fragO)));
  std::set<std::pair<int, int>> covered;
  for (int t = 0; t < 128 * Tr::kWGs; ++t) {
    auto thr_qk = mma_qk.get_thread_slice(t);
    auto thr_pv = mma_pv.get_thread_slice(t);
    auto tScS = thr_qk.partition_C(cS);
    auto tOcO = thr_pv.partition_C(cO);
    auto tAcQ = thr_qk.partition_A(cQ);
    auto tAcP = thr_pv.partition_A(cS);
    const int wg = t / 128, warp = (t % 128) / 32, lane = t % 32;
    auto S_rc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    auto O_rc = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
    for (int r = 0; r < 2; ++r) {
      const int want_row = 64 * wg + 16 * warp + lane / 4 + 8 * r;
      for (int c = 0; c < size<1>(S_rc); ++c) {
        const int row = get<0>(S_rc(r, c)), col = get<1>(S_rc(r, c));
        EXPECT(row == want_row, "S row t=%d r=%d c=%d: %d want %d", t, r, c, row, want_row);
        EXPECT(col % 8 / 2 == lane % 4, "S col t=%d: %d not in lane's quad slot", t, col);
        EXPECT(covered.insert({row, col}).second, "S (%d,%d) owned twice", row, col);
        if (c % 2 == 0) EXPECT(get<1>(S_rc(r, c + 1)) == col + 1, "S pair t=%d c=%d", t, c);
      }
      // bias_into_scores takes (c, c + 1) as the pair of 8-key block c / 2
      for (int c = 0; c < size<1>(S_rc); ++c)
        EXPECT(get<1>(S_rc(r, c)) == 8 * (c / 2) + 2 * (lane % 4) + c % 2, "S col t=%d c=%d: %d", t, c,
               int(get<1>(S_rc(r, c))));
      for (int c = 0; c < size<1>(O_rc); ++c) {
        EXPECT(get<0>(O_rc(r, c)) == want_row, "O row t=%d", t);
        if (c % 2 == 0) EXPECT(get<1>(O_rc(r, c + 1)) == get<1>(O_rc(r, c)) + 1, "O pair t=%d c=%d", t, c);
      }
      EXPECT(get<1>(O_rc(r, 0)) == 2 * (lane % 4), "O col 0 of t=%d", t);
      // The epilogue's quad transpose (o_vec) takes (c, c + 1) as the pair of 8-column block c / 2
      for (int c = 0; c < size<1>(O_rc); ++c)
        EXPECT(get<1>(O_rc(r, c)) == 8 * (c / 2) + 2 * (lane % 4) + c % 2, "O col t=%d c=%d: %d", t, c,
               int(get<1>(O_rc(r, c))));
    }
    // The O buffer (kOSmem): stmatrix_x4 step j writes register i of lane l -- the pair
    // (O_rc(i & 1, 2 b), O_rc(i & 1, 2 b + 1)), b = j + i / 2 -- to row l / 4 of matrix i, whose
    // address lane 8 i + l / 4 gives; its two elements land in columns 2 (l % 4), + 1 of that
    // 16-byte chunk. Each must be where the TMA store box reads its (row, col).
    for (int j = 0; j < size<1>(O_rc) / 2; j += 2)
      for (int i = 0; i < 4; ++i)
        for (int e = 0; e < 2; ++e) {
          const int b = j + i / 2, c = 2 * b + e;
          const int src = 8 * i + lane / 4;  // the lane whose address serves this row of matrix i
          const int src_row0 = 64 * wg + 16 * warp + src / 4;
          const int off = o_chunk_offset(j + src / 16, o_stmatrix_row(src_row0, src), kBM) / 2 + 2 * (lane % 4) + e;
          EXPECT(off == tma_offset(get<0>(O_rc(i & 1, c)), get<1>(O_rc(i & 1, c)), kBM),
                 "O stmatrix t=%d j=%d i=%d e=%d: offset %d", t, j, i, e, off);
        }
    // The bias tile (bias rows, bias_into_scores): ldmatrix_x4 step q gives register i of lane l
    // the pair at row l / 4 of matrix i, whose address lane 8 i + l / 4 gives (its 8-key block and
    // tile row); the pair must be where the TMA box put S_rc(i % 2, 4 q + 2 (i / 2)) and the next key.
    if constexpr (Tr::kBias) {
      for (int q = 0; q < BN / 16; ++q)
        for (int i = 0; i < 4; ++i)
          for (int e = 0; e < 2; ++e) {
            const int src = 8 * i + lane / 4, b = 2 * q + (src >> 4);
            const int row = 64 * wg + 16 * warp + (src & 7) + 8 * ((src >> 3) & 1);
            const int off = (b / 8) * kBM * 64 + row * 64 + (((b % 8) ^ (row & 7)) * 8) + 2 * (lane % 4) + e;
            const auto sc = S_rc(i % 2, 4 * q + 2 * (i / 2) + e);
            EXPECT(off == tma_offset(get<0>(sc), get<1>(sc), kBM), "bias ldmatrix t=%d q=%d i=%d e=%d: offset %d", t,
                   q, i, e, off);
          }
    }
    // 3. P: A-operand coordinate of register offset j == S coordinate of register offset j
    EXPECT(size(tAcP) == size(layP), "P fragment size");
    EXPECT(shape(tAcP) == shape(layP), "P fragment shape");
    for (int v = 0; v < 8; ++v)
      for (int kb = 0; kb < BN / 16; ++kb) {
        const int off = int(layP(v, 0, kb));
        int i_s = -1;
        for (int i = 0; i < int(size(layS)); ++i)
          if (int(layS(i)) == off) i_s = i;
        EXPECT(i_s >= 0, "no S value at offset %d", off);
        if (i_s < 0) continue;
        const auto a = tAcP(v, 0, kb);
        const auto sc = tScS(i_s);
        EXPECT(get<0>(a) == get<0>(sc) && get<1>(a) == get<1>(sc), "P t=%d v=%d kb=%d: A(%d,%d) vs S(%d,%d)", t, v, kb,
               int(get<0>(a)), int(get<1>(a)), int(get<0>(sc)), int(get<1>(sc)));
      }
    // 4. Q rows of this thread's wgmma
    for (int i = 0; i < int(size(tAcQ)); ++i) {
      const int row = get<0>(tAcQ(i));
      EXPECT(row >= 64 * wg && row < 64 * wg + 64, "Q row %d for t=%d", row, t);
    }
    // 5. The kernel partitions the shared-memory operands (Q, K, V) with its warpgroup's first
    //    thread, a warp-uniform index (so their descriptors live in uniform registers): every
    //    thread's own partition must be that one.
    auto wg_qk = mma_qk.get_thread_slice(128 * wg);
    auto wg_pv = mma_pv.get_thread_slice(128 * wg);
    auto same = [&](auto a, auto b, const char* what) {
      EXPECT(size(a) == size(b), "%s partition size t=%d", what, t);
      for (int i = 0; i < int(size(a)) && i < int(size(b)); ++i)
        EXPECT(get<0>(a(i)) == get<0>(b(i)) && get<1>(a(i)) == get<1>(b(i)), "%s partition t=%d i=%d", what, t, i);
    };
    same(tAcQ, wg_qk.partition_A(cQ), "Q");
    same(thr_qk.partition_B(cK), wg_qk.partition_B(cK), "K");
    same(thr_pv.partition_B(cVt), wg_pv.partition_B(cVt), "Vt");
  }
  EXPECT(int(covered.size()) == kBM * BN, "S coverage %d", int(covered.size()));
  if (D == 128 && std::is_same_v<Element, cutlass::bfloat16_t>) {
    std::printf("  SmemLayoutK  : ");
    print(lk);
    std::printf("\n  SmemLayoutVt : ");
    print(lv);
    std::printf("\n  S fragment   : ");
    print(layS);
    std::printf("\n  P A-fragment : ");
    print(layP);
    std::printf("\n");
  }
}

template <int... Cs>
void check_all(std::integer_sequence<int, Cs...>) {
  ((check<cutlass::half_t, Cs>(), check<cutlass::bfloat16_t, Cs>()), ...);
}

// 6. The stream-K walk of the persistent rows (stream_k_plan / stream_k_item, the C++ the kernel
//    runs; tools/attention/emulate_fmha_sm90.py mirrors it): every (work tile, key tile) once;
//    whole tiles first, tile t on CTA t % grid; a split tile's parts on consecutive CTAs, the first
//    keys the last item of the first CTA's tail (the merge), every later part the first item of
//    its CTA's tail (a partial, flagged "more" when the tile goes on in the next slot); the merge
//    that follows the flags from slot b + 1 consumes exactly the tile's partials; the tail's units
//    shared within one unit; with fewer tiles than SMs the grid is min(units, SMs).
void check_stream_k() {
  mslk::attention::FmhaFwdParams p{};
  p.mask_kind = mslk::attention::kMaskNone;
  p.window_left = p.window_right = -1;
  const int bn = 64;
  p.Mkv = 4096;
  const double g = kStreamKMinGain;
  const int mk = kStreamKMinKeyTiles;
  EXPECT(stream_k_plan(p, 160, 132, bn, g, mk, true).n_sk == 160, "160 tiles split");
  EXPECT(stream_k_plan(p, 2048, 132, bn, g, mk, true).n_sk == 0, "2048 tiles: 3%% waste, whole");
  EXPECT(stream_k_min_gain(64) == g && stream_k_min_gain(256) == g, "default waste threshold");
  EXPECT(stream_k_plan(p, 2048, 132, bn, stream_k_min_gain(128), mk, true).n_sk == 200,
         "2048 tiles: 3%% waste, split at d128");
  EXPECT(stream_k_plan(p, 2112, 132, bn, 0.0, 2, false).n_sk == 0, "2112 tiles: whole rounds");
  EXPECT(stream_k_plan(p, 160, 132, bn, -1.0, 2, true).n_sk == 0, "off");
  EXPECT(stream_k_plan(p, 32, 132, bn, g, mk, true).n_sk == 32 && stream_k_plan(p, 32, 132, bn, g, mk, true).grid == 132,
         "32 tiles over 132 CTAs");
  EXPECT(stream_k_plan(p, 130, 132, bn, g, mk, true).n_sk == 0 && stream_k_plan(p, 130, 132, bn, g, mk, true).grid == 130,
         "130 tiles: 2 idle SMs, whole");
  for (const int n : {2, 8, 16, 32, 64, 128}) EXPECT(stream_k_max_parts(n) * stream_k_max_parts(n) <= 2 * n || n == 2, "parts of %d", n);
  p.Mkv = 128 * bn;  // one tile of 128 key tiles: 16 parts by default, every SM when forced
  EXPECT(stream_k_plan(p, 1, 132, bn, g, mk, true).grid == 16 && stream_k_plan(p, 1, 132, bn, 0.0, 2, false).grid == 128,
         "parts of one long tile");
  p.Mkv = (mk - 1) * bn;
  EXPECT(stream_k_plan(p, 160, 132, bn, g, mk, true).n_sk == 0 && stream_k_plan(p, 160, 132, bn, 0.0, 2, false).n_sk == 160,
         "short key lanes: whole unless forced");
  p.Mkv = 4096;
  p.mask_kind = mslk::attention::kMaskCausalTopLeft;
  EXPECT(stream_k_plan(p, 160, 132, bn, 0.0, 2, false).n_sk == 0, "causal: whole tiles");
  p.mask_kind = mslk::attention::kMaskNone;
  const int cases[][3] = {{4, 3, 2},    {7, 3, 11},  {140, 132, 16}, {300, 132, 7}, {2048, 132, 32}, {133, 132, 2},
                          {4, 132, 16}, {2, 132, 40}, {1, 132, 200}, {5, 132, 3},   {100, 132, 2}};
  for (const auto& c : cases) {
    const int num_work = c[0], sms = c[1], n_kt = c[2];
    p.Mkv = n_kt * bn - 5;
    const StreamK sk = stream_k_plan(p, num_work, sms, bn, 0.0, 2, false);  // as MSLK_FMHA_SM90_STREAMK=1
    const int grid = sk.grid;
    const int64_t units = int64_t(num_work) * n_kt;
    EXPECT(grid == (num_work < sms ? int(units < sms ? units : sms) : sms), "grid %d %d %d", num_work, sms, n_kt);
    EXPECT(sk.n_sk > 0 && sk.n_dp % grid == 0 && sk.n_dp + sk.n_sk == num_work && sk.n_kt == n_kt,
           "plan %d %d %d", num_work, sms, n_kt);
    std::vector<int> owner(size_t(num_work) * n_kt, -1);
    std::vector<int> tail_units(grid, 0);
    std::vector<std::array<int, 2>> partial(grid + 1, {-1, 0});  // slot -> (tile, more)
    std::vector<std::array<int, 2>> merge;                       // (CTA, tile)
    for (int b = 0; b < grid; ++b) {
      int t = 0, lo = 0, hi = 0, whole = 0;
      std::vector<std::array<int, 3>> tail;
      for (int i = 0; stream_k_item(sk, b, grid, i, &t, &lo, &hi); ++i) {
        if (hi == INT_MAX) {
          EXPECT(lo == 0 && t == b + whole * grid && int(tail.size()) == 0 && t < sk.n_dp, "whole item b=%d i=%d", b, i);
          ++whole;
          for (int k = 0; k < n_kt; ++k) {
            EXPECT(owner[size_t(t) * n_kt + k] < 0, "unit twice");
            owner[size_t(t) * n_kt + k] = b;
          }
        } else {
          tail.push_back({t, lo, hi});
          EXPECT(t >= sk.n_dp && 0 <= lo && lo < hi && hi <= n_kt, "part b=%d t=%d", b, t);
          for (int k = lo; k < hi; ++k) {
            EXPECT(owner[size_t(t) * n_kt + k] < 0, "unit twice");
            owner[size_t(t) * n_kt + k] = b;
          }
          tail_units[b] += hi - lo;
        }
      }
      EXPECT(whole == sk.n_dp / grid && !tail.empty(), "whole tiles and a tail on CTA %d", b);
      for (size_t j = 0; j < tail.size(); ++j) {
        const auto& [tt, l, h] = tail[j];
        if (l > 0) {
          EXPECT(j == 0, "a partial is the tail's first item (b=%d)", b);
          partial[b] = {tt, h < n_kt ? 1 : 0};
        }
        if (l == 0 && h < n_kt) {
          EXPECT(j + 1 == tail.size(), "a merge is the tail's last item (b=%d)", b);
          merge.push_back({b, tt});
        }
        if (l > 0 && h < n_kt) EXPECT(tail.size() == 1, "a part inside a tile is its CTA's whole tail (b=%d)", b);
      }
    }
    for (size_t u = 0; u < owner.size(); ++u) EXPECT(owner[u] >= 0, "unit %d not run (%d %d %d)", int(u), num_work, sms, n_kt);
    // The kernel's merge loop: slots b + 1, ... while the flag says more.
    std::vector<int> consumed(grid + 1, 0);
    for (const auto& [b, t] : merge) {
      int slot = b;
      for (int more = 1; more;) {
        ++slot;
        EXPECT(slot < grid && partial[slot][0] == t, "CTA %d merging tile %d finds slot %d", b, t, slot);
        if (slot >= grid || partial[slot][0] != t) break;
        more = partial[slot][1];
        ++consumed[slot];
      }
    }
    for (int s2 = 0; s2 < grid; ++s2)
      EXPECT(consumed[s2] == (partial[s2][0] >= 0 ? 1 : 0), "slot %d merged %d times (%d %d %d)", s2, consumed[s2],
             num_work, sms, n_kt);
    if (num_work >= sms) EXPECT(int(merge.size()) * 1 == int(std::count_if(partial.begin(), partial.end(), [](auto& x) { return x[0] >= 0; })),
                                "a round or more: one partial a merge");
    const auto mm = std::minmax_element(tail_units.begin(), tail_units.end());
    EXPECT(*mm.second - *mm.first <= 1, "tail units %d..%d", *mm.first, *mm.second);
  }
}

// 7. Value v of thread t (of 128) of a 64 x 64 dQ part: row 16 (t / 32) + (t % 32) / 4 + 8 ((v / 2) % 2),
// column 8 (v / 4) + 2 (t % 4) + v % 2 (fmha_bwd_dq_tiles.h).
template <typename Element, int D, int KW>
void check_bwd_dq_part() {
  using Tr = mslk::attention::sm90_bwd::Traits<Element, D>;
  using MmaDQ = typename Tr::template MmaDQ<mslk::attention::kDqPartCols, KW>;
  MmaDQ mma;
  for (int t = 0; t < 128; ++t) {
    auto thr = mma.get_thread_slice(t);
    Tensor c = thr.partition_C(make_identity_tensor(Shape<_64, Int<mslk::attention::kDqPartCols>>{}));
    EXPECT(size(c) == 32, "D%d: %d dQ values a thread", D, int(size(c)));
    for (int v = 0; v < int(size(c)); ++v) {
      const int r = 16 * (t / 32) + (t % 32) / 4 + 8 * ((v / 2) % 2), col = 8 * (v / 4) + 2 * (t % 4) + v % 2;
      EXPECT(get<0>(c(v)) == r && get<1>(c(v)) == col, "D%d KW%d thread %d value %d at (%d, %d), expected (%d, %d)", D,
             KW, t, v, int(get<0>(c(v))), int(get<1>(c(v))), r, col);
    }
  }
}

// 7. The tile-contiguous sums: per (tile, head) 64 * K floats; no two sequences share a tile, all in bounds.
void check_bwd_dq_tiles() {
  using mslk::attention::FmhaBwdParams;
  std::vector<std::vector<int>> layouts = {{0, 1, 130, 137, 650, 714}, {0, 64, 128, 192}, {5, 6, 70, 71, 200},
                                           {0, 63, 64, 65, 127, 129, 1000}, {0, 0, 0, 3}};
  for (const auto& st : layouts) {
    for (const int K : {64, 128}) {
      FmhaBwdParams p{};
      p.B = 1, p.H = 3, p.K = K, p.num_seqs = int(st.size()) - 1, p.Mq = st.back();
      p.seqstart_q = st.data();  // host pointer: only compared with null here
      std::set<int64_t> used;
      for (int s = 0; s < p.num_seqs; ++s)
        for (int m0 = 0; m0 < st[s + 1] - st[s]; m0 += 64)
          for (int h = 0; h < p.H; ++h) {
            const int64_t off = mslk::attention::dq_tile_offset(p, 0, st[s], s, m0, h);
            EXPECT(off % (64 * K) == 0 && off >= 0 && off + 64 * K <= mslk::attention::dq_tiles_floats(p),
                   "seq %d tile %d head %d: offset %lld of %lld floats", s, m0 / 64, h, (long long)off,
                   (long long)mslk::attention::dq_tiles_floats(p));
            EXPECT(used.insert(off).second, "seq %d tile %d head %d: offset %lld taken twice", s, m0 / 64, h,
                   (long long)off);
          }
    }
  }
  FmhaBwdParams p{};  // dense: B x ceil(Mq / 64) tiles
  p.B = 3, p.H = 2, p.K = 128, p.num_seqs = 3, p.Mq = 130;
  EXPECT(mslk::attention::dq_tiles_floats(p) == int64_t(3) * 3 * 2 * 64 * 128, "dense tile floats");
  EXPECT(mslk::attention::dq_tile_offset(p, 2, 0, 2, 128, 1) == ((int64_t(2) * 3 + 2) * 2 + 1) * 64 * 128,
         "dense tile offset");
  // dq_tiles_used: asked for, d64 / d128, atomic mode, at most twice the row layout's floats
  using mslk::attention::dq_tiles_used;
  p.sm90_dq_tiles = 1, p.Kv = p.K;
  EXPECT(dq_tiles_used(p), "B3 Mq130 d128: tiles (192 rows for 130)");
  p.Mq = 1;
  EXPECT(!dq_tiles_used(p), "Mq = 1: 64 rows for 1, rows instead");
  p.Mq = 4096, p.K = p.Kv = 256;
  EXPECT(!dq_tiles_used(p), "d256: its kernel adds dQ by atomics");
  p.K = p.Kv = 64, p.deterministic = 1;
  EXPECT(!dq_tiles_used(p), "deterministic: no sums");
  p.deterministic = 0, p.sm90_dq_tiles = 0;
  EXPECT(!dq_tiles_used(p), "not asked for");
  std::vector<int> many(1001);  // 1000 sequences of 16 rows
  for (int i = 0; i <= 1000; ++i) many[i] = 16 * i;
  p.sm90_dq_tiles = 1, p.B = 1, p.num_seqs = 1000, p.Mq = many.back(), p.seqstart_q = many.data();
  EXPECT(!dq_tiles_used(p), "1000 varlen sequences of 16 rows: rows instead");
}

// A backward kernel's Q / dO (per stage) and K views: K-major and MN-major address (row, col) /
// (col, row) alike, and the TMA boxes write them where the K-major views read.
template <class Tr>
void check_bwd_qk_views(const char* name) {
  constexpr int D = Tr::kD, BM = Tr::kBM, BN = Tr::kBN;
  const typename Tr::SmemLayoutQ q{};
  const typename Tr::SmemLayoutQt qt{};
  for (int st = 0; st < Tr::kStages; ++st)
    for (int r = 0; r < BM; ++r)
      for (int c = 0; c < D; ++c) {
        const int a = smem_offset(q, r, c, st), b = smem_offset(qt, c, r, st);
        EXPECT(a == b, "%s Q (%d, %d, %d): K-major %d, MN-major %d", name, r, c, st, a, b);
        EXPECT(a == st * BM * D + tma_offset(r, c, BM), "%s Q (%d, %d, %d): %d vs TMA", name, r, c, st, a);
      }
  const typename Tr::SmemLayoutK k{};
  const typename Tr::SmemLayoutKt kt{};
  for (int r = 0; r < BN; ++r)
    for (int c = 0; c < D; ++c) {
      EXPECT(smem_offset(k, r, c) == smem_offset(kt, c, r), "%s K (%d, %d) views differ", name, r, c);
      EXPECT(smem_offset(k, r, c) == tma_offset(r, c, BN), "%s K (%d, %d) vs TMA", name, r, c);
    }
}

// 8. Both views of each d256 buffer address (row, col) / (col, row) alike; TMA boxes land where the
// K-major views read.
template <typename Element>
void check_bwd_d256() {
  using Tr = mslk::attention::sm90_bwd::TraitsD256<Element>;
  constexpr int BM = Tr::kBM, BN = Tr::kBN;
  check_bwd_qk_views<Tr>("d256");
  const typename Tr::SmemLayoutP pl{};
  const typename Tr::SmemLayoutPt pt{};
  std::set<int> seen;
  for (int qr = 0; qr < BM; ++qr)
    for (int kc = 0; kc < BN; ++kc) {
      EXPECT(smem_offset(pl, qr, kc) == smem_offset(pt, kc, qr), "d256 P (%d, %d) views differ", qr, kc);
      // the kernel's pair stores: byte 128 q + 16 ((k / 8) ^ (q % 8)) + 2 (k % 8)
      EXPECT(2 * smem_offset(pl, qr, kc) == qr * 128 + (((kc / 8) ^ (qr % 8)) << 4) + 2 * (kc % 8),
             "d256 P (%d, %d): not the swizzle128 formula", qr, kc);
      seen.insert(smem_offset(pl, qr, kc));
    }
  EXPECT(int(seen.size()) == BM * BN && *seen.rbegin() == BM * BN - 1, "d256 P: not a bijection onto %d", BM * BN);
  // dQ part (64 x 128): value v of thread t at row 16 (t / 32) + (t % 32) / 4 + 8 ((v / 2) % 2), column
  // 8 (v / 4) + 2 (t % 4) + v % 2
  typename Tr::MmaDQ mma;
  for (int t = 0; t < 128; ++t) {
    Tensor c = mma.get_thread_slice(t).partition_C(make_identity_tensor(Shape<Int<BM>, Int<Tr::kColsWg>>{}));
    EXPECT(size(c) == Tr::kColsWg / 2, "d256: %d dQ values a thread", int(size(c)));
    for (int v = 0; v < int(size(c)); ++v) {
      const int r = 16 * (t / 32) + (t % 32) / 4 + 8 * ((v / 2) % 2), col = 8 * (v / 4) + 2 * (t % 4) + v % 2;
      EXPECT(get<0>(c(v)) == r && get<1>(c(v)) == col, "d256 dQ thread %d value %d", t, v);
    }
  }
}

// 9. The d64 / d128 backward's views (fmha_bwd_sm90_traits.cuh) for 64- and 128-row query tiles: Q / dO
// K-major and MN-major alike and where the TMA boxes write them; K alike; dS^T (keys x queries) and dS
// alike, at the bytes the consumers' stmatrix addresses; at BM 128, the second 64-row half's dQ values
// follow the first's in register order (the tile store and the row reductions assume it).
template <typename Element, int D, int BM>
void check_bwd_views() {
  using Tr = mslk::attention::sm90_bwd::Traits<Element, D, BM>;
  constexpr int BN = Tr::kBN;
  char name[32];
  std::snprintf(name, sizeof(name), "D%d BM%d", D, BM);
  check_bwd_qk_views<Tr>(name);
  const typename Tr::SmemLayoutdSt dst{};
  const typename Tr::SmemLayoutdS ds{};
  for (int kr = 0; kr < BN; ++kr)
    for (int qc = 0; qc < BM; ++qc) {
      const int a = smem_offset(dst, kr, qc);
      EXPECT(a == smem_offset(ds, qc, kr), "BM%d dS (%d, %d) views differ", BM, kr, qc);
      EXPECT(2 * a == (qc / 64) * BN * 128 + kr * 128 + ((((qc % 64) / 8) ^ (kr % 8)) << 4) + 2 * (qc % 8),
             "BM%d dS^T (%d, %d): not the stmatrix address", BM, kr, qc);
    }
  typename Tr::template MmaDQ<D, 64> mma;  // the key split's part: BM x D over 64 keys
  for (int t = 0; t < 128; ++t) {
    Tensor c = mma.get_thread_slice(t).partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
    EXPECT(int(size(c)) == BM * D / 128, "BM%d: %d dQ values a thread", BM, int(size(c)));
    const int per_half = D / 2;
    for (int v = 0; v < int(size(c)); ++v) {
      const int u = v % per_half;
      const int r = 64 * (v / per_half) + 16 * (t / 32) + (t % 32) / 4 + 8 * ((u / 2) % 2);
      const int col = 8 * (u / 4) + 2 * (t % 4) + u % 2;
      EXPECT(get<0>(c(v)) == r && get<1>(c(v)) == col, "BM%d D%d dQ thread %d value %d at (%d, %d), expected (%d, %d)",
             BM, D, t, v, int(get<0>(c(v))), int(get<1>(c(v))), r, col);
    }
  }
}

int main() {
  check_all(std::make_integer_sequence<int, kNumTileCfgs>{});  // defaults and candidates
  check_stream_k();
  check_bwd_dq_part<cutlass::bfloat16_t, 128, 128>();  // d128: 64 columns over all 128 keys
  check_bwd_dq_part<cutlass::half_t, 64, 64>();        // d64: all 64 columns over a warpgroup's keys
  check_bwd_dq_tiles();
  check_bwd_d256<cutlass::bfloat16_t>();
  check_bwd_d256<cutlass::half_t>();
  check_bwd_views<cutlass::bfloat16_t, 128, 64>();
  check_bwd_views<cutlass::half_t, 64, 64>();
  check_bwd_views<cutlass::bfloat16_t, 64, 128>();
  std::printf(g_fail ? "%d FAILURES\n" : "all layout checks passed\n", g_fail);
  return g_fail ? 1 : 0;
}
