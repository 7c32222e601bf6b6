#pragma once
// Work below this many element-operations runs on one thread: an OpenMP
// fork/join costs microseconds, and far more when another process holds the
// other core, which made single-token decode of small models 1000x slower.
#include <cstdint>

namespace ggtrain::kernels {

constexpr int64_t kMinParallelWork = int64_t(1) << 15;

}  // namespace ggtrain::kernels
