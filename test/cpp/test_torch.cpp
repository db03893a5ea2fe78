// Torch, no GPU: accessors, accessor builder, kernel modes, tuning-cache files.
// Built twice: plain (pta = at) and with -DMSLK_MEMCHECK -DMSLK_TENSORCHECK.
#include <ATen/ATen.h>
#include <mslk/gemm/cutlass/kernel_mode.h>
#include <mslk/utils/torch/tensor_accessor_builder.h>
#ifdef MSLK_TEST_WITH_CUDA
#include <mslk/utils/tuning_cache.cuh>
#endif

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>
#include <unistd.h>

#include "check.h"
#include "temp_files.h"

using namespace mslk::utils;


static void test_accessors() {
  at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4});
  auto b = PTA_B(x, float, 3, 64);
  CHECK_EQ(std::string(b.name), "x");
  auto a = b.build("ctx");
  CHECK_EQ(a[1][2][3], 23.0f);
  CHECK_EQ(a.size(1), 3);
  CHECK_EQ(a.stride(0), 12);
  a[0][0][1] = 100.0f;
  CHECK_EQ(x[0][0][1].item<float>(), 100.0f);

  auto a32 = PTA_B(x, float, 3, 32).build("ctx");
  static_assert(std::is_same_v<decltype(a32.size(0)), int32_t>);
  CHECK_EQ(a32[1][0][2], 14.0f);

  auto ta = TA_B(x, float, 3, 64).build("ctx");  // non-packed, aliases x's sizes
  CHECK_EQ(ta[1][1][1], 17.0f);

  // Non-contiguous views index through strides.
  at::Tensor xt = x.transpose(0, 2);  // [4, 3, 2]
  auto at_ = PTA_B(xt, float, 3, 64).build("ctx");
  CHECK_EQ(at_[3][2][1], 23.0f);

  // Validation names the tensor, the context and expected vs actual.
  CHECK_THROWS(PTA_B(x, float, 2, 64).build("my_kernel"), "'x' expected 2 dims, got 3");
  CHECK_THROWS(PTA_B(x, double, 3, 64).build("my_kernel"), "expected dtype Double, got Float");
  CHECK_THROWS(PTA_B(x, float, 2, 64).build("my_kernel"), "my_kernel");
  CHECK_EQ(scalar_type_for<at::BFloat16>(), at::kBFloat16);
  CHECK_EQ(scalar_type_for<const int32_t>(), at::kInt);
  CHECK_EQ(scalar_type_for<c10::Float8_e4m3fn>(), at::kFloat8_e4m3fn);

  // 32-bit indexing refuses tensors whose addressed extent overflows int32 (a strided
  // view: no big allocation).
  uint8_t dummy[4] = {};
  at::Tensor huge = at::from_blob(dummy, {2, 2}, {int64_t{1} << 31, 1}, at::kByte);
  CHECK_THROWS(PTA_B(huge, uint8_t, 2, 32).build("k32"), "32-bit indexing");
  CHECK_EQ(PTA_B(huge, uint8_t, 2, 64).build("k64").size(0), 2);

