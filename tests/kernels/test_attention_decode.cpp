// Decode attention over the KV cache (kernels/attention_decode) against a
// double-precision softmax over the keys and values the cache holds, for
// both cache types, groups of query heads, head sizes with and without a
// register-held kernel, single queries split across threads and batches
// after a kept prefix; and the decoder's fp16 cache.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "infer/kv_cache.h"
#include "support/compare.h"

using namespace ggtrain;
using test_support::compare;
using test_support::within_rel_to_max;

namespace {

struct Case {
  kernels::CacheType type;
  int64_t n_heads, n_kv_heads, d_head, threads;
  int64_t window = 0;  // sliding window (0: none)
};

std::string name(const Case& c) {
  return std::string(c.type == kernels::CacheType::kF16 ? "f16" : "f32") + " heads " + std::to_string(c.n_heads) + "/" +
         std::to_string(c.n_kv_heads) + " d_head " + std::to_string(c.d_head) + " threads " +
         std::to_string(c.threads) + (c.window ? " window " + std::to_string(c.window) : "");
}

// Causal attention in double of queries q [n, H*hd] at positions pos.. over
// the keys and values k, v [positions, KVH*hd] (the last c.window of them
// with a window).
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              const Case& c, int64_t pos, int64_t n) {
  const int64_t hd = c.d_head, QD = c.n_heads * hd, KD = c.n_kv_heads * hd, G = c.n_heads / c.n_kv_heads;
  std::vector<double> out(size_t(n * QD));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const int64_t g = h / G, keys = pos + i + 1, first = c.window ? std::max<int64_t>(0, keys - c.window) : 0;
      std::vector<double> s(static_cast<size_t>(keys), -INFINITY);
      double m = -INFINITY, l = 0;
      for (int64_t j = first; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[size_t(i * QD + h * hd + d)]) * k[size_t(j * KD + g * hd + d)];
        s[size_t(j)] = dot / std::sqrt(double(hd));
        m = std::max(m, s[size_t(j)]);
      }
      for (auto& x : s) l += (x = std::exp(x - m));
      for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (int64_t j = 0; j < keys; ++j) o += s[size_t(j)] * v[size_t(j * KD + g * hd + d)];
        out[size_t(i * QD + h * hd + d)] = o / l;
      }
    }
  return out;
}

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// The compiler's own half-precision type, which rounds to nearest even:
// _Float16 (GCC 12 has it in C++ on x86-64 only), __fp16 on arm64 (IEEE
// format unless told otherwise).
#if defined(__aarch64__)
using CompilerHalf = __fp16;
#else
using CompilerHalf = _Float16;
#endif

// x as a cache of this type keeps it: fp16 rounds to nearest even.
std::vector<float> held_by_cache(const std::vector<float>& x, kernels::CacheType type) {
  if (type == kernels::CacheType::kF32) return x;
  std::vector<float> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = float(static_cast<CompilerHalf>(x[i]));
  return h;
}

