// Tensor accessors. With MSLK_MEMCHECK, `pta::` names mslk::utils' accessors, which carry
// the tensor's name and the launch context and bounds-check every index (host: throws
// c10::IndexError; device: prints and traps). Otherwise `pta::` is plain ATen, zero cost.
#pragma once

#include <ATen/core/TensorAccessor.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <type_traits>

using overflow_safe_int_t = int64_t;

namespace mslk::utils {

template <typename T>
using DefaultPtrTraits = at::DefaultPtrTraits<T>;
#if defined(__CUDACC__) || defined(__HIPCC__)
template <typename T>
using RestrictPtrTraits = at::RestrictPtrTraits<T>;
#endif

constexpr size_t NAME_MAX_LEN = 32;
constexpr size_t CONTEXT_MAX_LEN = 256;

namespace detail {

// Truncating copy that always terminates (names live inside the accessor, by value).
C10_HOST_DEVICE inline void copy_str(char* dst, const char* src, size_t cap) {
  size_t i = 0;
  if (src != nullptr) {
    for (; i + 1 < cap && src[i] != '\0'; ++i) {
      dst[i] = src[i];
    }
  }
  dst[i] = '\0';
}

C10_HOST_DEVICE inline void index_error(const char* name, const char* context, const char* what,
                                        int64_t idx, int64_t bound) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  printf("[mslk] %s: tensor '%s': %s %lld is out of bounds [0, %lld)\n", context, name, what,
         static_cast<long long>(idx), static_cast<long long>(bound));
  __trap();
#else
  TORCH_CHECK_INDEX(false, context, ": tensor '", name, "': ", what, " ", idx,
                    " is out of bounds [0, ", bound, ")");
#endif
}

// Storage extent addressed by a strided view: 1 + max offset (0 when empty).
template <size_t N, typename index_t>
C10_HOST_DEVICE inline int64_t storage_extent(const index_t* sizes, const index_t* strides) {
  int64_t extent = 1;
  for (size_t i = 0; i < N; ++i) {
    if (sizes[i] == 0) {
      return 0;
    }
    extent += static_cast<int64_t>(sizes[i] - 1) * static_cast<int64_t>(strides[i]);
  }
  return extent;
}

}  // namespace detail

// Shared by both accessor kinds: data pointer, diagnostics and the flat bounds check.
template <typename T, template <typename U> class PtrTraits, typename index_t>
class AccessorDiagnostics {
 public:
  using PtrType = typename PtrTraits<T>::PtrType;

  C10_HOST_DEVICE const char* name() const { return name_; }
  C10_HOST_DEVICE const char* context() const { return context_; }
  C10_HOST_DEVICE PtrType data() { return data_; }
  C10_HOST_DEVICE const PtrType data() const { return data_; }
  // Elements addressed in storage (equals the element count for contiguous tensors).
  C10_HOST_DEVICE size_t numel() const { return static_cast<size_t>(numel_); }

  // Flat access into the addressed storage, bounds-checked.
  C10_HOST_DEVICE T& at(index_t idx) const {
    check(idx, numel_, "flat index");
    return data_[idx];
  }

 protected:
  C10_HOST_DEVICE AccessorDiagnostics(PtrType data, int64_t numel, const char* name,
                                      const char* context)
      : data_(data), numel_(numel) {
    detail::copy_str(name_, name, NAME_MAX_LEN);
    detail::copy_str(context_, context, CONTEXT_MAX_LEN);
  }
  C10_HOST_DEVICE void check(int64_t idx, int64_t bound, const char* what) const {
    if (idx < 0 || idx >= bound) {
      detail::index_error(name_, context_, what, idx, bound);
    }
  }

  PtrType data_;
  int64_t numel_;
  char name_[NAME_MAX_LEN];
  char context_[CONTEXT_MAX_LEN];
};

// Views external size/stride storage (like at::TensorAccessor): host-side or per-thread use.
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class TensorAccessor : public AccessorDiagnostics<T, PtrTraits, index_t> {
  using Base = AccessorDiagnostics<T, PtrTraits, index_t>;

 public:
  using PtrType = typename Base::PtrType;

  C10_HOST_DEVICE TensorAccessor(PtrType data, const index_t* sizes, const index_t* strides,
                                 const char* name = nullptr, const char* context = nullptr)
      : Base(data, detail::storage_extent<N>(sizes, strides), name, context),
        sizes_(sizes),
        strides_(strides) {}

  C10_HOST_DEVICE index_t size(index_t i) const { return sizes_[i]; }
  C10_HOST_DEVICE index_t stride(index_t i) const { return strides_[i]; }

  C10_HOST_DEVICE decltype(auto) operator[](index_t i) const {
    this->check(i, sizes_[0], "index");
    if constexpr (N == 1) {
      return static_cast<T&>(this->data_[strides_[0] * i]);
    } else {
      return TensorAccessor<T, N - 1, PtrTraits, index_t>(
          this->data_ + strides_[0] * i, sizes_ + 1, strides_ + 1, this->name_, this->context_);
    }
  }

 protected:
  const index_t* sizes_;
  const index_t* strides_;
};

