// The native C++ entry points of include/mslk/{moe,gemm,conv}, called against libmslk.so the way a
// C++ user would (no Python): the MoE ones must agree with plain-ATen references (on CPU, and on
// CUDA when a GPU is present), and the FP4 / MX / conv ones must throw "not available on this
// platform" naming themselves.
#include <ATen/ATen.h>
#include <mslk/conv/conv.h>
#include <mslk/gemm/fp4_mx_gemm.h>
#include <mslk/moe/moe.h>

#include <map>
#include <vector>

#include "check.h"

namespace {

// {expert: ascending tokens} of per-token at::topk picks, tokens < valid, experts in [start, end).
std::map<int64_t, std::vector<int64_t>> routing_reference(const at::Tensor& scores, int64_t top_k, int64_t start,
                                                          int64_t end, int64_t valid) {
  const at::Tensor picks = std::get<1>(at::topk(scores.slice(0, 0, valid).to(at::kFloat), top_k, 1));
  std::map<int64_t, std::vector<int64_t>> seg;
  for (int64_t t = 0; t < valid; ++t)
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = picks[t][j].item<int64_t>();
      if (e >= start && e < end) seg[e].push_back(t);
    }
  return seg;
}

void check_index_shuffling(const at::Device& dev) {
  const int64_t T = 37, E = 8, K = 2, start = 2, end = 6, valid = 30;
  // Distinct scores: the top-k picks have no ties, so torch.topk's order is unambiguous.
  const at::Tensor scores = at::randperm(T * E, at::kLong).to(at::kFloat).reshape({T, E});
  const at::Tensor vc = at::full({1}, valid, at::kInt);
  auto [counts, ei, ti] = mslk::moe::index_shuffling_torch(scores.to(dev), start, end, vc.to(dev), K);
  counts = counts.cpu();
  ei = ei.cpu();
  ti = ti.cpu();
  CHECK_EQ(counts.numel(), E + 2);
  CHECK_EQ(ei.numel(), T * K);
  CHECK_EQ(counts[E].item<int64_t>(), T);
  const auto ref = routing_reference(scores, K, start, end, valid);
  int64_t pos = 0;
  for (int64_t e = 0; e < E; ++e) {
    const auto it = ref.find(e);
    const int64_t n = it == ref.end() ? 0 : int64_t(it->second.size());
    CHECK_EQ(counts[e].item<int64_t>(), n);
    for (int64_t i = 0; i < n; ++i, ++pos) {
      CHECK_EQ(ei[pos].item<int64_t>(), e - start);
      CHECK_EQ(ti[pos].item<int64_t>(), it->second[i]);
    }
  }
  CHECK_EQ(counts[E + 1].item<int64_t>(), pos);
  CHECK(ei.slice(0, pos).eq(0).all().item<bool>());
  CHECK(ti.slice(0, pos).eq(0).all().item<bool>());
  // Defaults (whole expert range, every token) and the op's own argument checks come through.
  auto [c2, e2, t2] = mslk::moe::index_shuffling_torch(scores.to(dev), std::nullopt, std::nullopt, std::nullopt, 1);
  CHECK_EQ(c2[E + 1].item<int64_t>(), T);
  CHECK_THROWS(mslk::moe::index_shuffling_torch(scores.to(dev), std::nullopt, std::nullopt, std::nullopt, 0),
               "'top_k' must be in [1");
}

void check_scatter_add(const at::Device& dev) {
  // Small integers: every sum is exact in float32 whatever the order of the additions.
  const at::Tensor dst = at::randint(-8, 8, {5, 4}, at::kFloat);
  const at::Tensor src = at::randint(-8, 8, {7, 4}, at::kFloat);
  const at::Tensor index = at::tensor(std::vector<int64_t>{4, 0, 4, 2, 0, 4, 1});
  const at::Tensor want = dst.clone().index_add_(0, index, src);
  for (const auto idx_dtype : {at::kLong, at::kInt}) {
    at::Tensor got = dst.clone().to(dev);  // .to(kCPU) of a CPU tensor would alias dst
    mslk::moe::scatter_add_along_first_dim(got, src.to(dev), index.to(idx_dtype).to(dev));
    CHECK(at::equal(got.cpu(), want));
  }
  at::Tensor out = dst.clone().to(dev);
  CHECK_THROWS(mslk::moe::scatter_add_along_first_dim(out, src.to(dev), index.slice(0, 1).to(dev)),
               "'Index' must have one entry per row of 'Src'");
}

void check_unavailable() {
  const at::Tensor t = at::zeros({2, 2}, at::kFloat);
  const std::string fp4 = ": not available on this platform: this build has no FP4 / MX (microscaling) kernels yet";
  CHECK_THROWS(mslk::gemm::f4f4bf16(t, t, t, t), "mslk::gemm::f4f4bf16" + fp4);
  CHECK_THROWS(mslk::gemm::mx8mx4bf16(t, t, t, t), "mslk::gemm::mx8mx4bf16" + fp4);
  CHECK_THROWS(mslk::gemm::mx8mx6bf16(t, t, t, t), "mslk::gemm::mx8mx6bf16" + fp4);
  CHECK_THROWS(mslk::gemm::mx6mx6bf16(t, t, t, t), "mslk::gemm::mx6mx6bf16" + fp4);
  CHECK_THROWS(mslk::gemm::f4f4bf16_grouped_stacked(t, t, t, t, t), "mslk::gemm::f4f4bf16_grouped_stacked" + fp4);
  CHECK_THROWS(mslk::gemm::mx8mx8bf16_grouped_mm(t, t, t, t, t), "mslk::gemm::mx8mx8bf16_grouped_mm" + fp4);
  CHECK_THROWS(mslk::gemm::f4f4bf16_grouped_mm(t, t, t, t, t), "mslk::gemm::f4f4bf16_grouped_mm" + fp4);
  CHECK_THROWS(mslk::gemm::f4f4bf16_ultra_grouped_mm(t, t, t, t, t, t, t),
               "mslk::gemm::f4f4bf16_ultra_grouped_mm" + fp4);
  CHECK_THROWS(mslk::gemm::mx8mx4bf16_grouped_mm(t, t, t, t, t), "mslk::gemm::mx8mx4bf16_grouped_mm" + fp4);
  CHECK_THROWS(mslk::conv::f8f8bf16_conv(t, t, t, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}),
               "mslk::conv::f8f8bf16_conv: not available on this platform: needs SM100 (NVIDIA Blackwell)");
}

}  // namespace

int main() {
  at::manual_seed(0);
  std::vector<at::Device> devices{at::kCPU};
  if (at::hasCUDA()) devices.emplace_back(at::kCUDA);
  for (const auto& dev : devices) {
    check_index_shuffling(dev);
    check_scatter_add(dev);
  }
  check_unavailable();
  std::printf("devices: %s\n", devices.size() > 1 ? "cpu, cuda" : "cpu (no GPU: CUDA part not run)");
  return mslk_test::summary("test_native_api");
}
