#pragma once
// Seconds on the monotonic clock, for durations and rates.
#include <chrono>

namespace ggtrain {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ggtrain
