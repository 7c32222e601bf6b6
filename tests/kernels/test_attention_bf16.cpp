// bf16 flash attention (kernels/attention_bf16) against the float kernel.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "support/compare.h"
#include "support/random_floats.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::differs_by_more_than;
using test_support::random_floats;
using test_support::within_rel_to_max;

// bf16 flash attention against the float kernel: same algorithm, products
// on bf16, so agreement to bf16 precision; small odd tiles reach the
// padding, real tiles several key blocks (T = 600, grouped queries).
TEST(Bf16, AttentionFollowsFloatAttention) {
  // (built without AVX512_BF16, the tile GEMM is a scalar loop with the same numbers)
  // (with `docs`, each row packs documents of 7 positions: per-document attention)
  for (auto [T, rows, cols, docs] : {std::tuple<int64_t, int64_t, int64_t, bool>{600, 64, 256, false},
                                     {29, 3, 5, false},
                                     {17, 4, 2, false},
                                     {29, 3, 5, true},
                                     {600, 64, 256, true}}) {
    SCOPED_TRACE(testing::Message() << "T " << T << " tiles " << rows << "x" << cols << (docs ? " documents" : ""));
    const int64_t B = 2, H = 4, KV = 2, hd = 16;
    std::vector<int32_t> doc_start(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) doc_start[size_t(i)] = int32_t(i % T / 7 * 7);
    kernels::AttnShape s{B, T, H, KV, hd, rows, cols, docs ? doc_start.data() : nullptr};
    auto q = random_floats(size_t(B * T * H * hd), 21, 1.5f), k = random_floats(size_t(B * T * KV * hd), 22, 1.5f),
         v = random_floats(size_t(B * T * KV * hd), 23, 1.f), dout = random_floats(size_t(B * T * H * hd), 24, 1.f);
    const size_t per =
        size_t(std::max(kernels::attention_scratch_per_thread(s), kernels::attention_bf16_scratch_per_thread(s)));
    std::vector<float> scratch(per * size_t(omp_get_max_threads()));
    std::vector<float> o(q.size()), lse(size_t(B * H * T)), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> o2(q.size()), lse2(lse.size()), dq2(q.size()), dk2(k.size()), dv2(v.size());
    kernels::attention_forward(o.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    kernels::attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), o.data(), lse.data(),
                                q.data(), k.data(), v.data(), s);
    kernels::attention_forward_bf16(o2.data(), lse2.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    kernels::attention_backward_bf16(dq2.data(), dk2.data(), dv2.data(), scratch.data(), dout.data(), o2.data(),
                                     lse2.data(), q.data(), k.data(), v.data(), s);
    const Comparison out = compare(o2, o);
    EXPECT_TRUE(within_rel_to_max(out, 2e-2)) << "out";
    EXPECT_TRUE(within_rel_to_max(compare(lse2, lse), 1e-2)) << "lse";
    EXPECT_TRUE(within_rel_to_max(compare(dq2, dq), 3e-2)) << "dq";
    EXPECT_TRUE(within_rel_to_max(compare(dk2, dk), 3e-2)) << "dk";
    EXPECT_TRUE(within_rel_to_max(compare(dv2, dv), 3e-2)) << "dv";
    EXPECT_TRUE(differs_by_more_than(out, 0.0)) << "it did run in bf16";
  }
}