#ifdef MSLK_MEMCHECK
  static_assert(std::is_same_v<decltype(a), mslk::utils::PackedTensorAccessor<float, 3, at::DefaultPtrTraits, int64_t>>);
  CHECK_EQ(std::string(a.name()), "x");
  CHECK_EQ(std::string(a.context()), "ctx");
  CHECK_EQ(a.numel(), size_t{24});
  CHECK_EQ(a.at(23), 23.0f);
  CHECK_THROWS(a.at(24), "flat index 24 is out of bounds [0, 24)");
  CHECK_THROWS(a[2], "index 2 is out of bounds [0, 2)");
  CHECK_THROWS(a[1][3], "tensor 'x': index 3 is out of bounds [0, 3)");
  CHECK_THROWS(a[1][0][-1], "index -1 is out of bounds [0, 4)");
  CHECK_THROWS(ta[0][5], "ctx: tensor 'x'");
  CHECK_EQ(at_.numel(), size_t{24});  // storage extent of the transposed view
  auto tr = a.transpose(0, 2);        // [4, 3, 2]
  CHECK_EQ(tr.size(0), 4);
  CHECK_EQ(tr[3][2][1], 23.0f);
  CHECK_THROWS(a.transpose(0, 3), "transpose dims (0, 3) out of range");
  // Long names/contexts are truncated, not overflowed.
  const std::string long_ctx(1000, 'c');
  auto l = PTA_B(x, float, 3, 64).build(long_ctx);
  CHECK_EQ(std::string(l.context()).size(), CONTEXT_MAX_LEN - 1);
  // Values check (MSLK_TENSORCHECK path).
  at::Tensor bad = at::ones({4});
  bad[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS(PTA_B(bad, float, 1, 64).checkValues("launch"), "'bad' contains 1 NaN");
  bad[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS(PTA_B(bad, float, 1, 64).checkValues("launch"), "contains 1 Inf");
  PTA_B(x, float, 3, 64).checkValues("launch");                 // finite: no throw
  at::Tensor ints = at::ones({3}, at::kInt);
  PTA_B(ints, int32_t, 1, 64).checkValues("launch");           // not floating: skipped
#else
  static_assert(std::is_same_v<decltype(a), at::GenericPackedTensorAccessor<float, 3, at::DefaultPtrTraits, int64_t>>);
  static_assert(std::is_same_v<::PackedTensorAccessor<float, 2>, at::GenericPackedTensorAccessor<float, 2>>);
#endif
  // Raw mslk accessors work in both modes.
  int64_t sizes[2] = {2, 3}, strides[2] = {3, 1};
  float buf[6] = {0, 1, 2, 3, 4, 5};
  mslk::utils::PackedTensorAccessor32<float, 2> p32(buf, sizes, strides, "buf", "raw");
  CHECK_EQ(p32[1][2], 5.0f);
  CHECK_EQ(p32.numel(), size_t{6});
  CHECK_THROWS(p32[0][3], "raw: tensor 'buf': index 3");
}

static void test_kernel_mode() {
  using mslk::KernelMode;
  auto mode = [](int64_t M, int64_t N, int64_t K) {
    return mslk::get_kernel_mode(at::empty({M, K}, at::kChar), at::empty({N, K}, at::kChar));
  };
  CHECK(mode(128, 4096, 4096) == KernelMode::Small);
  CHECK(mode(4096, 64, 4096) == KernelMode::Small);
  CHECK(mode(4096, 4096, 256) == KernelMode::Large);
  CHECK(mode(256, 4096, 4096) == KernelMode::Large);
  CHECK(mode(1024, 1024, 8192) == KernelMode::Default);
  // Leading dims of XQ fold into M.
  CHECK(mslk::get_kernel_mode(at::empty({8, 32, 64}), at::empty({256, 64})) == KernelMode::Default);
  CHECK(mslk::get_kernel_mode(at::empty({2, 32, 64}), at::empty({256, 64})) == KernelMode::Small);
  auto bmode = [](int64_t B, int64_t M, int64_t N, int64_t K) {
    return mslk::get_batched_kernel_mode(at::empty({B, M, K}, at::kChar), at::empty({B, N, K}, at::kChar));
  };
  CHECK(bmode(2, 64, 4096, 4096) == KernelMode::Small);
  CHECK(bmode(2, 256, 4096, 4096) == KernelMode::Medium);
  CHECK(bmode(2, 256, 8192, 8192) == KernelMode::Default);
  CHECK(bmode(4, 256, 8192, 8192) == KernelMode::Large);
  CHECK(bmode(4, 256, 512, 512) == KernelMode::Default);
  CHECK_THROWS(mslk::get_batched_kernel_mode(at::empty({4, 4}), at::empty({2, 4, 4})), "expected 3-d");
}

#ifdef MSLK_TEST_WITH_CUDA
static void test_tuning_cache_files() {
  const std::string root = make_temp_dir("mslk_cache_test");
  const std::string dir = root + "/nested/cache";  // created on demand, parents too
  ::setenv("MSLK_CACHE_DIR", dir.c_str(), 1);
  CHECK_EQ(mslk::TuningCache::cacheDirectory(), dir);
  using Fn = std::function<int(int)>;
  const std::unordered_map<std::string, Fn> kernels = {
      {"k_a", [](int v) { return v + 1; }}, {"k_b", [](int v) { return v + 2; }}};
  {
    mslk::TuningCache cache("unit");
    CHECK_EQ(cache.cacheFilename(), dir + "/unit.txt");
    std::ofstream(dir + "/unit.txt") << "M=1,N=2=k_b\nbroken line\nstale=k_gone\n";
  }
  {
    mslk::TuningCache cache("unit");
    // Cached key (containing '=') resolves without benchmarking (no GPU needed).
    auto k = cache.findBestKernelMaybeAutotune("M=1,N=2", kernels, 0);
    CHECK_EQ(k(0), 2);
    CHECK_THROWS(cache.findBestKernelMaybeAutotune("bad\nkey", kernels, 0), "single-line");
    const std::unordered_map<std::string, Fn> none;
    CHECK_THROWS(cache.findBestKernelMaybeAutotune("M=1,N=2", none, 0), "no candidate kernels");
  }
  {
    mslk::TuningCache cache("unit");
    std::ofstream(dir + "/unit.txt", std::ios::app) << "other=k_a\n";
    cache.save();  // nothing tuned here: the file is left as is
    const std::string all = read_all(dir + "/unit.txt");
    CHECK(all.find("other=k_a") != std::string::npos);
    CHECK(all.find("M=1,N=2=k_b") != std::string::npos);
  }
  CHECK_THROWS(mslk::TuningCache("a/b"), "non-empty file name");
  remove_dir(root);
}
#endif

int main() {
  test_accessors();
  test_kernel_mode();
#ifdef MSLK_TEST_WITH_CUDA
  test_tuning_cache_files();
#endif
#ifdef MSLK_MEMCHECK
  return mslk_test::summary("test_torch_memcheck");
#else
  return mslk_test::summary("test_torch");
#endif
}
