// The whole model's backward pass (every parameter, all layers chained)
// against central finite differences in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/llama.h"
#include "support/fd_check.h"

using namespace ggtrain::model;

namespace {

LlamaConfig tiny_config(int64_t n_heads, int64_t n_kv_heads, bool tied) {
  LlamaConfig c;
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

// `only`: check just the tensors whose name contains one of these (all: empty).
void check_model(const LlamaConfig& c, const std::vector<std::string>& only = {}) {
  const int64_t B = 2, T = 5;
  LlamaModel<double> m(c, B, T);
  if (c.donor_dim > 0) {  // the frozen donor table of a lens warm start
    auto e = ggtrain::test_support::random_vector(size_t(c.vocab * c.donor_dim), 7, 1.0);
    std::copy(e.begin(), e.end(), m.donor_table());
  }
  auto p = ggtrain::test_support::random_vector(size_t(m.n_params()), 42, 0.5);
  for (const auto& t : m.layout().tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += 1.0;  // norm weights ~1
  std::vector<int32_t> tokens(size_t(B * (T + 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % c.vocab);
  std::vector<int32_t> inputs, targets;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      inputs.push_back(tokens[size_t(b * (T + 1) + t)]);
      targets.push_back(tokens[size_t(b * (T + 1) + t + 1)]);
    }
  auto loss = [&] {
    std::copy(p.begin(), p.end(), m.params());
    return m.forward(inputs.data(), targets.data());
  };
  loss();
  m.zero_grad();
  m.backward();
  std::vector<double> g(m.grads(), m.grads() + m.n_params());
  for (const auto& t : m.layout().tensors()) {
    if (!only.empty() && std::none_of(only.begin(), only.end(), [&](const std::string& o) {
          return t.name.find(o) != std::string::npos;
        }))
      continue;
    std::vector<double> pt(p.begin() + t.offset, p.begin() + t.offset + t.size);
    std::vector<double> gt(g.begin() + t.offset, g.begin() + t.offset + t.size);
    auto f = [&] {
      std::copy(pt.begin(), pt.end(), p.begin() + t.offset);
      return loss();
    };
    ggtrain::test_support::expect_grad_matches_fd(pt, gt, f, t.name, 1e-7, 1e-5);
    std::copy(pt.begin(), pt.end(), p.begin() + t.offset);
  }
}

}  // namespace

TEST(ModelFd, GroupedQueryUntied) { check_model(tiny_config(4, 2, false)); }
TEST(ModelFd, MultiHeadTied) { check_model(tiny_config(2, 2, true)); }
TEST(ModelFd, MultiQueryTied) { check_model(tiny_config(4, 1, true)); }
TEST(ModelFd, LoraOnEveryTarget) {  // A and B of each target, with the base trainable too
  auto c = tiny_config(4, 2, false);
  c.lora = {3, 5.0, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}};
  // The adapters, and base tensors below them whose gradients flow back
  // through block 1's adapters (every base tensor is checked without LoRA above).
  check_model(c, {"lora", "blk.0.attn_norm", "blk.0.ffn_up", "token_embd"});
}
TEST(ModelFd, DonorLens) {  // token_embd replaced by a frozen table and lens.proj
  auto c = tiny_config(4, 2, false);
  c.donor_dim = 5;
  check_model(c);
}
