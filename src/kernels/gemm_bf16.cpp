#include "kernels/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/onednn.h"
#include "util/error.h"

namespace ggtrain::kernels {

namespace {

// The operands' type (bf16 or f32), the transposes, M, N, K, the leading
// dimensions, alpha, beta.
using Key =
    std::tuple<dnnl::memory::data_type, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float>;

struct Engine {
  bool limited = (limit_onednn_to_build_level(), true);  // before the engine below
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, dnnl::matmul> cache;
};

std::atomic<int64_t> flops_done{0};

Engine& engine() {
  static Engine e;
  return e;
}

// A [M, K] operand stored row-major with leading dimension ld, or its
// transpose stored that way: strides say which.
dnnl::memory::desc operand(int64_t rows, int64_t cols, bool trans, int64_t ld, dnnl::memory::data_type t) {
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, t, strides);
}

dnnl::matmul make_matmul(const Key& k, dnnl::engine& eng) {
  const auto [in, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta] = k;
  using dt = dnnl::memory::data_type;
  const auto a = operand(M, K, ta, lda, in), b = operand(K, N, tb, ldb, in);
  const auto c = dnnl::memory::desc({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  if (beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, eng));
}

// Whether this CPU has a oneDNN bf16 matmul at all: AVX-512 machines do
// (native or emulated), AVX2 ones do not.
bool has_bf16_matmul() {
  static const bool has = [] {
    try {
      make_matmul(Key{dnnl::memory::data_type::bf16, false, false, 4, 4, 4, 4, 4, 4, 1.f, 0.f}, engine().eng);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// The stored elements of a rows x cols operand (or of its transpose) with
// leading dimension ld, widened to float: exact, as every bf16 is a float.
const float* widened(const bf16* x, int64_t rows, int64_t cols, bool trans, int64_t ld, std::vector<float>& out) {
  const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
  const int64_t n = (stored_rows - 1) * ld + stored_cols;
  out.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = from_bf16(x[i]);
  return out.data();
}

// C = alpha op(A) op(B) (+ C) by the key's primitive, made on first use and kept.
void run_matmul(const Key& key, const void* A, const void* B, float* C) {
  const auto [in, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta] = key;
  Engine& e = engine();
  dnnl::matmul mm;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.cache.find(key);
    if (it == e.cache.end()) {
      try {
        it = e.cache.emplace(key, make_matmul(key, e.eng)).first;
      } catch (const dnnl::error& err) {
        fail("oneDNN matmul M={} N={} K={} cannot be created: {}", M, N, K, err.what());
      }
    }
    mm = it->second;
  }
  dnnl::memory a(operand(M, K, ta, lda, in), e.eng, const_cast<void*>(A));
  dnnl::memory b(operand(K, N, tb, ldb, in), e.eng, const_cast<void*>(B));
  dnnl::memory c(dnnl::memory::desc({M, N}, dnnl::memory::data_type::f32, dnnl::memory::dims{ldc, 1}), e.eng, C);
  thread_local dnnl::stream stream(e.eng);  // a stream is not shared between threads
  mm.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  stream.wait();
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (beta != 0.f && beta != 1.f) fail("gemm_bf16: beta must be 0 or 1, got {}", beta);
  flops_done.fetch_add(2 * M * N * std::max<int64_t>(K, 0), std::memory_order_relaxed);
  if (K <= 0) {  // oneDNN rejects empty reductions: C = beta C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
    return;
  }
  if (!has_bf16_matmul()) {
    // Without AVX-512 the operands go to the float GEMM widened: a product
    // of two bf16 values is exact in float, so this is the same computation
    // with float accumulation, without bf16's speed.
    thread_local std::vector<float> a, b;
    gemm(trans_a, trans_b, M, N, K, alpha, widened(A, M, K, trans_a, lda, a), lda, widened(B, K, N, trans_b, ldb, b),
         ldb, beta, C, ldc);
    return;
  }
  run_matmul(Key{dnnl::memory::data_type::bf16, trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta}, A, B, C);
}

void gemm_matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || (beta != 0.f && beta != 1.f))  // shapes the primitive does not take
    return gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  run_matmul(Key{dnnl::memory::data_type::f32, trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta}, A, B, C);
}

// Through onednn_isa(), which sets the level's limit before it asks: asking
// oneDNN first would fix its instruction set at the CPU's own.
bool bf16_gemm_is_native() {
  const std::string isa = onednn_isa();
  return isa == "avx512_core_bf16" || isa == "avx512_core_amx";
}

int64_t bf16_gemm_flops() { return flops_done.load(std::memory_order_relaxed); }

}  // namespace ggtrain::kernels
