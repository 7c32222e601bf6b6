// Model options that trade compute for memory must not change the result:
// activation recomputation (train.recompute), the loss's chunk of logits and
// the attention tiles. The default path is checked against finite
// differences in test_transformer_fd.cpp; these compare every option with it.
// Also: activation memory grows linearly with the context.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/transformer.h"
#include "support/compare.h"
#include "support/family_shapes.h"
#include "support/fd_check.h"
#include "util/error.h"

using namespace ggtrain::model;
using ggtrain::test_support::compare;
using ggtrain::test_support::within_rel_to_max;

namespace {

Config small_config(bool lora) {
  Config c;
  c.vocab = 29;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 24;
  c.ctx = 16;
  c.tied = false;
  c.rope_freq_base = 100.0;
  if (lora) c.lora = {2, 3.0, {"attn_q", "attn_output", "ffn_up"}};
  return c;
}

struct Result {
  double loss = 0;
  std::vector<double> grads, logits;
};

template <typename T>
Result train_step(const Config& c, const ModelOptions& o, double loss_scale) {
  const int64_t B = 2, Tn = 11;
  Transformer<T> m(c, B, Tn, {}, o);
  auto p = ggtrain::test_support::random_vector(size_t(m.n_params()), 5, 0.4);
  for (const auto& t : m.layout().tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += 1.0;  // norm weights ~1
  std::copy(p.begin(), p.end(), m.params());
  std::vector<int32_t> in(size_t(B * Tn)), tg(size_t(B * Tn));
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = int32_t((i * 11 + 2) % size_t(c.vocab));
    tg[i] = int32_t((i * 5 + 7) % size_t(c.vocab));
  }
  Result r;
  m.forward(in.data(), nullptr);
  r.logits.assign(m.logits(), m.logits() + B * Tn * c.vocab);
  r.loss = double(m.forward(in.data(), tg.data()));
  m.zero_grad();
  m.backward(T(loss_scale));
  r.grads.assign(m.grads(), m.grads() + m.n_trainable());
  EXPECT_NEAR(double(m.evaluate(in.data(), tg.data())), r.loss, 1e-6 * r.loss);
  return r;
}

void expect_options_match_default(bool lora) {
  const auto c = small_config(lora);
  const Result base = train_step<double>(c, {}, 0.5);
  for (auto rc : {Recompute::kNone, Recompute::kAttn, Recompute::kAll})
    for (int64_t chunk : {0, 3, 7})
      for (int64_t tiles : {0, 1}) {
        ModelOptions o;
        o.recompute = rc;
        o.logit_chunk_rows = chunk;
        if (tiles) o.attn_tile_rows = 2, o.attn_tile_cols = 3;
        SCOPED_TRACE(testing::Message() << "recompute " << int(rc) << " chunk " << chunk << " tiles " << tiles);
        const Result r = train_step<double>(c, o, 0.5);
        EXPECT_NEAR(r.loss, base.loss, 1e-13 * base.loss);
        EXPECT_TRUE(within_rel_to_max(compare(r.grads, base.grads), 1e-12)) << "gradients";
        EXPECT_TRUE(within_rel_to_max(compare(r.logits, base.logits), 1e-13)) << "logits";
      }
}

}  // namespace

TEST(ModelOptions, RecomputeChunksAndTilesGiveTheSameGradients) { expect_options_match_default(false); }
TEST(ModelOptions, RecomputeWithLora) { expect_options_match_default(true); }

// Every architecture recomputes what it kept: the recurrent mixers, the
// experts (their routing, the load-balancing loss counted once per forward,
// each expert's adapter) and the shared expert.
TEST(ModelOptions, RecomputeEveryArchitecture) {
  for (const auto& row : architectures()) {
    SCOPED_TRACE(row.name);
    Config c = small_config(false);
    c.arch = row.name;
    ggtrain::test_support::shape_family_layers(c);
    if (row.has_experts()) c.lora = {2, 4.0, {"ffn_up_exps", "ffn_gate_inp", "attn_q"}};
    ModelOptions o;
    o.router_aux_loss_coef = 0.3;
    const Result base = train_step<double>(c, o, 0.5);
    for (auto rc : {Recompute::kAttn, Recompute::kAll}) {
      o.recompute = rc;
      const Result r = train_step<double>(c, o, 0.5);
      EXPECT_NEAR(r.loss, base.loss, 1e-13 * base.loss);
      EXPECT_TRUE(within_rel_to_max(compare(r.grads, base.grads), 1e-12)) << "gradients, recompute " << int(rc);
    }
  }
}

TEST(ModelOptions, FloatRecomputeMatchesStoredActivations) {
  const auto c = small_config(false);
  const Result base = train_step<float>(c, {}, 1.0);
  for (auto rc : {Recompute::kAttn, Recompute::kAll}) {
    ModelOptions o;
    o.recompute = rc;
    const Result r = train_step<float>(c, o, 1.0);
    EXPECT_EQ(r.loss, base.loss);
    EXPECT_TRUE(within_rel_to_max(compare(r.grads, base.grads), 1e-6)) << "gradients, recompute " << int(rc);
  }
}

TEST(ModelOptions, RecomputeNames) {
  EXPECT_EQ(recompute_from_name("none"), Recompute::kNone);
  EXPECT_EQ(recompute_from_name("attn"), Recompute::kAttn);
  EXPECT_EQ(recompute_from_name("all"), Recompute::kAll);
  EXPECT_THROW(recompute_from_name("some"), ggtrain::Error);
}

// Flash attention keeps O(T) per row of the batch: doubling the context at
// most doubles the activation memory (the [B, H, T, T] probabilities of the
// previous kernel made it grow 4x at long contexts), and recomputation cuts it.
TEST(ModelOptions, ActivationMemoryGrowsLinearlyWithContext) {
  Config c = small_config(false);
  c.d_model = 64;
  c.n_heads = 4;
  c.vocab = 320;
  c.ctx = 4096;
  auto bytes = [&](int64_t T, Recompute rc) {
    ModelOptions o;
    o.recompute = rc;
    return double(Transformer<float>(c, 1, T, {}, o).activation_bytes());
  };
  const double b1k = bytes(1024, Recompute::kNone), b2k = bytes(2048, Recompute::kNone),
               b4k = bytes(4096, Recompute::kNone);
  EXPECT_LE(b2k / b1k, 2.05);
  EXPECT_LE(b4k / b2k, 2.05);
  // one block of attention probabilities alone would be 4 heads x 4096^2 floats
  EXPECT_LT(b4k, 4.0 * 4096 * 4096 * 4);
  EXPECT_LT(bytes(2048, Recompute::kAttn), b2k);
  EXPECT_LT(bytes(2048, Recompute::kAll), bytes(2048, Recompute::kAttn));
}
