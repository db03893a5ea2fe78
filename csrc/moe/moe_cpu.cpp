// CPU reference of the MoE ops: the contracts of moe_params.h in plain loops. Deterministic:
// routed slots are ordered by (expert, token, k), rows the contract leaves unspecified (past the
// valid count, holes of split/combine) are zero. Value checks (ids in range, counts consistent)
// happen here, with errors that name the op and the argument.
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp8_cpu.h"
#include "common/dtype_cpu.h"
#include "moe/moe.h"

namespace mslk::moe {
namespace {

float load_f(const void* p, Dtype d, int64_t i) {
  switch (d) {
    case Dtype::kFloat32: return static_cast<const float*>(p)[i];
    case Dtype::kFloat16: return static_cast<float>(static_cast<const c10::Half*>(p)[i]);
    default: return static_cast<float>(static_cast<const c10::BFloat16*>(p)[i]);
  }
}

int64_t load_i(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

// min(valid, n), at least 0; n when absent.
int64_t valid_of(const Count& c, int64_t n) {
  if (!c.ptr) return n;
  return std::clamp<int64_t>(load_i(c.ptr, c.int64, 0), 0, n);
}

void check_id(int64_t v, int64_t n, const char* op, const char* arg, int64_t i) {
  TORCH_CHECK_VALUE(v >= 0 && v < n, op, ": ", arg, "[", i, "] = ", v, " is out of range [0, ", n, ")");
}

void cpu_index_shuffling(const IndexShufflingParams& p) {
  const int64_t T = p.T, E = p.E, K = p.top_k;
  const int64_t valid = valid_of(p.valid, T);
  std::vector<int32_t> sel(valid * K);
  at::parallel_for(0, valid, 64, [&](int64_t b, int64_t e) {
    std::vector<uint64_t> r(E);
    for (int64_t t = b; t < e; ++t) {
      for (int64_t x = 0; x < E; ++x)
        r[x] = topk_rank(load_f(p.scores, p.dtype, t * p.stride_t + x * p.stride_e), static_cast<uint32_t>(x));
      std::partial_sort(r.begin(), r.begin() + K, r.end(), std::greater<uint64_t>());
      for (int64_t j = 0; j < K; ++j) sel[t * K + j] = static_cast<int32_t>(~static_cast<uint32_t>(r[j]));
    }
  });
  std::vector<std::vector<int32_t>> bucket(E);
  for (int64_t s = 0; s < valid * K; ++s) {
    const int32_t x = sel[s];
    if (x >= p.expert_start && x < p.expert_end) bucket[x].push_back(static_cast<int32_t>(s / K));
  }
  int64_t pos = 0;
  for (int64_t x = 0; x < E; ++x) {
    p.counts[x] = static_cast<int32_t>(bucket[x].size());
    for (int32_t t : bucket[x]) {
      p.expert_indices[pos] = static_cast<int32_t>(x - p.expert_start);
      p.token_indices[pos] = t;
      ++pos;
    }
  }
  p.counts[E] = static_cast<int32_t>(T);
  p.counts[E + 1] = static_cast<int32_t>(pos);
  std::fill(p.expert_indices + pos, p.expert_indices + T * K, 0);
  std::fill(p.token_indices + pos, p.token_indices + T * K, 0);
}

template <bool kQuant>
void cpu_gather_impl(const GatherParams& p) {
  const char* op = kQuant ? "gather_scale_quant_dense_tokens" : "gather_scale_dense_tokens";
  const int64_t valid = valid_of(p.valid, p.A);
  for (int64_t i = 0; i < valid; ++i) {
    check_id(load_i(p.tok, p.idx64, i), p.T, op, "token_indices", i);
    check_id(load_i(p.exp, p.idx64, i), p.E, op, "expert_indices", i);
  }
  with_dtype(p.dtype, [&](auto z) {
    using T = decltype(z);
    const T* x = static_cast<const T*>(p.x);
    at::parallel_for(0, p.A, 16, [&](int64_t b, int64_t e) {
      std::vector<float> y(p.D);
      for (int64_t i = b; i < e; ++i) {
        if (i >= valid) {  // unspecified by the contract: zero here
          if constexpr (kQuant) {
            std::memset(static_cast<uint8_t*>(p.out) + i * p.D, 0, p.D);
            p.out_scale[i] = 0.f;
          } else {
            std::fill(static_cast<T*>(p.out) + i * p.D, static_cast<T*>(p.out) + (i + 1) * p.D, T(0.f));
          }
          continue;
        }
        const int64_t t = load_i(p.tok, p.idx64, i), ex = load_i(p.exp, p.idx64, i);
        const float s = load_f(p.scores, p.score_dtype, t * p.stride_t + ex * p.stride_e);
        float amax = 0.f;
        for (int64_t d = 0; d < p.D; ++d) {
          y[d] = static_cast<float>(x[t * p.D + d]) * s;
          amax = std::fmax(amax, std::fabs(y[d]));
        }
        if constexpr (kQuant) {
          const float c = clamp_amax(amax, kFp8Eps, p.scale_ub);
          const float inv = kFp8E4M3Max / c;
          p.out_scale[i] = c / kFp8E4M3Max;
          uint8_t* o = static_cast<uint8_t*>(p.out) + i * p.D;
          for (int64_t d = 0; d < p.D; ++d) o[d] = to_fp8_e4m3_sat(y[d] * inv).x;
        } else {
          T* o = static_cast<T*>(p.out) + i * p.D;
          for (int64_t d = 0; d < p.D; ++d) o[d] = T(y[d]);
        }
      }
    });
  });
}
void cpu_gather(const GatherParams& p) { cpu_gather_impl<false>(p); }
void cpu_gather_quant(const GatherParams& p) { cpu_gather_impl<true>(p); }

// out[dst(i)] += in[src(i)] for rows i in [0, n), one thread per column range (deterministic order).
template <typename Dst, typename Src>
void add_rows(Dtype dtype, void* out, const void* in, int64_t D, int64_t n, Dst dst, Src src) {
  with_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    at::parallel_for(0, D, 256, [&](int64_t b, int64_t e) {
      for (int64_t i = 0; i < n; ++i) {
        T* orow = o + dst(i) * D;
        const T* irow = x + src(i) * D;
        for (int64_t d = b; d < e; ++d) orow[d] = T(static_cast<float>(orow[d]) + static_cast<float>(irow[d]));
      }
    });
  });
}

void cpu_scatter_add(const ScatterAddParams& p) {
  const int64_t valid = valid_of(p.valid, p.A);
  for (int64_t i = 0; i < valid; ++i) check_id(load_i(p.tok, p.idx64, i), p.N, "scatter_add_dense_tokens", "token_indices", i);
  add_rows(p.dtype, p.out, p.in, p.D, valid, [&](int64_t i) { return load_i(p.tok, p.idx64, i); },
           [](int64_t i) { return i; });
}

void cpu_scatter_padded(const ScatterPaddedParams& p) {
  constexpr const char* op = "scatter_add_padded_tokens";
  std::vector<int64_t> pre(p.E + 1, 0);
  for (int64_t e = 0; e < p.E; ++e) {
    const int64_t c = load_i(p.counts, p.counts64, e);
    TORCH_CHECK_VALUE(c >= 0, op, ": token_counts[", e, "] = ", c, " is negative");
    pre[e + 1] = pre[e] + c;
  }
  TORCH_CHECK_VALUE(pre[p.E] <= p.T, op, ": the token counts sum to ", pre[p.E],
                    ", more than the rows of each rank's block (in_tokens.size(1) = ", p.T, ")");
  const int64_t n = pre[p.E], per_rank = p.E / p.EP;
  for (int64_t s = 0; s < n; ++s) check_id(load_i(p.tok, p.idx64, s), p.N, op, "token_indices", s);
  std::vector<int64_t> src(n);
  for (int64_t e = 0; e < p.E; ++e)
    for (int64_t s = pre[e]; s < pre[e + 1]; ++s) src[s] = (e / per_rank) * p.T + s;
  add_rows(p.dtype, p.out, p.in, p.D, n, [&](int64_t s) { return load_i(p.tok, p.idx64, s); },
           [&](int64_t s) { return src[s]; });
}

void cpu_shuffling(const ShufflingParams& p) {
  const char* op = p.combine ? "combine_shuffling" : "split_shuffling";
  auto c = [&](int64_t r, int64_t e) { return load_i(p.counts, p.counts64, r * p.E + e); };
  for (int64_t r = 0; r < p.EP; ++r)
    for (int64_t e = 0; e < p.E; ++e)
      TORCH_CHECK_VALUE(c(r, e) >= 0, op, ": token_counts[", r, ", ", e, "] = ", c(r, e), " is negative");
  const int64_t B_T = p.padded ? p.T / p.EP : 0;
  // rank-major offsets of every (rank, expert) block
  std::vector<int64_t> rm(p.EP * p.E);
  int64_t run = 0;
  for (int64_t r = 0; r < p.EP; ++r) {
    int64_t in_rank = 0;
    for (int64_t e = 0; e < p.E; ++e) {
      rm[r * p.E + e] = (p.padded ? B_T * r : run) + in_rank;
      in_rank += c(r, e);
    }
    TORCH_CHECK_VALUE(!p.padded || in_rank <= B_T, op, ": rank ", r, " holds ", in_rank,
                      " tokens, more than its padded block of ", B_T, " rows");
    run += in_rank;
  }
  TORCH_CHECK_VALUE(p.padded || run <= p.T, op, ": the token counts sum to ", run, ", more than tokens.size(0) = ", p.T);
  int64_t em = 0;
  for (int64_t le = 0; le < p.EG; ++le) {
    const int64_t ge = p.expert_start + le;
    int64_t col = 0;
    for (int64_t r = 0; r < p.EP; ++r) {
      const int64_t n = c(r, ge);
      const int64_t in_off = p.combine ? rm[r * p.E + ge] : em;
      const int64_t out_off = p.combine ? em : rm[r * p.E + ge];
      std::memcpy(static_cast<uint8_t*>(p.out) + out_off * p.row_bytes,
                  static_cast<const uint8_t*>(p.in) + in_off * p.row_bytes, n * p.row_bytes);
      em += n;
      col += n;
    }
    if (p.combine) {
      if (p.counts64) static_cast<int64_t*>(p.out_counts)[le] = col;
      else static_cast<int32_t*>(p.out_counts)[le] = static_cast<int32_t>(col);
    }
  }
  if (p.combine) {
    if (p.counts64) static_cast<int64_t*>(p.out_counts)[p.EG] = em;
    else static_cast<int32_t*>(p.out_counts)[p.EG] = static_cast<int32_t>(em);
  }
}

template <bool kQuant>
void cpu_silu_impl(const SiluMulParams& p) {
  const int64_t valid = valid_of(p.valid, p.T);
  with_dtype(p.dtype, [&](auto z) {
    using T = decltype(z);
    const T* a = static_cast<const T*>(p.x0);
    const T* b = static_cast<const T*>(p.x1);
    at::parallel_for(0, p.T, 16, [&](int64_t lo, int64_t hi) {
      std::vector<float> y(p.D);
      for (int64_t t = lo; t < hi; ++t) {
        float amax = 0.f;
        for (int64_t d = 0; d < p.D; ++d) {
          const float u = t < valid ? static_cast<float>(a[t * p.stride0 + d]) : 0.f;
          const float v = t < valid ? static_cast<float>(b[t * p.stride1 + d]) : 0.f;
          y[d] = u * (1.f / (1.f + std::exp(-u))) * v;
          amax = std::fmax(amax, std::fabs(y[d]));
        }
        if constexpr (kQuant) {
          uint8_t* o = static_cast<uint8_t*>(p.out) + t * p.D;
          if (t >= valid) {
            std::memset(o, 0, p.D);
            p.out_scale[t] = 0.f;
            continue;
          }
          const float c = clamp_amax(amax, kFp8Eps, p.scale_ub);
          const float inv = kFp8E4M3Max / c;
          p.out_scale[t] = c / kFp8E4M3Max;
          for (int64_t d = 0; d < p.D; ++d) o[d] = to_fp8_e4m3_sat(y[d] * inv).x;
        } else {
          T* o = static_cast<T*>(p.out) + t * p.D;
          for (int64_t d = 0; d < p.D; ++d) o[d] = T(y[d]);
        }
      }
    });
  });
}
void cpu_silu_mul(const SiluMulParams& p) { cpu_silu_impl<false>(p); }
void cpu_silu_mul_quant(const SiluMulParams& p) { cpu_silu_impl<true>(p); }

// The CPU path of scatter_add_along_first_dim is ATen's scatter_add_ (its definition).
bool cpu_first_dim(const ScatterFirstDimParams&) { return false; }

constexpr MoeBackend kCpuBackend{cpu_index_shuffling, cpu_gather,     cpu_gather_quant,   cpu_scatter_add,
                                 cpu_scatter_padded,  cpu_shuffling,  cpu_silu_mul,       cpu_silu_mul_quant,
                                 cpu_first_dim,       /*needs_workspace=*/false};
using CpuOps = MoeOps<&kCpuBackend>;

}  // namespace
}  // namespace mslk::moe

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::moe::CpuOps::register_ops(m); }
