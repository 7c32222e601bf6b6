#pragma once
// One exception type for every user-facing failure: the message always names
// the file (or object) and the field that was wrong, so the CLI can print it
// as-is and exit non-zero.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ggtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// errno as text, for I/O failures.
std::string errno_text(int err);

}  // namespace ggtrain
