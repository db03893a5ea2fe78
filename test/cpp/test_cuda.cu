// CUDA: device helpers, KernelLauncher, timer, autotuning, CUTLASS helpers. Exits 77
// (ctest: skipped) after the host-only part when no GPU is visible.
#include <mslk/utils/bench/kernel_execution_timer.cuh>
#include <mslk/utils/device/cuda_utilities.cuh>
#include <mslk/utils/kernel_launcher.cuh>
#include <mslk/utils/tuning_cache.cuh>
#include <mslk/utils/utils.h>
#include <mslk/utils/utils_gpu.h>
#ifdef MSLK_TEST_WITH_CUTLASS
#include <cutlass/detail/sm100_blockscaled_layout.hpp>
#include <mslk/gemm/cutlass/grouped_common.cuh>
#include <mslk/gemm/cutlass/threadblock.h>
#endif

#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "check.h"
#include "temp_files.h"


using Acc1 = pta::PackedTensorAccessor64<float, 1, at::RestrictPtrTraits>;

__global__ void add_kernel(Acc1 x, int64_t n, float value) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] += value;
}

__global__ void big_smem_kernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = smem[blockDim.x - 1 - threadIdx.x];
}

__global__ void spin_kernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void pow2_kernel(int64_t* out) { out[0] = mslk::nextPowerOf2(1000); out[1] = mslk::roundUp(-5, 4); }

#ifdef MSLK_TEST_WITH_CUTLASS
using Epilogue = cutlass::epilogue::thread::LinearCombinationOnDevice<float, 4>;

static void test_epilogue_host() {
  float alpha = 2.0f, beta = 0.5f;
  Epilogue::FragmentAccumulator acc;
  Epilogue::FragmentOutput src;
  for (int i = 0; i < 4; ++i) { acc[i] = float(i); src[i] = 10.0f; }
  Epilogue op(Epilogue::Params(&alpha, &beta));  // pointers read at call time
  alpha = 3.0f;
  CHECK(op.is_source_needed());
  CHECK_EQ(op(acc, src)[2], 3.0f * 2 + 0.5f * 10);
  CHECK_EQ(op(acc)[3], 9.0f);
  Epilogue scalar(Epilogue::Params(2.0f));
  CHECK(!scalar.is_source_needed());
  CHECK_EQ(scalar(acc)[1], 2.0f);
  scalar.set_k_partition(1, 2);
  CHECK(scalar.is_source_needed());
  CHECK_EQ(Epilogue(Epilogue::Params()).operator()(acc, src)[1], 1.0f);
  cutlass::epilogue::thread::LinearCombinationParams base(4.0f, 1.0f);
  CHECK_EQ(Epilogue(Epilogue::Params(base))(acc, src)[1], 14.0f);
}

__global__ void epilogue_kernel(Epilogue::Params params, float* out) {
  Epilogue op(params);
  Epilogue::FragmentAccumulator acc;
  for (int i = 0; i < 4; ++i) acc[i] = float(i + 1);
  auto d = op(acc);
  for (int i = 0; i < 4; ++i) out[i] = d[i];
}

// Grouped args: FP8 operands, bf16 out, MX scales (K-major A/B).
using Cfg = cutlass::detail::Sm1xxBlockScaledConfig<32>;
using LayoutSF_A = decltype(Cfg::deduce_layoutSFA());
using LayoutSF_B = decltype(Cfg::deduce_layoutSFB());
using Shape3 = cute::Shape<int, int, int>;
using StrideK = cute::Stride<int64_t, cute::Int<1>, int64_t>;   // row-major [rows, K]
using StrideCT = cute::Stride<cute::Int<1>, int64_t, int64_t>;  // C^T of a row-major out
using E8 = cutlass::float_e4m3_t;
using SF = cutlass::float_ue8m0_t;
using OutT = cutlass::bfloat16_t;

template <typename StrideC>
struct GroupedArgs {
  std::vector<Shape3> shape;
  std::vector<const E8*> xq, wq;
  std::vector<const SF*> xs, ws;
  std::vector<OutT*> out;
  std::vector<StrideK> sa, sb;
  std::vector<StrideC> sc;
  std::vector<LayoutSF_A> lsa;
  std::vector<LayoutSF_B> lsb;
};

