// Standalone GPU self-test of the Hopper attention backward (no torch): random bf16 q / k / v / dO,
// the forward's out / lse from the FA2 forward, then dq / dk / dv from the FA2 backward
// (FmhaBwdParams::no_sm90) and from fmha_bwd_sm90, compared as max |diff| / max |grad|; then both
// timed at B2 H32 S4096 d128 (causal and not). Exit status 0 iff every case passes.
// Build: tools/attention/build_fmha_bwd_sm90_check.sh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention/kernels/fmha_bwd.h"
#include "attention/kernels/fmha_bwd_sm90.h"
#include "attention/kernels/fmha_fwd.h"

namespace mslk::attention {
cudaError_t fmha_bwd_sm90_variant(const FmhaBwdParams& p, int v, cudaStream_t stream);
int fmha_bwd_sm90_variant_bits(int v);
}
using namespace mslk::attention;

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

namespace {

struct Case {
  int B, H, Mq, Mkv, D, mask;
  bool varlen;  // B == 1 packed: sequences of lengths `lens` (queries = keys)
  const char* name;
};

struct Buffers {
  __nv_bfloat16 *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float* lse;
  void* ws;
  int64_t ws_bytes;
  int *seqstart, *seqlen;
};

template <typename T> T* dalloc(size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}

void fill_random(__nv_bfloat16* d, size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<__nv_bfloat16> h(n);
  for (auto& x : h) x = __float2bfloat16(nd(rng));
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
}

std::vector<float> to_host(const __nv_bfloat16* d, size_t n) {
  std::vector<__nv_bfloat16> h(n);
  CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(h[i]);
  return f;
}

// [B, M, H, D] contiguous tensors; varlen: B == 1 and num_seqs packed sequences.
FmhaFwdParams fwd_params(const Case& c, const Buffers& b, int num_seqs, int max_len) {
  FmhaFwdParams p{};
  p.q = b.q, p.k = b.k, p.v = b.v, p.out = b.o, p.lse = b.lse;
  const int64_t sm = int64_t(c.H) * c.D, sh = c.D;
  p.q_sb = int64_t(c.Mq) * sm, p.q_sm = sm, p.q_sh = sh;
  p.k_sb = int64_t(c.Mkv) * sm, p.k_sm = sm, p.k_sh = sh;
  p.v_sb = p.k_sb, p.v_sm = sm, p.v_sh = sh;
  p.o_sb = p.q_sb, p.o_sm = sm, p.o_sh = sh;
  p.B = c.B, p.H = c.H, p.Mq = c.Mq, p.Mkv = c.Mkv, p.K = c.D, p.Kv = c.D;
  p.seqstart_q = c.varlen ? b.seqstart : nullptr;
  p.seqstart_k = c.varlen ? b.seqstart : nullptr;
  p.num_seqs = num_seqs;
  p.max_seqlen_q = max_len;
  p.mask_kind = c.mask;
  p.window_left = p.window_right = -1;
  p.scale = 1.f / std::sqrt(float(c.D));
  p.is_bf16 = 1;
  return p;
}

FmhaBwdParams bwd_params(const Case& c, const Buffers& b, int num_seqs, int max_len) {
  FmhaBwdParams p{};
  p.q = b.q, p.k = b.k, p.v = b.v, p.out = b.o, p.dout = b.dout, p.lse = b.lse;
  p.dq = b.dq, p.dk = b.dk, p.dv = b.dv;
  p.sm90_d256 = 1;
  const int64_t sm = int64_t(c.H) * c.D, sh = c.D;
  p.q_sb = int64_t(c.Mq) * sm, p.q_sm = sm, p.q_sh = sh;
  p.k_sb = int64_t(c.Mkv) * sm, p.k_sm = sm, p.k_sh = sh;
  p.v_sb = p.k_sb, p.v_sm = sm, p.v_sh = sh;
  p.o_sb = p.q_sb, p.o_sm = sm, p.o_sh = sh;
  p.do_sb = p.q_sb, p.do_sm = sm, p.do_sh = sh;
  p.dq_sb = p.q_sb, p.dq_sm = sm, p.dq_sh = sh;
  p.dk_sb = p.k_sb, p.dk_sm = sm, p.dk_sh = sh;
  p.dv_sb = p.k_sb, p.dv_sm = sm, p.dv_sh = sh;
  p.B = c.B, p.H = c.H, p.Mq = c.Mq, p.Mkv = c.Mkv, p.K = c.D, p.Kv = c.D;
  p.seqstart_q = c.varlen ? b.seqstart : nullptr;
  p.seqstart_k = c.varlen ? b.seqstart : nullptr;
  p.num_seqs = num_seqs;
  p.max_seqlen_q = max_len;
  p.max_seqlen_k = max_len;
  p.mask_kind = c.mask;
  p.window_left = p.window_right = -1;
  p.scale = 1.f / std::sqrt(float(c.D));
  p.is_bf16 = 1;
  p.workspace = b.ws;
  p.workspace_bytes = b.ws_bytes;
  return p;
}

cudaError_t fa2_fwd(const FmhaFwdParams& p) {
  return p.K <= 64 ? fmha_fwd_d64(p, 0) : p.K <= 128 ? fmha_fwd_d128(p, 0) : fmha_fwd_d256(p, 0);
}

// 0: FA2 backward, 1: Hopper backward (the library's variant), 2 + v: Hopper variant v
// (fmha_bwd_sm90_variants.cu).
cudaError_t run_bwd(FmhaBwdParams p, int which) {
  if (which == 0) {
    p.no_sm90 = 1;
    return fmha_bwd(p, 0);
  }
  if (which >= 2) return fmha_bwd_sm90_variant(p, which - 2, 0);
  return fmha_bwd_sm90(p, 0);
}

struct Problem {
  Case c;
  Buffers b{};
  int num_seqs = 0, max_len = 0;
  size_t nq = 0, nk = 0;
  explicit Problem(const Case& cs, const std::vector<int>& lens, std::mt19937& rng) : c(cs) {
    if (c.varlen) {
      std::vector<int> st(1, 0);
      for (int l : lens) st.push_back(st.back() + l), max_len = std::max(max_len, l);
      c.Mq = c.Mkv = st.back();
      num_seqs = int(lens.size());
      b.seqstart = dalloc<int>(st.size());
      CK(cudaMemcpy(b.seqstart, st.data(), st.size() * 4, cudaMemcpyHostToDevice));
    } else {
      num_seqs = c.B;
      max_len = c.Mq;
    }
    nq = size_t(c.B) * c.Mq * c.H * c.D;
    nk = size_t(c.B) * c.Mkv * c.H * c.D;
    b.q = dalloc<__nv_bfloat16>(nq), b.o = dalloc<__nv_bfloat16>(nq), b.dout = dalloc<__nv_bfloat16>(nq);
    b.dq = dalloc<__nv_bfloat16>(nq);
    b.k = dalloc<__nv_bfloat16>(nk), b.v = dalloc<__nv_bfloat16>(nk);
    b.dk = dalloc<__nv_bfloat16>(nk), b.dv = dalloc<__nv_bfloat16>(nk);
    b.lse = dalloc<float>(size_t(c.B) * c.H * c.Mq);
    fill_random(b.q, nq, rng), fill_random(b.k, nk, rng), fill_random(b.v, nk, rng), fill_random(b.dout, nq, rng);
    FmhaBwdParams bp = bwd_params(c, b, num_seqs, max_len);
    bp.sm90_dq_tiles = 1;  // room for either dQ layout
    b.ws_bytes = fmha_bwd_workspace_bytes(bp);
    b.ws = dalloc<unsigned char>(size_t(b.ws_bytes));
    CK(fa2_fwd(fwd_params(c, b, num_seqs, max_len)));
    CK(cudaDeviceSynchronize());
  }
  FmhaBwdParams bwd() const { return bwd_params(c, b, num_seqs, max_len); }
  void clear_grads() {
    CK(cudaMemset(b.dq, 0, nq * 2));
    CK(cudaMemset(b.dk, 0, nk * 2));
    CK(cudaMemset(b.dv, 0, nk * 2));
  }
  ~Problem() {
    for (void* p : {(void*)b.q, (void*)b.k, (void*)b.v, (void*)b.o, (void*)b.dout, (void*)b.dq, (void*)b.dk,
                    (void*)b.dv, (void*)b.lse, b.ws, (void*)b.seqstart})
      if (p) cudaFree(p);
  }
};

// max |a - r| / max |r| (NaN anywhere in a: +inf).
double rel_err(const std::vector<float>& a, const std::vector<float>& r) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, double(std::fabs(a[i] - r[i])));
    den = std::max(den, double(std::fabs(r[i])));
  }
  return den > 0 ? num / den : num;
}

