// Host side of the Hopper attention forward: tensor maps, L2 sections, the launch of one
// kTileCfgs row (fmha_fwd_sm90_kernel.cuh). Included by the translation units that instantiate it.
#pragma once
#include "attention/kernels/fmha_fwd_sm90_kernel.cuh"

#if MSLK_HAS_CUTLASS
#include "common/device_attrs.h"
#include "common/tensor_map.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace mslk::attention::sm90 {

using mslk::cuda::EncodeTiledFn;
using mslk::cuda::encode_tiled_fn;

// Tensor map over [batches][heads][rows][cols] with element strides; boxes of [box_rows][64].
// A stride-0 mode gets extent 1 (and a packed stride the driver accepts); *_mul = 0 marks it.
inline bool encode_map(CUtensorMap* map, const void* base, bool bf16, int cols, int rows, int heads, int batches,
                       int64_t s_row, int64_t s_head, int64_t s_batch, int box_rows, int* head_mul, int* batch_mul) {
  const EncodeTiledFn fn = encode_tiled_fn();
  if (fn == nullptr) return false;
  constexpr uint64_t es = 2;
  const int64_t st[3] = {s_row, s_head, s_batch};
  const int ext[3] = {rows, heads, batches};
  cuuint64_t dim[4] = {cuuint64_t(cols), 1, 1, 1};
  cuuint64_t stride[3];
  uint64_t packed = uint64_t(cols) * es;
  for (int i = 0; i < 3; ++i) {
    dim[i + 1] = st[i] != 0 ? cuuint64_t(ext[i]) : 1;
    stride[i] = st[i] != 0 ? cuuint64_t(st[i]) * es : packed;
    packed = stride[i] * dim[i + 1];
  }
  *head_mul = s_head != 0;
  *batch_mul = s_batch != 0;
  const cuuint32_t box[4] = {cuuint32_t(kColBlock), cuuint32_t(box_rows), 1, 1};
  const cuuint32_t elem_stride[4] = {1, 1, 1, 1};
  const CUresult r = fn(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                        const_cast<void*>(base), dim, stride, box, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds elements read as zero
  return r == CUDA_SUCCESS;
}

// Lanes per L2 section (work_index): as many as keep their K and V within kL2SectionMiB, a third of
// the H200's 50 MB L2 (figures: docs/design/attention_sm90.md). FmhaFwdTuning::sm90_l2_mib
// overrides it (>= 0); 0 puts every lane in one section.
constexpr int kL2SectionMiB = 16;
inline int l2_group(const FmhaFwdParams& p, int l2_mib) {
  const int lanes = p.H * p.num_seqs;
  const int mib = l2_mib >= 0 ? l2_mib : kL2SectionMiB;
  if (mib <= 0) return lanes;
  // keys per lane: a batch's Mkv, or the mean key-lane length of a varlen / paged problem
  const int64_t keys = p.seqstart_q == nullptr ? int64_t(p.Mkv)
                       : p.block_table != nullptr ? int64_t(p.bt_cols) * p.page_size
                                                  : (int64_t(p.Mkv) + p.num_seqs - 1) / p.num_seqs;
  const int64_t lane_bytes = keys * (p.K + p.Kv) * 2;
  const int64_t g = lane_bytes > 0 ? (int64_t(mib) << 20) / lane_bytes : lanes;
  return int(g < 1 ? 1 : g > lanes ? lanes : g);
}

template <typename Element, int D, int C>
cudaError_t launch(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  using Tr = Traits<Element, D, C>;
  if (fmha_fwd_sm90_head_dim(p) != D) return cudaErrorNotSupported;
  if (Tr::kBias != (p.bias != nullptr)) return cudaErrorNotSupported;  // a bias needs a bias row, and only then
  if (p.num_seqs <= 0 || p.H <= 0 || p.max_seqlen_q <= 0) return cudaSuccess;
  Args a{};
  a.p = p;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.group = l2_group(p, t.sm90_l2_mib);
  const bool bf16 = p.is_bf16 != 0;
  if (!encode_map(&a.tq, p.q, bf16, p.K, p.Mq, p.H, p.B, p.q_sm, p.q_sh, p.q_sb, Tr::kBM, &a.q_hm, &a.q_bm) ||
      !encode_map(&a.tk, p.k, bf16, p.K, p.Mkv, p.H, p.B, p.k_sm, p.k_sh, p.k_sb, Tr::kBN, &a.k_hm, &a.k_bm) ||
      !encode_map(&a.tv, p.v, bf16, p.Kv, p.Mkv, p.H, p.B, p.v_sm, p.v_sh, p.v_sb, Tr::kBN, &a.v_hm, &a.v_bm))
    return cudaErrorNotSupported;
  // Paged K/V ([1, kv_rows, H, *] caches): the same maps at physical rows, and 1-row ones
  a.paged = p.block_table != nullptr;
  int unused = 0;
  if (a.paged && (p.page_size <= 0 || p.B != 1 ||
                  !encode_map(&a.tk1, p.k, bf16, p.K, p.Mkv, p.H, p.B, p.k_sm, p.k_sh, p.k_sb, 1, &a.k_hm, &unused) ||
                  !encode_map(&a.tv1, p.v, bf16, p.Kv, p.Mkv, p.H, p.B, p.v_sm, p.v_sh, p.v_sb, 1, &a.v_hm, &unused)))
    return cudaErrorNotSupported;
  int64_t num_work = int64_t((p.max_seqlen_q + Tr::kBM - 1) / Tr::kBM) * p.H * p.num_seqs;
  // int tile indices in the kernel; a packed list holds at most num_seqs * ceil(Mq / BM) per head
  const int64_t packed_max = int64_t((p.Mq + Tr::kBM - 1) / Tr::kBM) * p.H * p.num_seqs;
  if (num_work >= (int64_t(1) << 30)) return cudaErrorNotSupported;
  a.sk = StreamK{int(num_work), 0, 0, 0};  // whole tiles (the persistent rows' walk; see below)
  a.packed = Tr::kPackedList && packed_tiles(p) && packed_max < (int64_t(1) << 30);
  // 16-byte O stores where every row start is 16-byte aligned (t.sm90_o_vec off: 4-byte pairs).
  a.o_vec = t.sm90_o_vec && reinterpret_cast<uintptr_t>(p.out) % 16 == 0 && p.o_sm % 8 == 0 && p.o_sh % 8 == 0 &&
            p.o_sb % 8 == 0 && p.Kv % 8 == 0;
  // TMA stores of O (Traits::kOSmem rows) where the map's extents clip exactly this problem's rows:
  // dense rows (no seqstart_q; packed varlen rows past a sequence belong to the next one).
  a.o_tma = t.sm90_o_tma && Tr::kOSmem && a.o_vec && p.seqstart_q == nullptr &&
            encode_map(&a.to, p.out, bf16, p.Kv, p.Mq, p.H, p.B, p.o_sm, p.o_sh, p.o_sb, 64, &a.o_hm, &a.o_bm);
  // Bias tiles by TMA (bias rows; t.sm90_bias_tma): a 16-bit bias contiguous along keys whose row,
  // head and batch strides the map takes (16-byte multiples; the driver refuses others), rows not
  // broadcast (a stride-0 mode reads as one row), and a scale with a finite inverse (the route adds
  // b / scale to Q K^T). Else each thread loads its scores' bias.
  if constexpr (Tr::kBias) {
    a.bias_inv_scale = 1.f / p.scale;
    a.bias_tma = t.sm90_bias_tma && !p.bias_is_fp32 && p.bias_sn == 1 && p.bias_sm != 0 && p.scale != 0.f &&
                 std::isfinite(a.bias_inv_scale) &&
                 reinterpret_cast<uintptr_t>(p.bias) % 16 == 0 &&
                 encode_map(&a.tb, p.bias, bf16, p.Mkv, p.Mq, p.H, p.B, p.bias_sm, p.bias_sh, p.bias_sb, Tr::kBM,
                            &a.b_hm, &a.b_bm);
  }
  // The packed list (work_of) holds about Mq / BM + num_seqs tiles a head when the sequences tile
  // the packed rows; CTAs loop over whatever more the device-side lengths give.
  if (a.packed) num_work = std::min(num_work, (int64_t(p.Mq) / Tr::kBM + p.num_seqs) * p.H);
  int grid = int(num_work);
  if constexpr (Tr::kPersistent) {
    int dev = 0, sms = 0;
    if (const cudaError_t e = mslk::cuda::current_device_sms(&dev, &sms); e != cudaSuccess) return e;
    grid = int(num_work < sms ? num_work : sms);  // one CTA per SM (smem and registers allow one)
    // The stream-K tail, where the caller gave the workspace (fmha_fwd_sm90_workspace_bytes).
    const StreamKPolicy pol = stream_k_policy(D, t.sm90_stream_k);
    const StreamK sk = stream_k_plan(p, int(num_work), sms, Tr::kBN, pol.min_gain, pol.min_key_tiles, pol.cap_parts);
    const int64_t need = stream_k_workspace_bytes(D, Tr::kWGs, sk.grid);
    if (sk.n_sk > 0 && p.workspace != nullptr && p.workspace_bytes >= need) {
      a.sk = sk;
      grid = sk.grid;  // fewer tiles than SMs: as many CTAs as the tiles' units fill
      a.sk_ws = static_cast<float4*>(p.workspace);
      a.sk_flags = reinterpret_cast<unsigned long long*>(static_cast<char*>(p.workspace) +
                                                         int64_t(grid) * stream_k_chunks(D) * Tr::kWGs * 128 * 16);
      // A flag is ready when it holds this launch's token. Workspace memory comes from an allocator
      // (stale bytes: a 64-bit token with a fixed high half will not match by chance), and each
      // merging warpgroup clears its flag, so a CUDA graph replaying the launch with the same token
      // starts from cleared flags.
      static std::atomic<uint32_t> launches{0};
      // Even: a partial's flag adds 1 when the tile goes on in the next slot (stream_k_item).
      a.sk_token = (0x6d736b31ull << 32) | (uint32_t(launches.fetch_add(1) + 1u) << 1);
    }
  }
  const size_t smem = sizeof(SharedStorage<Element, D, C>) + 1024;
  auto kern = fmha_fwd_sm90_kernel<Element, D, C>;
  static mslk::cuda::SmemLimitOnce smem_limit;  // the cap raised once per device
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = smem_limit.ensure(kern, dev, smem);
  if (err != cudaSuccess) return err;
  kern<<<grid, Tr::kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <int D, int C = default_cfg(D)>
cudaError_t launch_dtype(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  return p.is_bf16 ? launch<cutlass::bfloat16_t, D, C>(p, t, stream) : launch<cutlass::half_t, D, C>(p, t, stream);
}

}  // namespace mslk::attention::sm90
#endif  // MSLK_HAS_CUTLASS
