// kernels/attention: flash attention's backward against central finite
// differences in double (L = sum(out * probe) for a random probe), the
// reference attention, packed documents, causality, and the float path.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_reference.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::compare;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::within_abs;
using ggtrain::test_support::within_rel_to_max;
using Vec = std::vector<double>;

// Flash attention (kernels/attention.h) against finite differences. The
// tiles are shrunk (2 query rows x 3 keys) so that T = 7 reaches every case:
// several key blocks per row (online softmax rescaling), diagonal blocks,
// rows that see none of a block, a last tile and a last block cut short.
// `doc_start` (B x T), when given, packs several documents per row.
void check_attention(int64_t n_heads, int64_t n_kv_heads, int64_t tile_rows, int64_t tile_cols,
                     const std::vector<int32_t>& doc_start = {}) {
  const int64_t B = 2, T = 7, hd = 4;
  AttnShape s{B, T, n_heads, n_kv_heads, hd, tile_rows, tile_cols, doc_start.empty() ? nullptr : doc_start.data()};
  Vec q = random_vector(B * T * n_heads * hd, 11, 2.0), k = random_vector(B * T * n_kv_heads * hd, 12, 2.0),
      v = random_vector(B * T * n_kv_heads * hd, 13), probe = random_vector(B * T * n_heads * hd, 14);
  Vec lse(B * n_heads * T), scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  Vec out(B * T * n_heads * hd);
  auto loss = [&] {
    attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    return dot(out, probe);
  };
  loss();
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), probe.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  expect_grad_matches_fd(q, dq, loss, "attention dq");
  expect_grad_matches_fd(k, dk, loss, "attention dk");
  expect_grad_matches_fd(v, dv, loss, "attention dv");
}

TEST(LayerFd, AttentionMultiHead) { check_attention(3, 3, 2, 3); }
TEST(LayerFd, AttentionGroupedQuery) { check_attention(4, 2, 2, 3); }
TEST(LayerFd, AttentionMultiQuery) { check_attention(3, 1, 2, 3); }
TEST(LayerFd, AttentionKeyBlocksNarrowerThanTiles) { check_attention(2, 1, 4, 2); }
TEST(LayerFd, AttentionOneTile) { check_attention(2, 2, 64, 256); }
TEST(LayerFd, AttentionWithinDocuments) {  // row 0: documents at 0, 3, 4; row 1: at 0, 6
  check_attention(4, 2, 2, 3, {0, 0, 0, 3, 4, 4, 4, 0, 0, 0, 0, 0, 0, 6});
}

// Packed documents (AttnShape::doc_start) give each document exactly what it
// gets alone: outputs, log-sum-exps and all three gradients, with tiles small
// enough that whole key blocks before a tile's documents are skipped.
TEST(LayerFd, PackedDocumentsEqualEachDocumentAlone) {
  const int64_t B = 2, T = 11, H = 4, KV = 2, hd = 4, qs = H * hd, ks = KV * hd;
  const std::vector<std::vector<int64_t>> docs{{0, 4, 5, 9}, {0, 8}};  // each row's document starts
  std::vector<int32_t> doc_start(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d : docs[size_t(b)])
        if (d <= t) doc_start[size_t(b * T + t)] = int32_t(d);
  AttnShape s{B, T, H, KV, hd, 2, 3, doc_start.data()};
  Vec q = random_vector(B * T * qs, 41, 2.0), k = random_vector(B * T * ks, 42, 2.0), v = random_vector(B * T * ks, 43),
      dout = random_vector(B * T * qs, 44);
  Vec scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  Vec out(q.size()), lse(size_t(B * H * T)), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  Vec a_out(q.size()), a_lse(lse.size()), a_dq(q.size()), a_dk(k.size()), a_dv(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (size_t i = 0; i < docs[size_t(b)].size(); ++i) {
      const int64_t d0 = docs[size_t(b)][i], d1 = i + 1 < docs[size_t(b)].size() ? docs[size_t(b)][i + 1] : T;
      AttnShape one{1, d1 - d0, H, KV, hd, 2, 3};
      const int64_t qo = (b * T + d0) * qs, ko = (b * T + d0) * ks;
      Vec l1(size_t(H * (d1 - d0)));
      attention_forward(a_out.data() + qo, l1.data(), scratch.data(), q.data() + qo, k.data() + ko, v.data() + ko, one);
      attention_backward(a_dq.data() + qo, a_dk.data() + ko, a_dv.data() + ko, scratch.data(), dout.data() + qo,
                         a_out.data() + qo, l1.data(), q.data() + qo, k.data() + ko, v.data() + ko, one);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < d1 - d0; ++t) a_lse[size_t((b * H + h) * T + d0 + t)] = l1[size_t(h * (d1 - d0) + t)];
    }
  EXPECT_TRUE(within_abs(compare(out, a_out), 1e-13)) << "out";
  EXPECT_TRUE(within_abs(compare(lse, a_lse), 1e-13)) << "lse";
  EXPECT_TRUE(within_abs(compare(dq, a_dq), 1e-13)) << "dq";
  EXPECT_TRUE(within_abs(compare(dk, a_dk), 1e-13)) << "dk";
  EXPECT_TRUE(within_abs(compare(dv, a_dv), 1e-13)) << "dv";
}

