#pragma once
// A zero-initialised, 64-byte aligned array: the one allocation behind each
// of the model's planned regions (parameters, gradients, moments, activations).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace ggtrain {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : n_(n) {
    if (n == 0) return;
    size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    ptr_.reset(static_cast<T*>(p));
  }
  T* data() { return ptr_.get(); }
  const T* data() const { return ptr_.get(); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return ptr_.get()[i]; }
  const T& operator[](size_t i) const { return ptr_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr_;
  size_t n_ = 0;
};

// Carves consecutive 64-byte aligned regions out of one buffer. Used twice:
// once to size the plan, once to hand out pointers into the allocation.
template <typename T>
class BumpPlan {
 public:
  explicit BumpPlan(T* base = nullptr) : base_(base) {}
  T* take(int64_t n) {
    T* p = base_ ? base_ + used_ : nullptr;
    used_ += (n + 15) / 16 * 16;
    return p;
  }
  int64_t used() const { return used_; }

 private:
  T* base_;
  int64_t used_ = 0;
};

}  // namespace ggtrain
