// TensorAccessorBuilder: wraps a tensor until the launch site is known, then validates it
// (rank, dtype, 32-bit index range) and builds the accessor with the kernel's context in
// every error message. Host glue only (needs ATen ops for the NaN/Inf check).
#pragma once

#include <ATen/ATen.h>
#include <mslk/utils/torch/tensor_accessor.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace mslk::utils {

#ifdef MSLK_MEMCHECK
namespace pta = mslk::utils;
#else
namespace pta = at;
#endif

template <typename T>
at::ScalarType scalar_type_for() {
  return c10::CppTypeToScalarType<std::remove_cv_t<T>>::value;
}

template <typename T, size_t N, size_t index_nbits = 64, bool packed = true,
          template <typename> class PtrTraits = at::DefaultPtrTraits>
struct TensorAccessorBuilder {
  static_assert(index_nbits == 32 || index_nbits == 64, "index_nbits must be 32 or 64");
  static_assert(N > 0, "accessors need at least one dimension");
  // Non-packed accessors point at the tensor's own int64 sizes/strides.
  static_assert(packed || index_nbits == 64, "non-packed accessors support 64-bit indices only");

  using index_t = std::conditional_t<index_nbits == 64, int64_t, int32_t>;
#ifdef MSLK_MEMCHECK
  using packed_accessor_t = mslk::utils::PackedTensorAccessor<T, N, PtrTraits, index_t>;
#else
  using packed_accessor_t = at::GenericPackedTensorAccessor<T, N, PtrTraits, index_t>;
#endif
  using accessor_t = std::conditional_t<packed, packed_accessor_t,
                                        pta::TensorAccessor<T, N, PtrTraits, index_t>>;
  using PtrType = typename PtrTraits<T>::PtrType;

  const std::string_view name;
  const at::Tensor& tensor;  // by reference: the builder lives within one launch expression

  TensorAccessorBuilder(const std::string_view& name, const at::Tensor& tensor) noexcept
      : name(name), tensor(tensor) {}

  void validate_tensor(const std::string_view& context) const {
    TORCH_CHECK(tensor.defined(), context, ": tensor '", name, "' is undefined");
    TORCH_CHECK(tensor.dim() == static_cast<int64_t>(N), context, ": tensor '", name,
                "' expected ", N, " dims, got ", tensor.dim());
    TORCH_CHECK(tensor.scalar_type() == scalar_type_for<T>(), context, ": tensor '", name,
                "' expected dtype ", scalar_type_for<T>(), ", got ", tensor.scalar_type());
    if constexpr (index_nbits == 32) {
      constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
      const int64_t extent = detail::storage_extent<N>(tensor.sizes().data(),
                                                       tensor.strides().data());
      TORCH_CHECK(extent <= kMax, context, ": tensor '", name, "' addresses ", extent,
                  " elements, more than 32-bit indexing allows (", kMax, ")");
    }
  }

  pta::TensorAccessor<T, N, PtrTraits, index_t> build_ta(const std::string_view& context) const {
    static_assert(index_nbits == 64, "non-packed accessors support 64-bit indices only");
    validate_tensor(context);
    const std::string ctx(context), nm(name);
#ifdef MSLK_MEMCHECK
    return pta::TensorAccessor<T, N, PtrTraits, index_t>(
        data(), tensor.sizes().data(), tensor.strides().data(), nm.c_str(), ctx.c_str());
#else
    return pta::TensorAccessor<T, N, PtrTraits, index_t>(data(), tensor.sizes().data(),
                                                         tensor.strides().data());
#endif
  }

  packed_accessor_t build_pta(const std::string_view& context) const {
    validate_tensor(context);
    const std::string ctx(context), nm(name);
#ifdef MSLK_MEMCHECK
    return packed_accessor_t(data(), tensor.sizes().data(), tensor.strides().data(), nm.c_str(),
                             ctx.c_str());
#else
    return packed_accessor_t(data(), tensor.sizes().data(), tensor.strides().data());
#endif
  }

  accessor_t build(const std::string_view& context) const {
    if constexpr (packed) {
      return build_pta(context);
    } else {
      return build_ta(context);
    }
  }

  // NaN/Inf scan of floating tensors (debugging aid: syncs and reads the whole tensor).
  void checkValues(const std::string_view& context) const {
    if (!tensor.defined() || tensor.numel() == 0 ||
        !(at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type()))) {
      return;
    }
    const int64_t nans = at::isnan(tensor).sum().item<int64_t>();
    TORCH_CHECK(nans == 0, context, ": tensor '", name, "' contains ", nans, " NaN value(s)");
    const int64_t infs = at::isinf(tensor).sum().item<int64_t>();
    TORCH_CHECK(infs == 0, context, ": tensor '", name, "' contains ", infs, " Inf value(s)");
  }

 private:
  PtrType data() const { return static_cast<PtrType>(tensor.data_ptr()); }
};

}  // namespace mslk::utils

// Builders named after the tensor variable. In CUDA/HIP TUs packed ones use restrict
// pointers, the usual kernel parameter type (pta::PackedTensorAccessor64<T, N,
// at::RestrictPtrTraits>); ATen declares RestrictPtrTraits only there.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define _MSLK_PTA_TRAITS_ at::RestrictPtrTraits
#else
#define _MSLK_PTA_TRAITS_ at::DefaultPtrTraits
#endif
#define TA_B(TENSOR, T, N, INB) \
  mslk::utils::TensorAccessorBuilder<T, N, INB, false, at::DefaultPtrTraits>(#TENSOR, TENSOR)
#define PTA_B(TENSOR, T, N, INB) \
  mslk::utils::TensorAccessorBuilder<T, N, INB, true, _MSLK_PTA_TRAITS_>(#TENSOR, TENSOR)

// Legacy: build a named packed accessor right away, with FUNC_NAME as the context.
#define MAKE_PTA_WITH_NAME(FUNC_NAME, TENSOR, T, N, INB) \
  PTA_B(TENSOR, T, N, INB).build(FUNC_NAME)