template <typename T>
static T* dev_alloc(size_t n) {
  T* p = nullptr;
  C10_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (n ? n : 1)));
  return p;
}
template <typename T>
static std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> h(n);
  C10_CUDA_CHECK(cudaMemcpy(h.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost));
  return h;
}

template <typename StrideC>
static GroupedArgs<StrideC> run_grouped(mslk::gemm::GroupedGemmInputType type, bool transpose,
                                        int64_t M, int64_t N, int64_t K, std::vector<int32_t> offs,
                                        E8* xq, E8* wq, SF* xs, SF* ws, OutT* out) {
  const int64_t G = offs.size();
  auto* shape = dev_alloc<Shape3>(G);
  auto* xq_p = dev_alloc<const E8*>(G);
  auto* wq_p = dev_alloc<const E8*>(G);
  auto* xs_p = dev_alloc<const SF*>(G);
  auto* ws_p = dev_alloc<const SF*>(G);
  auto* out_p = dev_alloc<OutT*>(G);
  auto* sa = dev_alloc<StrideK>(G);
  auto* sb = dev_alloc<StrideK>(G);
  auto* sc = dev_alloc<StrideC>(G);
  auto* lsa = dev_alloc<LayoutSF_A>(G);
  auto* lsb = dev_alloc<LayoutSF_B>(G);
  auto* d_offs = dev_alloc<int32_t>(G);
  C10_CUDA_CHECK(cudaMemcpy(d_offs, offs.data(), 4 * G, cudaMemcpyHostToDevice));
  mslk::gemm::set_grouped_gemm_args_kernel<Shape3, E8, E8, OutT, SF, StrideK, StrideK, StrideC,
                                           LayoutSF_A, LayoutSF_B, Cfg>
      <<<1, 32>>>(G, M, N, K, shape, xq, xq_p, wq, wq_p, xs, xs_p, 1 << 30, ws, ws_p, out, out_p,
                  sa, sb, sc, d_offs, lsa, lsb, type, transpose);
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  GroupedArgs<StrideC> r{to_host(shape, G), to_host(xq_p, G), to_host(wq_p, G), to_host(xs_p, G),
                         to_host(ws_p, G), to_host(out_p, G), to_host(sa, G), to_host(sb, G),
                         to_host(sc, G), to_host(lsa, G), to_host(lsb, G)};
  for (void* p : std::initializer_list<void*>{shape, xq_p, wq_p, xs_p, ws_p, out_p, sa, sb, sc, lsa, lsb, d_offs})
    cudaFree(p);
  return r;
}

template <typename L>
static bool same_bytes(const L& a, const L& b) {
  return std::memcmp(&a, &b, sizeof(L)) == 0;
}