bool check(const Case& cs, const std::vector<int>& lens, std::mt19937& rng, int which = 1) {
  Problem pr(cs, lens, rng);
  const FmhaBwdParams p = pr.bwd();
  if (!fmha_bwd_sm90_supports(p)) {
    std::printf("%-34s FAIL: fmha_bwd_sm90_supports() is false\n", cs.name);
    return false;
  }
  pr.clear_grads();
  CK(run_bwd(p, 0));
  CK(cudaDeviceSynchronize());
  const auto rq = to_host(pr.b.dq, pr.nq), rk = to_host(pr.b.dk, pr.nk), rv = to_host(pr.b.dv, pr.nk);
  pr.clear_grads();
  const cudaError_t e = run_bwd(p, which);
  const cudaError_t e2 = cudaDeviceSynchronize();
  if (e != cudaSuccess || e2 != cudaSuccess) {
    std::printf("%-34s FAIL: sm90 launch %s, sync %s\n", cs.name, cudaGetErrorName(e), cudaGetErrorName(e2));
    std::exit(3);  // a sticky error (trap) ends the process anyway
  }
  const double eq = rel_err(to_host(pr.b.dq, pr.nq), rq), ek = rel_err(to_host(pr.b.dk, pr.nk), rk),
               ev = rel_err(to_host(pr.b.dv, pr.nk), rv);
  const bool ok = eq < 2e-2 && ek < 2e-2 && ev < 2e-2;
  std::printf("%-34s v%-2d dq %.2e  dk %.2e  dv %.2e  %s\n", cs.name, which >= 2 ? fmha_bwd_sm90_variant_bits(which - 2) : -1, eq, ek, ev, ok ? "ok" : "FAIL");
  return ok;
}

