#pragma once
// Small file and error helpers shared by the tests.
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "util/error.h"

namespace ggtrain::test_support {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes `text` to `path` (creating its folder), replacing what was there.
inline void spit(const std::string& path, const std::string& text) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The ggtrain::Error message `f` throws; "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ggtrain::test_support