static void test_grouped_args() {
  E8* xq = reinterpret_cast<E8*>(0x100000);  // pointers are only offset, never read
  E8* wq = reinterpret_cast<E8*>(0x200000);
  SF* xs = reinterpret_cast<SF*>(0x300000);
  SF* ws = reinterpret_cast<SF*>(0x400000);
  OutT* out = reinterpret_cast<OutT*>(0x500000);
  // 2D-3D (MoE): M_total = 300 split 100 / 0 / 200, N = 256, K = 512, transposed (N, M_g, K).
  {
    const int64_t M = 300, N = 256, K = 512;
    auto r = run_grouped<StrideCT>(mslk::gemm::_2D3D, true, M, N, K, {100, 100, 300}, xq, wq, xs,
                                   ws, out);
    const int64_t kc = mslk::roundUp(K / 32, 4);
    CHECK(r.shape[0] == Shape3(256, 100, 512));
    CHECK(r.shape[1] == Shape3(0, 0, 0));
    CHECK(r.shape[2] == Shape3(256, 200, 512));
    CHECK_EQ(r.xq[2], xq + 100 * K);
    CHECK_EQ(r.wq[2], wq + 2 * N * K);
    CHECK_EQ(r.out[2], out + 100 * N);
    CHECK_EQ(r.xs[2], xs + (128 + 0) * kc);  // group 0 pads to 128 rows, group 1 is empty
    CHECK_EQ(r.ws[2], ws + 2 * 256 * kc);
    CHECK_EQ(cute::get<0>(r.sa[2]), K);
    CHECK_EQ(cute::get<0>(r.sb[2]), K);
    CHECK_EQ(cute::get<1>(r.sc[2]), N);  // C^T column stride = N
    CHECK(same_bytes(r.lsa[2], Cfg::tile_atom_to_shape_SFA(cute::make_shape(200, 256, 512, 1))));
    CHECK(same_bytes(r.lsb[0], Cfg::tile_atom_to_shape_SFB(cute::make_shape(100, 256, 512, 1))));
  }
  // 2D-2D (K grouped): K_total = 320 split 64 / 256, M = 128, N = 64, not transposed.
  {
    const int64_t M = 128, N = 64, K = 320;
    auto r = run_grouped<StrideK>(mslk::gemm::_2D2D, false, M, N, K, {64, 320}, xq, wq, xs, ws, out);
    CHECK(r.shape[0] == Shape3(128, 64, 64));
    CHECK(r.shape[1] == Shape3(128, 64, 256));
    CHECK_EQ(r.xq[1], xq + 64);
    CHECK_EQ(r.wq[1], wq + 64);
    CHECK_EQ(r.out[1], out + M * N);
    CHECK_EQ(r.xs[1], xs + 128 * 4);  // round_up(64/32, 4) = 4 scale columns before
    CHECK_EQ(r.ws[1], ws + 128 * 4);  // N = 64 pads to 128 rows
    CHECK_EQ(cute::get<0>(r.sa[1]), K);  // rows of the [M, K_total] slice are K_total apart
    CHECK_EQ(cute::get<0>(r.sc[1]), N);
    CHECK(same_bytes(r.lsa[1], Cfg::tile_atom_to_shape_SFA(cute::make_shape(128, 64, 256, 1))));
  }
}
#endif