double median_ms(Problem& pr, int which) {
  const FmhaBwdParams p = pr.bwd();
  CK(run_bwd(p, which));  // warm-up
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int i = 0; i < 10; ++i) {
    CK(cudaEventRecord(a));
    CK(run_bwd(p, which));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  std::sort(ts.begin(), ts.end());
  return 0.5 * (ts[4] + ts[5]);
}

}  // namespace

int main(int argc, char** argv) {
  // Modes: (none) checks + timing of FA2 vs the library's variant; --no-timing: checks only;
  // --variants: checks of every variant + timing of all of them; --profile V [D]: one launch of variant V
  // on the timing table's non-causal shape of head dim D (128 default, or 64), for ncu.
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool timing = mode != "--no-timing";
  const bool variants = mode == "--variants";
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  std::mt19937 rng(1234);
  const Case cases[] = {
      {1, 2, 1, 1, 64, kMaskNone, false, "B1 H2 S1 d64"},
      {1, 2, 7, 7, 128, kMaskCausalTopLeft, false, "B1 H2 S7 d128 causal"},
      {2, 2, 128, 128, 64, kMaskNone, false, "B2 H2 S128 d64"},
      {2, 2, 128, 128, 128, kMaskCausalTopLeft, false, "B2 H2 S128 d128 causal"},
      {1, 4, 1000, 1000, 128, kMaskNone, false, "B1 H4 S1000 d128"},
      {1, 4, 1000, 1000, 64, kMaskCausalTopLeft, false, "B1 H4 S1000 d64 causal"},
      {2, 2, 777, 1000, 128, kMaskCausalBottomRight, false, "B2 H2 Sq777 Sk1000 d128 causal-br"},
      {1, 2, 4096, 4096, 128, kMaskCausalTopLeft, false, "B1 H2 S4096 d128 causal"},
      {1, 2, 4096, 4096, 64, kMaskNone, false, "B1 H2 S4096 d64"},
      {1, 3, 0, 0, 128, kMaskCausalTopLeft, true, "varlen 5 seqs d128 causal"},
      {1, 3, 0, 0, 64, kMaskNone, true, "varlen 5 seqs d64"},
      {1, 2, 1, 1, 256, kMaskNone, false, "B1 H2 S1 d256"},
      {2, 2, 130, 130, 256, kMaskCausalTopLeft, false, "B2 H2 S130 d256 causal"},
      {2, 2, 777, 1000, 256, kMaskCausalBottomRight, false, "B2 H2 Sq777 Sk1000 d256 causal-br"},
      {1, 3, 0, 0, 256, kMaskNone, true, "varlen 5 seqs d256"},
  };
  const std::vector<int> lens = {1, 130, 7, 513, 64};
  int num_variants = 0;  // as many as fmha_bwd_sm90_variants.cu lists (bits -1 past its end)
  while (fmha_bwd_sm90_variant_bits(num_variants) >= 0) ++num_variants;
  if (mode == "--profile") {
    const int v = argc > 2 ? std::atoi(argv[2]) : 0;
    const bool d64 = argc > 3 && std::atoi(argv[3]) == 64;
    const Case c = d64 ? Case{4, 16, 2048, 2048, 64, kMaskNone, false, "B4 H16 S2048 d64"}
                       : Case{2, 32, 4096, 4096, 128, kMaskNone, false, "B2 H32 S4096 d128"};
    Problem pr(c, {}, rng);
    CK(run_bwd(pr.bwd(), 2 + v));
    CK(cudaDeviceSynchronize());
    std::printf("profiled variant bits %d\n", fmha_bwd_sm90_variant_bits(v));
    return 0;
  }
  bool all = true;
  for (const Case& c : cases) {
    if (!variants) {
      all = check(c, c.varlen ? lens : std::vector<int>{}, rng) && all;
      continue;
    }
    for (int v = 0; v < num_variants; ++v) all = check(c, c.varlen ? lens : std::vector<int>{}, rng, 2 + v) && all;
  }
  if (timing && variants) {
    const Case shapes[] = {{2, 32, 4096, 4096, 128, kMaskNone, false, "B2 H32 S4096 d128"},
                           {2, 32, 4096, 4096, 128, kMaskCausalTopLeft, false, "B2 H32 S4096 d128 causal"},
                           {4, 16, 2048, 2048, 64, kMaskNone, false, "B4 H16 S2048 d64"},
                           {4, 16, 2048, 2048, 64, kMaskCausalTopLeft, false, "B4 H16 S2048 d64 causal"}};
    for (const Case& c : shapes) {
      Problem pr(c, {}, rng);
      const double flops = 10.0 * c.B * c.H * double(c.Mq) * c.Mkv * c.D * (c.mask ? 0.5 : 1.0);
      std::printf("%-28s", c.name);
      for (int rep = 0; rep < 2; ++rep)
        for (int v = 0; v < num_variants; ++v) {
          const double t = median_ms(pr, 2 + v);
          std::printf(" | v%d %6.3f ms %5.1f", fmha_bwd_sm90_variant_bits(v), t, flops / t * 1e-9);
        }
      std::printf("  (TFLOP/s)\n");
    }
  } else if (timing) {
    const Case shapes[] = {{2, 32, 4096, 4096, 128, kMaskNone, false, "B2 H32 S4096 d128"},
                           {2, 32, 4096, 4096, 128, kMaskCausalTopLeft, false, "B2 H32 S4096 d128 causal"},
                           {4, 16, 2048, 2048, 64, kMaskNone, false, "B4 H16 S2048 d64"},
                           {4, 16, 2048, 2048, 64, kMaskCausalTopLeft, false, "B4 H16 S2048 d64 causal"},
                           {2, 16, 4096, 4096, 256, kMaskNone, false, "B2 H16 S4096 d256"},
                           {2, 16, 4096, 4096, 256, kMaskCausalTopLeft, false, "B2 H16 S4096 d256 causal"}};
    for (const Case& c : shapes) {
      const int mask = c.mask;
      Problem pr(c, {}, rng);
      const double flops = 10.0 * c.B * c.H * double(c.Mq) * c.Mkv * c.D * (mask ? 0.5 : 1.0);
      const double t0 = median_ms(pr, 0), t1 = median_ms(pr, 1);
      std::printf("%-28s FA2 %8.3f ms %6.1f TFLOP/s | sm90 %8.3f ms %6.1f TFLOP/s | speedup %.2fx\n", c.name, t0,
                  flops / t0 * 1e-9, t1, flops / t1 * 1e-9, t0 / t1);
    }
  }
  std::printf("%s\n", all ? "ALL PASS" : "SOME FAILED");
  return all ? 0 : 1;
}
