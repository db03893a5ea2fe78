// SourceContext: where a kernel launch happened, plus a label, for error messages and DSA.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#if __has_include(<source_location>) && __cplusplus >= 202002L
#include <source_location>
#define MSLK_STD_SOURCE_LOCATION 1
#else
#include <experimental/source_location>
#endif

namespace mslk::utils {

#ifdef MSLK_STD_SOURCE_LOCATION
using source_location = std::source_location;
#else
using source_location = std::experimental::source_location;
#endif

struct SourceContext {
  const source_location location;
  // Usually the kernel name.
  const std::string_view summary;
  // Template that generated the calling file (codegen), or empty.
  const std::string_view template_;
  // Compile-time file string handed to torch's DSA registry (it keeps the pointer).
  const std::string_view dsa_file_descriptor_;

  constexpr SourceContext(
      const source_location& location,
      const std::string_view& summary,
      const std::string_view& template_filepath,
      const std::string_view& dsa_file_descriptor) noexcept
      : location(location),
        summary(summary),
        template_(template_filepath),
        dsa_file_descriptor_(dsa_file_descriptor) {}

  // "[template] [file(line:col)] [function] [summary]"
  std::string description() const {
    std::ostringstream ss;
    if (!template_.empty()) {
      ss << "[" << template_ << "] ";
    }
    ss << "[" << location.file_name() << "(" << location.line() << ":" << location.column()
       << ")] [" << location.function_name() << "] [" << summary << "]";
    return ss.str();
  }

  // The caller owns the storage behind `summary`; it must outlive the copy.
  constexpr SourceContext withSummary(const std::string_view& summary) const noexcept {
    return SourceContext(location, summary, template_, dsa_file_descriptor_);
  }
};

}  // namespace mslk::utils

// Code generators define __TEMPLATE_SOURCE_FILE__ so messages name the template too.
#ifdef __TEMPLATE_SOURCE_FILE__
#define _MSLK_TFILE_ __TEMPLATE_SOURCE_FILE__
#define _MSLK_DSA_FILESRC_ "[" __TEMPLATE_SOURCE_FILE__ "] " __FILE__
#else
#define _MSLK_TFILE_ ""
#define _MSLK_DSA_FILESRC_ __FILE__
#endif

// A macro (not a function) so that file/line/function are the caller's.
#define SOURCE_CONTEXT_CURRENT(LABEL)                                                  \
  mslk::utils::SourceContext(                                                          \
      mslk::utils::source_location::current(), #LABEL, _MSLK_TFILE_, _MSLK_DSA_FILESRC_)