int main() {
#ifdef MSLK_TEST_WITH_CUTLASS
  test_epilogue_host();
#endif
  if (c10::cuda::device_count() == 0) {
    std::printf("test_cuda: host part passed (%d failures); no GPU: skipping the rest\n",
                mslk_test::failures());
    return mslk_test::failures() ? 1 : 77;
  }
  const auto* props = at::cuda::getDeviceProperties(0);

  // utils_gpu.h
  CHECK_EQ(mslk::getDeviceArch(), props->major);
  CHECK_EQ(mslk::getSMCount(0, std::nullopt), int64_t{props->multiProcessorCount});
  CHECK_EQ(mslk::getSMCount(0, 7), 7);
  for (int d = 0; d < c10::cuda::device_count(); ++d) {
    CHECK_EQ(mslk::getSMCount(d, std::nullopt), int64_t{at::cuda::getDeviceProperties(d)->multiProcessorCount});
  }
  CHECK_THROWS(mslk::getSMCount(c10::cuda::device_count(), std::nullopt), "out of range");
  {
    int64_t* d = dev_alloc<int64_t>(2);
    pow2_kernel<<<1, 1>>>(d);
    auto h = to_host(d, 2);
    CHECK_EQ(h[0], 1024);
    CHECK_EQ(h[1], -4);
    cudaFree(d);
  }

  // cuda_utilities.cuh
  auto stream = at::cuda::getStreamFromPool();
  CHECK_EQ(mslk::utils::device::get_device_for_stream(stream.stream()), stream.device_index());
  // A raw handle comes back as an external c10 stream wrapping the same handle and device.
  CHECK(mslk::utils::device::to_cuda_stream(stream.stream()).stream() == stream.stream());
  CHECK_EQ(mslk::utils::device::to_cuda_stream(stream.stream()).device_index(), stream.device_index());
  CHECK(mslk::utils::device::to_cuda_stream(stream) == stream);
  const size_t optin = props->sharedMemPerBlockOptin;
  CHECK_THROWS(mslk::utils::device::set_gpu_max_dynamic_shared_memory(big_smem_kernel, optin + 1),
               "allows at most");
  mslk::utils::device::set_gpu_max_dynamic_shared_memory(big_smem_kernel, optin);
  {
    at::Tensor out = at::zeros({256}, at::TensorOptions().device(at::kCUDA));
    MSLK_LAUNCH_KERNEL(big_smem_kernel, 1, 256, optin, stream, out.data_ptr<float>());
    stream.synchronize();
    CHECK_EQ(out[0].item<float>(), 255.0f);
  }

  // KernelLauncher
  {
    const int64_t n = 1000;
    at::Tensor x = at::zeros({n}, at::TensorOptions().device(at::kCUDA));
    MSLK_LAUNCH_KERNEL(add_kernel, dim3(4), dim3(256), 0, stream, PTA_B(x, float, 1, 64), n, 1.5f);
    MSLK_LAUNCH_KERNEL(add_kernel, 4, 256, 0, stream.stream(), PTA_B(x, float, 1, 64), n, 1.0f);
    MSLK_LAUNCH_COOPERATIVE_KERNEL(add_kernel, 4, 256, 0, stream, PTA_B(x, float, 1, 64), n, 0.5f);
    stream.synchronize();
    CHECK_EQ(x.sum().item<float>(), 3.0f * n);
    CHECK_THROWS(MSLK_LAUNCH_KERNEL(add_kernel, 0, 256, 0, stream, PTA_B(x, float, 1, 64), n, 1.0f),
                 "grid.x = 0 is not within the range");
    CHECK_THROWS(MSLK_LAUNCH_KERNEL(add_kernel, 1, dim3(64, 64), 0, stream, PTA_B(x, float, 1, 64), n, 1.0f),
                 "4096 threads, more than the limit");
    CHECK_THROWS(MSLK_LAUNCH_KERNEL(add_kernel, 1, 32, optin + 1, stream, PTA_B(x, float, 1, 64), n, 1.0f),
                 "bytes of shared memory per block");
    at::Tensor x2 = x.view({10, 100});
    CHECK_THROWS(MSLK_LAUNCH_KERNEL(add_kernel, 1, 32, 0, stream, PTA_B(x2, float, 1, 64), n, 1.0f),
                 "[add_kernel]: tensor 'x2' expected 1 dims, got 2");  // names the launch site
    const float ms = mslk::utils::KernelLauncher<false, false, false, false, true>(
                         SOURCE_CONTEXT_CURRENT(spin_kernel))
                         .launch_kernel(spin_kernel, 1, 1, 0, stream, int64_t{1000000});
    CHECK(ms > 0.0f);
  }

  // KernelExecutionTimer
  {
    mslk::utils::KernelExecutionTimer t(stream);
    CHECK_THROWS(t.stop(), "expected state started, got idle");
    CHECK_THROWS(t.elapsedMillis(), "expected state stopped");
    t.start();
    CHECK_THROWS(t.start(), "single-use");
    spin_kernel<<<1, 1, 0, stream.stream()>>>(2000000);
    t.stop();
    CHECK(t.elapsedMillis() > 0.0f);
  }

  // TuningCache picks the faster candidate and persists it.
  {
    const std::string dir = make_temp_dir("mslk_tune_gpu");
    ::setenv("MSLK_CACHE_DIR", dir.c_str(), 1);
    using Fn = std::function<void(int64_t)>;
    const std::unordered_map<std::string, Fn> kernels = {
        {"slow", [](int64_t c) { spin_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(c * 20); }},
        {"fast", [](int64_t c) { spin_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(c); }},
        {"broken", [](int64_t) { throw std::runtime_error("unsupported"); }}};
    {
      mslk::TuningCache cache("gpu_unit");
      cache.findBestKernelMaybeAutotune("shape=1", kernels, int64_t{20000});
    }
    CHECK_EQ(read_all(dir + "/gpu_unit.txt"), std::string("shape=1=fast\n"));
    remove_dir(dir);
  }

#ifdef MSLK_TEST_WITH_CUTLASS
  {
    float* d = dev_alloc<float>(5);
    const float alpha = 0.5f;
    C10_CUDA_CHECK(cudaMemcpy(d + 4, &alpha, 4, cudaMemcpyHostToDevice));
    epilogue_kernel<<<1, 1>>>(Epilogue::Params(d + 4), d);
    auto h = to_host(d, 4);
    CHECK_EQ(h[3], 2.0f);
    cudaFree(d);
  }
  test_grouped_args();
#endif
  return mslk_test::summary("test_cuda");
}