// Owns sizes/strides by value, so it can be passed to a kernel as an argument.
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class PackedTensorAccessor : public AccessorDiagnostics<T, PtrTraits, index_t> {
  using Base = AccessorDiagnostics<T, PtrTraits, index_t>;

 public:
  using PtrType = typename Base::PtrType;

  C10_HOST_DEVICE PackedTensorAccessor(PtrType data, const index_t* sizes, const index_t* strides,
                                       const char* name = nullptr, const char* context = nullptr)
      : Base(data, detail::storage_extent<N>(sizes, strides), name, context) {
    for (size_t i = 0; i < N; ++i) {
      sizes_[i] = sizes[i];
      strides_[i] = strides[i];
    }
  }

  // From int64 sizes/strides into a narrower index_t; host: checks every value fits.
  template <typename source_index_t = int64_t,
            std::enable_if_t<!std::is_same_v<source_index_t, index_t>, int> = 0>
  C10_HOST_DEVICE PackedTensorAccessor(PtrType data, const source_index_t* sizes,
                                       const source_index_t* strides, const char* name = nullptr,
                                       const char* context = nullptr)
      : Base(data, detail::storage_extent<N>(sizes, strides), name, context) {
    for (size_t i = 0; i < N; ++i) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
      TORCH_CHECK(sizes[i] <= std::numeric_limits<index_t>::max() &&
                      strides[i] <= std::numeric_limits<index_t>::max(),
                  context ? context : "", ": tensor '", name ? name : "", "': size ", sizes[i],
                  " / stride ", strides[i], " of dim ", i, " does not fit the ",
                  sizeof(index_t) * 8, "-bit index type");
#endif
      sizes_[i] = static_cast<index_t>(sizes[i]);
      strides_[i] = static_cast<index_t>(strides[i]);
    }
  }

  C10_HOST_DEVICE index_t size(index_t i) const { return sizes_[i]; }
  C10_HOST_DEVICE index_t stride(index_t i) const { return strides_[i]; }

  C10_HOST_DEVICE decltype(auto) operator[](index_t i) const {
    this->check(i, sizes_[0], "index");
    if constexpr (N == 1) {
      return static_cast<T&>(this->data_[strides_[0] * i]);
    } else {
      return TensorAccessor<T, N - 1, PtrTraits, index_t>(
          this->data_ + strides_[0] * i, sizes_ + 1, strides_ + 1, this->name_, this->context_);
    }
  }

  // Host-side: the same storage with two dims exchanged.
  PackedTensorAccessor transpose(index_t dim1, index_t dim2) const {
    TORCH_CHECK_INDEX(dim1 >= 0 && dim1 < static_cast<index_t>(N) && dim2 >= 0 &&
                          dim2 < static_cast<index_t>(N),
                      this->context_, ": tensor '", this->name_, "': transpose dims (", dim1,
                      ", ", dim2, ") out of range for a ", N, "-d accessor");
    PackedTensorAccessor result(*this);
    std::swap(result.sizes_[dim1], result.sizes_[dim2]);
    std::swap(result.strides_[dim1], result.strides_[dim2]);
    return result;
  }

 protected:
  index_t sizes_[N];
  index_t strides_[N];
};

template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor32 = PackedTensorAccessor<T, N, PtrTraits, int32_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor64 = PackedTensorAccessor<T, N, PtrTraits, int64_t>;

}  // namespace mslk::utils

#ifdef MSLK_MEMCHECK
namespace pta = mslk::utils;
#else
namespace pta = at;
// ATen's own `PackedTensorAccessor` name is deprecated; keep the short name usable.
template <typename T, size_t N, template <typename U> class PtrTraits = at::DefaultPtrTraits,
          typename index_t = int64_t>
using PackedTensorAccessor = at::GenericPackedTensorAccessor<T, N, PtrTraits, index_t>;
#endif
