// Single-use CUDA-event timer: start() -> stop() -> elapsedMillis(), each exactly in order.
#pragma once

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace mslk::utils {

class KernelExecutionTimer {
 public:
  explicit KernelExecutionTimer(c10::cuda::CUDAStream stream) : stream_(stream) {}

  KernelExecutionTimer(const KernelExecutionTimer&) = delete;
  KernelExecutionTimer& operator=(const KernelExecutionTimer&) = delete;

  void start() {
    TORCH_CHECK(state_ == State::Idle, "KernelExecutionTimer::start: expected state idle, got ",
                name(state_), " (the timer is single-use)");
    start_.record(stream_);
    state_ = State::Started;
  }

  void stop() {
    TORCH_CHECK(state_ == State::Started,
                "KernelExecutionTimer::stop: expected state started, got ", name(state_));
    stop_.record(stream_);
    state_ = State::Stopped;
  }

  // Waits for the stop event, then returns milliseconds between the two events.
  float elapsedMillis() {
    TORCH_CHECK(state_ == State::Stopped,
                "KernelExecutionTimer::elapsedMillis: expected state stopped, got ", name(state_));
    stop_.synchronize();
    return start_.elapsed_time(stop_);
  }

 private:
  enum class State { Idle, Started, Stopped };
  static const char* name(State s) {
    return s == State::Idle ? "idle" : s == State::Started ? "started" : "stopped";
  }

  c10::cuda::CUDAStream stream_;
  at::cuda::CUDAEvent start_{cudaEventDefault};  // default flags: timing enabled
  at::cuda::CUDAEvent stop_{cudaEventDefault};
  State state_ = State::Idle;
};

}  // namespace mslk::utils