class AttentionDecode : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionDecode, EqualsDoubleSoftmaxOverTheCachedKeys) {
  const Case c = GetParam();
  const kernels::DecodeAttnShape shape{c.n_heads, c.n_kv_heads, c.d_head, c.window};
  const int64_t n_ctx = 330, layers = 2, QD = c.n_heads * c.d_head, KD = c.n_kv_heads * c.d_head;
  std::mt19937 rng(7);
  // Keys and values of every position, stored into layer 1 (layer 0 stays
  // zero: a wrong layer offset reads it) in pieces as a decoder would.
  std::vector<float> k = random_vector(size_t(n_ctx * KD), rng, 1.5f), v = random_vector(k.size(), rng, 1.0f);
  // What an fp16 cache must hold, rounded by the compiler's half type (not
  // ggtrain's conversion): the reference attends over these. Control: the
  // reference over the unrounded values misses the fp16 cases by 3.4e-4 to
  // 6.1e-4 of max |ref|, 85x the limit below.
  const std::vector<float> k_held = held_by_cache(k, c.type), v_held = held_by_cache(v, c.type);
  infer::KvCache cache(c.type, layers, n_ctx, shape);
  for (int64_t p0 : {0, 20, 21, 100}) {
    const int64_t p1 = p0 == 0 ? 20 : p0 == 20 ? 21 : p0 == 21 ? 100 : n_ctx;
    cache.store(1, k.data() + p0 * KD, v.data() + p0 * KD, p0, p1 - p0);
  }
  // store() rounds its input in place to what it keeps.
  ASSERT_TRUE(k == k_held && v == v_held) << name(c) << ": store() rounded otherwise than the compiler's half type";
  std::vector<float> scratch(size_t(kernels::attention_decode_scratch(shape, n_ctx, c.threads)));
  struct Step {
    int64_t pos, n;
  };
  for (Step st : {Step{0, 1}, Step{15, 1}, Step{16, 1}, Step{63, 1}, Step{64, 1}, Step{200, 1}, Step{329, 1},
                  Step{37, 5}, Step{300, 30}}) {
    const auto q = random_vector(size_t(st.n * QD), rng, 1.5f);
    std::vector<float> out(q.size(), NAN);
    kernels::attention_decode(out.data(), q.data(), cache.layer(1), shape, st.pos, st.n, scratch.data(), c.threads);
    // Measured max error relative to max |ref| over these cases: 1.04e-6
    // (v4), 1.22e-6 (v3), 2.06e-6 (v2's scalar sums, d_head 256); 2x margin.
    EXPECT_TRUE(within_rel_to_max(compare(out, reference(q, k, v, c, st.pos, st.n)), 4e-6))
        << name(c) << ", " << st.n << " queries from position " << st.pos;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionDecode,
    ::testing::Values(Case{kernels::CacheType::kF32, 8, 2, 64, 1}, Case{kernels::CacheType::kF32, 8, 2, 64, 3},
                      Case{kernels::CacheType::kF16, 8, 2, 64, 3}, Case{kernels::CacheType::kF16, 9, 3, 64, 2},
                      Case{kernels::CacheType::kF16, 6, 6, 48, 2}, Case{kernels::CacheType::kF32, 4, 1, 20, 2},
                      Case{kernels::CacheType::kF16, 4, 1, 20, 1}, Case{kernels::CacheType::kF32, 2, 2, 128, 4},
                      // gemma3's head size (more than one block of accumulators at
                      // AVX2) and one of 8s, not 16s.
                      Case{kernels::CacheType::kF16, 4, 1, 256, 2}, Case{kernels::CacheType::kF32, 8, 4, 256, 1},
                      Case{kernels::CacheType::kF16, 6, 2, 24, 2},
                      // Sliding windows (gemma3's local layers): starts inside a tile, one
                      // query's keys split across threads, windows longer than the context.
                      Case{kernels::CacheType::kF32, 8, 2, 64, 3, 50}, Case{kernels::CacheType::kF16, 4, 1, 20, 2, 77},
                      Case{kernels::CacheType::kF32, 2, 2, 128, 1, 17},
                      Case{kernels::CacheType::kF16, 8, 2, 64, 4, 1000}));

// fp16 really rounds: keys and values after store() are fp16 values, and an
// fp32 cache leaves them alone.
TEST(KvCache, Fp16RoundsWhatItStoresFp32KeepsIt) {
  const kernels::DecodeAttnShape shape{2, 1, 16};
  std::vector<float> k(16, 1.0f + 1.0f / 4096), v(16, 3.14159265f);
  auto k32 = k, v32 = v;
  infer::KvCache(kernels::CacheType::kF16, 1, 16, shape).store(0, k.data(), v.data(), 3, 1);
  infer::KvCache(kernels::CacheType::kF32, 1, 16, shape).store(0, k32.data(), v32.data(), 3, 1);
  EXPECT_EQ(k[0], 1.0f);  // 1 + 2^-12 is halfway below fp16's 1 + 2^-10: to even
  EXPECT_EQ(v[5], 3.140625f);
  EXPECT_EQ(k32[0], 1.0f + 1.0f / 4096);
  EXPECT_EQ(v32[5], 3.14159265f);
}

TEST(KvCache, UnknownTypeNamesTheValue) {
  EXPECT_EQ(infer::cache_type_from_name("f16"), kernels::CacheType::kF16);
  try {
    infer::cache_type_from_name("q4_0");
    FAIL() << "accepted q4_0";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'q4_0'"), std::string::npos) << e.what();
  }
}

}  // namespace
