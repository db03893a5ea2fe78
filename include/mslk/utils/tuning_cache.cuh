// TuningCache: per-shape autotuning with a persistent winner table.
// File: <MSLK_CACHE_DIR or $HOME/.mslk>/<kernelName>.txt, one "cache_key=kernel_name" per
// line (split at the last '=', so keys may contain '='). Env switches (presence-based, read
// through mslk/utils/env.h):
//   MSLK_AUTOTUNE_USE_CUDA_GRAPH  time candidates as one CUDA-graph replay (offline tuning)
//   MSLK_AUTOTUNE_COLLECT_STATS   append every candidate's time to <kernelName>_detailed.txt
// Unlike the reference, any process/device may write: saves merge with the file on disk
// and replace it atomically (write a temp file, rename), so concurrent ranks never tear it.
// POSIX file calls, not std::filesystem: libtorch.so exports its own, broken copies of the
// std::filesystem symbols, and calls from code linked against it can land there (segfault).
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mslk/utils/env.h>

namespace mslk {

class TuningCache final {
 public:
  // kernelName names the cache file: one per kernel family.
  explicit TuningCache(const std::string& kernelName)
      : useCudaGraph_(env::present(env::Var::kAutotuneUseCudaGraph)),
        collectStats_(env::present(env::Var::kAutotuneCollectStats)),
        cacheDirectory_(cacheDirectory()),
        cacheFilename_(cacheDirectory_ + "/" + kernelName + ".txt"),
        detailedFilename_(cacheDirectory_ + "/" + kernelName + "_detailed.txt") {
    TORCH_CHECK(!kernelName.empty() && kernelName.find('/') == std::string::npos,
                "TuningCache: kernelName must be a non-empty file name, got '", kernelName, "'");
    makeDirectories(cacheDirectory_);
    cache_ = readFile(cacheFilename_);
  }

  TuningCache(const TuningCache&) = delete;
  TuningCache& operator=(const TuningCache&) = delete;

  ~TuningCache() {
    try {
      save();
    } catch (...) {
      // never throw from a destructor; entries were already saved when tuned
    }
  }

  // Returns the cached winner for cache_key, or times every candidate with args on the
  // current stream, caches the fastest and persists it. A cached name that is no longer
  // among `kernels` (stale file from another build) is re-tuned.
  template <typename Kernel, typename... Args>
  Kernel findBestKernelMaybeAutotune(const std::string& cache_key,
                                     const std::unordered_map<std::string, Kernel>& kernels,
                                     Args&&... args) {
    TORCH_CHECK(!kernels.empty(), "TuningCache: no candidate kernels for key '", cache_key, "'");
    TORCH_CHECK(cache_key.find('\n') == std::string::npos && !cache_key.empty(),
                "TuningCache: cache key must be non-empty and single-line, got '", cache_key, "'");
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(cache_key); it != cache_.end()) {
      if (auto k = kernels.find(it->second); k != kernels.end()) {
        return k->second;
      }
      std::cerr << "[mslk] TuningCache " << cacheFilename_ << ": cached kernel '"
                << it->second << "' for key '" << cache_key << "' is unknown; re-tuning\n";
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string best;
    float best_ms = FLT_MAX;
    for (const auto& [name, kernel] : kernels) {
      TORCH_CHECK(name.find('=') == std::string::npos && name.find('\n') == std::string::npos,
                  "TuningCache: kernel name '", name, "' must not contain '=' or a newline");
      const float ms = benchmark(name, kernel, args...);
      if (collectStats_) {
        stats_[cache_key].emplace_back(name, ms);
      }
      if (ms < best_ms) {
        best_ms = ms;
        best = name;
      }
    }
    TORCH_CHECK(!best.empty(), "TuningCache: every candidate failed for key '", cache_key, "'");
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - t0);
    std::cerr << "[mslk] tuned " << best << " (" << best_ms << " ms) for key " << cache_key
              << " in " << elapsed.count() << " ms\n";
    cache_[cache_key] = best;
    dirty_ = true;
    saveLocked();
    return kernels.at(best);
  }

  // Merges this cache into the file on disk (entries tuned here win).
  void save() {
    std::lock_guard<std::mutex> lock(mutex_);
    saveLocked();
  }

  const std::string& cacheFilename() const { return cacheFilename_; }

