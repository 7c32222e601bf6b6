// The whole model's backward pass (every parameter, all layers chained)
// against central finite differences in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "model/transformer.h"
#include "support/compare.h"
#include "support/family_shapes.h"
#include "support/fd_check.h"

using namespace ggtrain::model;

namespace {

Config tiny_config(int64_t n_heads, int64_t n_kv_heads, bool tied) {
  Config c;
  c.vocab = 13;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.d_ff = 12;
  c.ctx = 6;
  c.tied = tied;
  c.rope_freq_base = 100.0;  // a small base makes RoPE angles large enough to matter
  c.rms_eps = 1e-5;
  return c;
}

// How a batch is laid out: the default is one sequence per row, every
// target counted; `packed` starts a second document at position 2 of each
// row, and `masked` takes the loss off a few targets (a prompt's).
struct BatchShape {
  bool packed = false, masked = false;
  // Mixture-of-experts models: the weight of the load-balancing loss added
  // to the objective.
  double router_aux = 0;
};

// `only`: check just the tensors whose name contains one of these (all: empty).
void check_model(const Config& c, const std::vector<std::string>& only = {}, BatchShape shape = {}) {
  const int64_t B = 2, T = 5;
  ModelOptions opts;
  opts.router_aux_loss_coef = shape.router_aux;
  Transformer<double> m(c, B, T, {}, opts);
  if (c.donor_dim > 0) {  // the frozen donor table of a lens warm start
    auto e = ggtrain::test_support::random_vector(size_t(c.vocab * c.donor_dim), 7, 1.0);
    std::copy(e.begin(), e.end(), m.donor_table());
  }
  auto p = ggtrain::test_support::random_vector(size_t(m.n_params()), 42, 0.5);
  for (const auto& t : m.layout().tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += 1.0;  // norm weights ~1
  ggtrain::test_support::keep_decays(m.layout(), p.data());
  std::vector<int32_t> tokens(size_t(B * (T + 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % c.vocab);
  std::vector<int32_t> inputs, targets;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      inputs.push_back(tokens[size_t(b * (T + 1) + t)]);
      targets.push_back(tokens[size_t(b * (T + 1) + t + 1)]);
    }
  std::vector<int32_t> doc_start(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) doc_start[size_t(i)] = shape.packed && i % T >= 2 ? 2 : 0;
  if (shape.masked)
    for (int64_t i : {0, 1, 5, 7}) targets[size_t(i)] = ggtrain::corpus::kNoTarget;
  auto loss = [&] {
    std::copy(p.begin(), p.end(), m.params());
    const double ce = m.forward(inputs.data(), targets.data(), shape.packed ? doc_start.data() : nullptr);
    return ce + shape.router_aux * m.aux_loss();
  };
  loss();
  m.zero_grad();
  m.backward();
  std::vector<double> g(m.grads(), m.grads() + m.n_params());
  for (const auto& t : m.layout().tensors()) {
    if (!only.empty() && std::none_of(only.begin(), only.end(),
                                      [&](const std::string& o) { return t.name.find(o) != std::string::npos; }))
      continue;
    std::vector<double> pt(p.begin() + t.offset, p.begin() + t.offset + t.size);
    std::vector<double> gt(g.begin() + t.offset, g.begin() + t.offset + t.size);
    auto f = [&] {
      std::copy(pt.begin(), pt.end(), p.begin() + t.offset);
      return loss();
    };
    // h = 2e-6: the short convolution's gates (b x c, cubic in the normed
    // input) curve the loss enough that h = 1e-5 left a truncation error of
    // 7e-7 (relative) on an LFM2 model with LoRA; at 2e-6 every check passes 1e-7.
    ggtrain::test_support::expect_grad_matches_fd(pt, gt, f, t.name, 1e-7, 2e-6);
    std::copy(pt.begin(), pt.end(), p.begin() + t.offset);
  }
}

}  // namespace

TEST(ModelFd, GroupedQueryUntied) { check_model(tiny_config(4, 2, false)); }
TEST(ModelFd, MultiHeadTied) { check_model(tiny_config(2, 2, true)); }
TEST(ModelFd, MultiQueryTied) { check_model(tiny_config(4, 1, true)); }
// Qwen3: each query and key head RMS-normed before RoPE (attn_q_norm,
// attn_k_norm), NeoX RoPE pairs, heads of 6 where d_model / n_heads is 2
// (q_dim 24 > d_model 8), tied head.
TEST(ModelFd, Qwen3HeadNormsNeoxRopeWideHeads) {
  auto c = tiny_config(4, 2, true);
  c.arch = "qwen3";
  c.head_dim = 6;
  check_model(c);
}
// Gemma 3: embedding scaled by sqrt(d_model), GeGLU (GELU tanh), norms of
// the attention and feed-forward outputs, head norms, heads wider than
// d_model / n_heads; layer 0 local (a window of 2 positions, its own RoPE
// base), layer 1 global (linear RoPE scaling); in a packed, masked batch so
// that the window and the documents both cut.
TEST(ModelFd, Gemma3SlidingWindowPostNormsGeglu) {
  auto c = tiny_config(4, 2, true);
  c.arch = "gemma3";
  c.head_dim = 6;
  c.sliding_window = 2;
  c.swa_pattern = 2;
  c.rope_freq_base_swa = 30.0;
  c.rope_scaling_factor = 3.0;
  check_model(c, {}, {true, true});
  check_model(c);
}
// SmolLM3: llama whose fourth layer has no RoPE (and the second has it),
// so the backward of a rotated and of an unrotated layer are both chained.
TEST(ModelFd, Smollm3NoRopeFourthLayer) {
  auto c = tiny_config(4, 2, true);
  c.arch = "smollm3";
  c.n_layers = 4;
  check_model(c, {"blk.2", "blk.3", "token_embd"}, {true, true});
}
// LFM2: layers 0 and 2 double-gated short convolutions of 3 taps (window
// 5 > taps, so a position reads zeros before the sequence and real rows
// after it), layer 1 attention with head norms; in a packed, masked batch
// too (the second document's convolution must not read the first's rows).
Config lfm2_tiny() {
  auto c = tiny_config(4, 2, true);
  c.arch = "lfm2";
  c.n_layers = 3;
  c.attention_layers = "1";
  c.shortconv_l_cache = 3;
  return c;
}
TEST(ModelFd, Lfm2ShortConvLayers) {
  check_model(lfm2_tiny(), {}, {true, true});
  check_model(lfm2_tiny());
}
TEST(ModelFd, Lfm2LoraOnConvolutionAndAttention) {
  auto c = lfm2_tiny();
  c.lora = {3, 3.0, {"shortconv.in_proj", "shortconv.out_proj", "attn_v"}};
  check_model(c, {"lora", "blk.0.attn_norm"});
}
// Qwen3.5: layers 0 and 2 Gated DeltaNet (1 key head shared by 2 value
// heads of 2, a 3-tap convolution: a position reads zeros before the
// sequence and real rows after), layer 1 gated attention (attn_q yields the
// output gate) with head norms and RoPE on 2 of each head's 4 dimensions;
// in a packed, masked batch too (the second document starts from a zero
// state and convolution).
Config qwen35_tiny() {
  auto c = tiny_config(2, 1, true);
  c.arch = "qwen35";
  c.n_layers = 3;
  c.head_dim = 4;
  c.rope_dim = 2;
  c.attention_layers = "1";
  c.ssm_state_size = 2;
  c.ssm_group_count = 1;
  c.ssm_time_step_rank = 2;
  c.ssm_conv_kernel = 3;
  return c;
}
TEST(ModelFd, Qwen35GatedDeltaNetAndGatedAttention) {
  check_model(qwen35_tiny(), {}, {true, true});
  check_model(qwen35_tiny());
}
TEST(ModelFd, Qwen35LoraOnDeltaNetAndAttention) {
  auto c = qwen35_tiny();
  c.lora = {3, 3.0, {"attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_out", "attn_q"}};
  check_model(c, {"lora", "blk.0.attn_norm"});
}
// Mixture of experts: the router's softmax, the top-2 of 4 experts (away
// from ties: a random router separates them by far more than h), each
// expert's SwiGLU, the weighted sum, and the load-balancing loss at a weight
// large enough to matter. qwen3moe renormalises the chosen weights; olmoe
// does not, and norms whole query and key rows.
Config moe_tiny(const char* arch) {
  auto c = tiny_config(2, 2, false);
  c.arch = arch;
  ggtrain::test_support::shape_family_layers(c);
  return c;
}
TEST(ModelFd, Qwen3MoeRouterExpertsAndBalancingLoss) {
  check_model(moe_tiny("qwen3moe"), {}, {.router_aux = 0.5});
  check_model(moe_tiny("qwen3moe"), {}, {true, true, 0.5});
}
// Each expert's own adapter (A and B stacked per expert, as llama.cpp's
// build_lora_mm_id reads them), the router's and attention's.
TEST(ModelFd, Qwen3MoeLoraOnEachExpertAndTheRouter) {
  auto c = moe_tiny("qwen3moe");
  c.lora = {3, 3.0, {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_inp", "attn_q"}};
  check_model(c, {"lora", "blk.0.attn_norm"}, {.router_aux = 0.5});
}
// Qwen3.5-MoE: Gated DeltaNet and gated attention layers whose feed-forward
// is the routed experts plus a shared expert scaled by sigmoid(g . h).
TEST(ModelFd, Qwen35MoeSharedExpertBesideTheRouted) {
  check_model(moe_tiny("qwen35moe"), {}, {.router_aux = 0.5});
  check_model(moe_tiny("qwen35moe"), {}, {true, true});
}
TEST(ModelFd, OlmoeUnnormalisedWeightsWholeRowNorms) {
  check_model(moe_tiny("olmoe"), {}, {.router_aux = 0.5});
  check_model(moe_tiny("olmoe"));
}
// Qwen2: biases on the query, key and value projections, NeoX RoPE pairs.
TEST(ModelFd, Qwen2BiasesNeoxRope) {
  auto c = tiny_config(4, 2, false);
  c.arch = "qwen2";
  check_model(c);
}
TEST(ModelFd, LoraOnEveryTarget) {  // A and B of each target, with the base trainable too
  auto c = tiny_config(4, 2, false);
  c.lora = {3, 5.0, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}};
  // The adapters, and base tensors below them whose gradients flow back
  // through block 1's adapters (every base tensor is checked without LoRA above).
  check_model(c, {"lora", "blk.0.attn_norm", "blk.0.ffn_up", "token_embd"});
}
TEST(ModelFd, PackedDocumentsAndMaskedTargets) {  // the loss of an instruction-tuning batch
  check_model(tiny_config(4, 2, false), {}, {true, true});
}

// A window packing two examples, with prompt targets masked, has the loss
// and gradients of the two examples run alone: the packed mean times its
// counted targets is the sum of each example's mean times its own.
void expect_packed_window_equals_examples_alone(const Config& c) {
  const int64_t T = 6, first = 2;  // example A at positions [0, 2), example B at [2, 6)
  const std::vector<int32_t> inputs{1, 4, 2, 9, 11, 3};
  const int32_t no = ggtrain::corpus::kNoTarget;
  const std::vector<int32_t> targets{5, no, no, 12, 3, 7};  // A's last target would cross into B
  const std::vector<int32_t> doc_start{0, 0, 2, 2, 2, 2};
  Transformer<double> packed(c, 1, T), a(c, 1, first), b(c, 1, T - first);
  auto p = ggtrain::test_support::random_vector(size_t(packed.n_params()), 42, 0.5);
  for (auto* m : {&packed, &a, &b}) {
    std::copy(p.begin(), p.end(), m->params());
    m->zero_grad();
  }
  const double lp = packed.forward(inputs.data(), targets.data(), doc_start.data());
  const double la = a.forward(inputs.data(), targets.data());
  const double lb = b.forward(inputs.data() + first, targets.data() + first);
  ASSERT_EQ(packed.counted_targets(), 4);
  ASSERT_EQ(a.counted_targets(), 1);
  ASSERT_EQ(b.counted_targets(), 3);
  EXPECT_NEAR(lp * 4, la * 1 + lb * 3, 1e-12);
  packed.backward(4.0);  // gradients of the summed loss
  a.backward(1.0);
  b.backward(3.0);
  std::vector<double> sum(size_t(packed.n_params()));
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = a.grads()[i] + b.grads()[i];
  const std::vector<double> g(packed.grads(), packed.grads() + packed.n_params());
  EXPECT_TRUE(ggtrain::test_support::within_abs(ggtrain::test_support::compare(g, sum), 1e-12));
  // and the packing mattered: without document starts the loss differs
  EXPECT_GT(std::fabs(packed.evaluate(inputs.data(), targets.data()) - lp), 1e-6);
}
TEST(ModelFd, PackedWindowEqualsExamplesAlone) { expect_packed_window_equals_examples_alone(tiny_config(4, 2, false)); }
// A convolution layer's state starts at zero at a document start, as
// llama.cpp starts each sequence.
TEST(ModelFd, Lfm2PackedWindowEqualsExamplesAlone) { expect_packed_window_equals_examples_alone(lfm2_tiny()); }
TEST(ModelFd, Qwen35PackedWindowEqualsExamplesAlone) { expect_packed_window_equals_examples_alone(qwen35_tiny()); }

TEST(ModelFd, DonorLens) {  // token_embd replaced by a frozen table and lens.proj
  auto c = tiny_config(4, 2, false);
  c.donor_dim = 5;
  check_model(c);
}

// The float path users train with against the double path the tests above
// check by finite differences, for every architecture, per tensor: the same
// parameters and batch, T = 80 so attention crosses its 64-row tile (gemma3:
// a window of 24 on its local layers; smollm3: its unrotated fourth layer),
// every other architecture with a tied head (its gradient sums the head's
// and the embedding's). Measured on the Xeon (v4): loss within 3.9e-8,
// every tensor's gradient within 3.3e-6 (qwen35's ssm_beta; the other
// architectures 1.9e-6) (relative L2); limits 1e-6 and 1e-5.
TEST(ModelFd, FloatGradientsFollowDoubleEveryArchitecture) {
  for (size_t a = 0; a < architectures().size(); ++a) {
    const Architecture& row = architectures()[a];
    SCOPED_TRACE(row.name);
    Config c;
    c.arch = row.name;
    c.vocab = 97;
    c.d_model = 32;
    c.n_layers = row.no_rope_layer_step ? row.no_rope_layer_step : 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_ff = 48;
    c.ctx = 80;
    c.rope_freq_base = 1000.0;
    c.tied = a % 2 == 1;
    if (row.default_swa_pattern) c.sliding_window = 24, c.swa_pattern = 2;
    if (row.has_recurrent_layers()) c.n_layers = 3;
    ggtrain::test_support::shape_family_layers(c);
    const int64_t B = 2, T = 80;
    Transformer<double> d(c, B, T);
    Transformer<float> f(c, B, T);
    auto p = ggtrain::test_support::random_vector(size_t(d.n_params()), 5, 0.3);
    for (const auto& t : d.layout().tensors())
      if (t.shape.size() == 1)
        for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += 1.0;  // norm weights ~1
    ggtrain::test_support::keep_decays(d.layout(), p.data());
    std::copy(p.begin(), p.end(), d.params());
    for (size_t i = 0; i < p.size(); ++i) f.params()[i] = float(p[i]);
    std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = int32_t((i * 37 + 3) % size_t(c.vocab)), tg[i] = int32_t((i * 13 + 7) % size_t(c.vocab));
    const double ld = d.forward(in.data(), tg.data());
    const double lf = f.forward(in.data(), tg.data());
    EXPECT_NEAR(lf, ld, 1e-6 * ld);
    d.zero_grad();
    d.backward();
    f.zero_grad();
    f.backward();
    double worst = 0;
    for (const auto& t : d.layout().tensors()) {
      const auto cmp = ggtrain::test_support::compare(f.grads() + t.offset, d.grads() + t.offset, size_t(t.size));
      // A Gated DeltaNet's dt_bias and a gather a term from every position
      // of every head, terms that largely cancel: measured 7.9e-6 (dt_bias)
      // and 4.9e-6 (a), the same with those sums in double. Limit 3e-5.
      const bool cancelling_sum = t.name.ends_with("ssm_dt.bias") || t.name.ends_with(".ssm_a");
      worst = std::max(worst, cancelling_sum ? 0.0 : cmp.rel_l2());
      EXPECT_TRUE(ggtrain::test_support::within_rel_l2(cmp, cancelling_sum ? 3e-5 : 1e-5)) << t.name;
    }
    std::printf("%s: float vs double loss %.2e, worst tensor gradient %.2e (relative L2)\n", row.name,
                std::fabs(lf - ld) / ld, worst);
  }
}
