// LinearCombinationOnDevice: CUTLASS 2.x epilogue D = alpha * acc + beta * C whose alpha
// (and beta) may live in device memory. Unlike cutlass's LinearCombination, which reads
// *alpha_ptr when the functor is built, this one keeps the pointer and reads it in
// operator(): the functor can be built on the host from a device pointer, and the scale
// can be produced by an earlier kernel on the same stream (no host sync, graph-safe).
#pragma once

#include <cutlass/array.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination_params.h>
#include <cutlass/epilogue/thread/scale_type.h>
#include <cutlass/functional.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/numeric_types.h>

namespace cutlass::epilogue::thread {

template <typename ElementOutput_, int Count, typename ElementAccumulator_ = ElementOutput_,
          typename ElementCompute_ = ElementOutput_, ScaleType::Kind Scale = ScaleType::Default,
          FloatRoundStyle Round = FloatRoundStyle::round_to_nearest>
class LinearCombinationOnDevice {
 public:
  using ElementOutput = ElementOutput_;
  using ElementAccumulator = ElementAccumulator_;
  using ElementCompute = ElementCompute_;

  static int const kCount = Count;
  static const ScaleType::Kind kScale = Scale;
  static FloatRoundStyle const kRound = Round;

  using FragmentOutput = Array<ElementOutput, kCount>;
  using FragmentAccumulator = Array<ElementAccumulator, kCount>;
  using ComputeFragment = Array<ElementCompute, kCount>;
  using ParamsBase = LinearCombinationParams;

  struct Params : ParamsBase {
    ElementCompute alpha;
    ElementCompute beta;
    ElementCompute const* alpha_ptr;  // when set, overrides alpha
    ElementCompute const* beta_ptr;   // when set, overrides beta

    CUTLASS_HOST_DEVICE Params()
        : ParamsBase(ElementCompute(1), ElementCompute(0)),
          alpha(ElementCompute(1)), beta(ElementCompute(0)), alpha_ptr(nullptr), beta_ptr(nullptr) {}
    CUTLASS_HOST_DEVICE Params(ElementCompute alpha, ElementCompute beta)
        : ParamsBase(alpha, beta), alpha(alpha), beta(beta), alpha_ptr(nullptr), beta_ptr(nullptr) {}
    CUTLASS_HOST_DEVICE Params(ElementCompute alpha)
        : ParamsBase(alpha, ElementCompute(0)),
          alpha(alpha), beta(ElementCompute(0)), alpha_ptr(nullptr), beta_ptr(nullptr) {}
    CUTLASS_HOST_DEVICE Params(ElementCompute const* alpha_ptr, ElementCompute const* beta_ptr)
        : ParamsBase(ElementCompute(0), ElementCompute(0)),
          alpha(ElementCompute(0)), beta(ElementCompute(0)), alpha_ptr(alpha_ptr), beta_ptr(beta_ptr) {}
    CUTLASS_HOST_DEVICE Params(ElementCompute const* alpha_ptr)
        : ParamsBase(ElementCompute(0), ElementCompute(0)),
          alpha(ElementCompute(0)), beta(ElementCompute(0)), alpha_ptr(alpha_ptr), beta_ptr(nullptr) {}
    CUTLASS_HOST_DEVICE Params(ParamsBase const& base)
        : ParamsBase(base), alpha_ptr(nullptr), beta_ptr(nullptr) {
      alpha = reinterpret_cast<ElementCompute const&>(base.alpha_data);
      beta = reinterpret_cast<ElementCompute const&>(base.beta_data);
    }
  };

  CUTLASS_HOST_DEVICE explicit LinearCombinationOnDevice(Params const& params)
      : alpha_(params.alpha), beta_(params.beta), alpha_ptr_(params.alpha_ptr),
        beta_ptr_(params.beta_ptr) {}

  CUTLASS_HOST_DEVICE bool is_source_needed() const {
    if (Scale == ScaleType::NoBetaScaling) {
      return true;
    }
    if (Scale == ScaleType::OnlyAlphaScaling || Scale == ScaleType::Nothing) {
      return false;
    }
    // A device beta is unknown here: assume it may be non-zero.
    return beta_ptr_ != nullptr || beta_ != ElementCompute(0);
  }

  // Serial split-K: partitions after the first accumulate onto the partial result.
  CUTLASS_HOST_DEVICE void set_k_partition(int k_partition, int /*k_partition_count*/) {
    if (k_partition) {
      beta_ = ElementCompute(1);
      beta_ptr_ = nullptr;
    }
  }

  CUTLASS_HOST_DEVICE FragmentOutput operator()(FragmentAccumulator const& accumulator,
                                                FragmentOutput const& source) const {
    NumericArrayConverter<ElementCompute, ElementOutput, kCount, Round> source_converter;
    NumericArrayConverter<ElementCompute, ElementAccumulator, kCount, Round> acc_converter;
    NumericArrayConverter<ElementOutput, ElementCompute, kCount, Round> out_converter;
    ComputeFragment acc = acc_converter(accumulator);
    if (Scale == ScaleType::Nothing) {
      return out_converter(acc);
    }
    ComputeFragment src = source_converter(source);
    ComputeFragment x;
    if (Scale == ScaleType::NoBetaScaling) {
      x = src;
    } else {
      x = multiplies<ComputeFragment>{}(beta(), src);
    }
    return out_converter(multiply_add<ComputeFragment>{}(alpha(), acc, x));
  }

  CUTLASS_HOST_DEVICE FragmentOutput operator()(FragmentAccumulator const& accumulator) const {
    NumericArrayConverter<ElementCompute, ElementAccumulator, kCount, Round> acc_converter;
    NumericArrayConverter<ElementOutput, ElementCompute, kCount, Round> out_converter;
    ComputeFragment acc = acc_converter(accumulator);
    if (Scale == ScaleType::Nothing) {
      return out_converter(acc);
    }
    return out_converter(multiplies<ComputeFragment>{}(alpha(), acc));
  }

 private:
  CUTLASS_HOST_DEVICE ElementCompute alpha() const { return alpha_ptr_ ? *alpha_ptr_ : alpha_; }
  CUTLASS_HOST_DEVICE ElementCompute beta() const { return beta_ptr_ ? *beta_ptr_ : beta_; }

  ElementCompute alpha_;
  ElementCompute beta_;
  ElementCompute const* alpha_ptr_;
  ElementCompute const* beta_ptr_;
};

}  // namespace cutlass::epilogue::thread
