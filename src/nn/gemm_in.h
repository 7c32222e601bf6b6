#pragma once
#include <cstdint>

#include "kernels/bf16.h"

namespace ggtrain::nn {

// A buffer that feeds GEMMs: float, or bf16 in bf16 training.
template <typename T>
struct GemmIn {
  T* fp32 = nullptr;
  kernels::bf16* bf16 = nullptr;
  GemmIn at(int64_t offset) const { return {fp32 ? fp32 + offset : nullptr, bf16 ? bf16 + offset : nullptr}; }
};

// Calls fn with the pointer a GemmIn holds: kernels that write or read it
// are templated on the element type.
template <typename T, typename Fn>
void with_pointer(const GemmIn<T>& g, Fn&& fn) {
  if (g.bf16) fn(g.bf16);
  else fn(g.fp32);
}

}  // namespace ggtrain::nn