  static std::string cacheDirectory() {
    if (std::string dir = env::text(env::Var::kCacheDir, ""); !dir.empty()) {
      return dir;
    }
    const std::string home = env::text(env::Var::kHome, "");
    TORCH_CHECK(!home.empty(), "TuningCache: set MSLK_CACHE_DIR or HOME to locate the cache directory");
    return home + "/.mslk";
  }

 private:
  static bool isDirectory(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  // mkdir -p; a concurrent creator winning the race is fine.
  static void makeDirectories(const std::string& dir) {
    for (size_t pos = 1; pos != std::string::npos;) {
      pos = dir.find('/', pos + 1);
      const std::string prefix = dir.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        break;
      }
    }
    TORCH_CHECK(isDirectory(dir), "TuningCache: could not create cache directory ", dir, ": ",
                std::strerror(errno));
  }

  static std::map<std::string, std::string> readFile(const std::string& path) {
    std::map<std::string, std::string> entries;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const size_t pos = line.rfind('=');
      if (pos != std::string::npos && pos > 0 && pos + 1 < line.size()) {
        entries[line.substr(0, pos)] = line.substr(pos + 1);
      }
    }
    return entries;
  }

  void saveLocked() {
    if (dirty_) {
      auto merged = readFile(cacheFilename_);
      for (const auto& [k, v] : cache_) {
        merged[k] = v;
      }
      const std::string tmp = cacheFilename_ + ".tmp." + std::to_string(::getpid());
      {
        std::ofstream out(tmp, std::ios::trunc);
        TORCH_CHECK(out.is_open(), "TuningCache: cannot write ", tmp);
        for (const auto& [k, v] : merged) {
          out << k << '=' << v << '\n';
        }
      }
      TORCH_CHECK(std::rename(tmp.c_str(), cacheFilename_.c_str()) == 0, "TuningCache: cannot replace ",
                  cacheFilename_, ": ", std::strerror(errno));
      dirty_ = false;
    }
    if (!stats_.empty()) {
      std::ofstream out(detailedFilename_, std::ios::app);
      for (auto& [key, times] : stats_) {
        std::sort(times.begin(), times.end(),
                  [](const auto& a, const auto& b) { return a.second < b.second; });
        for (const auto& [name, ms] : times) {
          out << key << ',' << name << ',' << ms << '\n';
        }
      }
      stats_.clear();
    }
  }

  // Mean ms per call on the current stream; FLT_MAX if the candidate throws (e.g. an
  // unsupported config), so it is skipped rather than failing the tuning.
  template <typename Kernel, typename... Args>
  float benchmark(const std::string& name, const Kernel& kernel, Args&... args) {
    try {
      kernel(args...);  // warm-up
    } catch (const std::exception& e) {
      std::cerr << "[mslk] TuningCache: candidate " << name << " failed, skipped: " << e.what()
                << '\n';
      return FLT_MAX;
    }
    // Events live per call: they bind to the device of their first record.
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    auto stream = at::cuda::getCurrentCUDAStream();
    start.record(stream);
    kernel(args...);
    stop.record(stream);
    stop.synchronize();
    const int iters = std::max(1, static_cast<int>(10.0f / std::max(start.elapsed_time(stop), 1e-3f)));

    if (useCudaGraph_) {
      at::cuda::CUDAGraph graph;
      {
        // Capture needs a non-default stream; relaxed mode leaves other threads' CUDA calls
        // (NCCL, event queries) alone.
        const c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool(true));
        graph.capture_begin({0, 0}, cudaStreamCaptureModeRelaxed);
        for (int i = 0; i < iters; ++i) {
          kernel(args...);
        }
        graph.capture_end();
      }
      at::cuda::CUDAEvent gs(cudaEventDefault), ge(cudaEventDefault);
      gs.record(stream);
      graph.replay();
      ge.record(stream);
      ge.synchronize();
      return gs.elapsed_time(ge) / iters;
    }
    at::cuda::CUDAEvent ls(cudaEventDefault), le(cudaEventDefault);
    ls.record(stream);
    for (int i = 0; i < iters; ++i) {
      kernel(args...);
    }
    le.record(stream);
    le.synchronize();
    return ls.elapsed_time(le) / iters;
  }

  const bool useCudaGraph_;
  const bool collectStats_;
  const std::string cacheDirectory_;
  const std::string cacheFilename_;
  const std::string detailedFilename_;
  std::mutex mutex_;
  std::map<std::string, std::string> cache_;  // cache key -> winning kernel name
  bool dirty_ = false;
  std::map<std::string, std::vector<std::pair<std::string, float>>> stats_;
};

}  // namespace mslk
