// Temporary files for the tests (tuning-cache round trips).
#pragma once
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

// POSIX, not std::filesystem: libtorch.so exports broken std::filesystem symbols.
inline std::string make_temp_dir(const char* tag) {
  std::string templ = std::string("/tmp/") + tag + "_XXXXXX";
  char* d = ::mkdtemp(templ.data());
  return d ? std::string(d) : std::string();
}
inline void remove_dir(const std::string& dir) {
  std::system(("rm -rf '" + dir + "'").c_str());
}
inline std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