// The reference kernel (probabilities stored) keeps its own FD check.
TEST(LayerFd, ReferenceAttention) {
  const int64_t B = 2, T = 5, hd = 4, H = 4, KV = 2;
  AttnShape s{B, T, H, KV, hd};
  Vec q = random_vector(B * T * H * hd, 11), k = random_vector(B * T * KV * hd, 12),
      v = random_vector(B * T * KV * hd, 13), probe = random_vector(B * T * H * hd, 14);
  Vec att(B * H * T * T);
  auto loss = [&] {
    Vec out(B * T * H * hd);
    reference_attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    return dot(out, probe);
  };
  loss();
  Vec dq(q.size()), dk(k.size()), dv(v.size()),
      scratch(size_t(omp_get_max_threads() * reference_attention_scratch_per_thread(T)));
  reference_attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), probe.data(), q.data(), k.data(),
                               v.data(), att.data(), s);
  expect_grad_matches_fd(q, dq, loss, "reference attention dq");
  expect_grad_matches_fd(k, dk, loss, "reference attention dk");
  expect_grad_matches_fd(v, dv, loss, "reference attention dv");
}

// float: flash attention with its real tiles against the reference kernel,
// at a length that needs several query tiles and key blocks (T = 600 > 256).
TEST(LayerFd, FlashAttentionMatchesReferenceInFloat) {
  const int64_t B = 1, T = 600, H = 4, KV = 2, hd = 16;
  AttnShape s{B, T, H, KV, hd};
  auto fvec = [](size_t n, uint64_t seed, double scale) {
    Vec d = random_vector(n, seed, scale);
    return std::vector<float>(d.begin(), d.end());
  };
  auto q = fvec(size_t(B * T * H * hd), 31, 2.0), k = fvec(size_t(B * T * KV * hd), 32, 2.0),
       v = fvec(size_t(B * T * KV * hd), 33, 1.0), dout = fvec(size_t(B * T * H * hd), 34, 1.0);
  std::vector<float> out(q.size()), ref_out(q.size()), lse(size_t(B * H * T)), att(size_t(B * H * T * T));
  std::vector<float> scratch(size_t(
      omp_get_max_threads() * std::max(attention_scratch_per_thread(s), reference_attention_scratch_per_thread(T))));
  attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  reference_attention_forward(ref_out.data(), att.data(), q.data(), k.data(), v.data(), s);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), rdq(q.size()), rdk(k.size()), rdv(v.size());
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  reference_attention_backward(rdq.data(), rdk.data(), rdv.data(), scratch.data(), dout.data(), q.data(), k.data(),
                               v.data(), att.data(), s);
  EXPECT_TRUE(within_rel_to_max(compare(out, ref_out), 1e-5)) << "out";
  EXPECT_TRUE(within_rel_to_max(compare(dq, rdq), 1e-4)) << "dq";
  EXPECT_TRUE(within_rel_to_max(compare(dk, rdk), 1e-4)) << "dk";
  EXPECT_TRUE(within_rel_to_max(compare(dv, rdv), 1e-4)) << "dv";
  // lse is log sum_s exp(scale q.k): the reference's probabilities sum to 1
  // after dividing by exp(lse), so check a row directly.
  const int64_t t = 417, h = 3;
  double sum = 0;
  for (int64_t j = 0; j <= t; ++j) {
    double dotp = 0;
    for (int64_t i = 0; i < hd; ++i)
      dotp += double(q[size_t(t * H * hd + h * hd + i)]) * k[size_t(j * KV * hd + (h / 2) * hd + i)];
    sum += std::exp(dotp / std::sqrt(double(hd)));
  }
  EXPECT_NEAR(lse[size_t(h * T + t)], std::log(sum), 1e-5 * std::fabs(std::log(sum)) + 1e-6);
}

TEST(LayerFd, AttentionIsCausal) {
  // Changing a future key or value must not change earlier outputs.
  const int64_t T = 4, hd = 2;
  AttnShape s{1, T, 1, 1, hd, 2, 2};
  Vec q = random_vector(T * hd, 15), k = random_vector(T * hd, 16), v = random_vector(T * hd, 17);
  Vec lse(T), out1(T * hd), out2(T * hd), scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  attention_forward(out1.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  k[3 * hd] += 5.0;
  v[3 * hd + 1] -= 5.0;
  attention_forward(out2.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  for (int64_t i = 0; i < 3 * hd; ++i) EXPECT_EQ(out1[i], out2[i]);
  EXPECT_NE(out1[3 * hd + 1], out2[3 * hd + 1]);
}
