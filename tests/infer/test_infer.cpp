// Inference: the KV-cache decoder against the training forward pass, the
// generation loop, the perplexity rule, and the samplers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/perplexity.h"
#include "infer/sampler.h"
#include "kernels/number_formats.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/transformer.h"
#include "quant/blocks.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "support/compare.h"
#include "support/random_model.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::small_model_config;
using test_support::TempDir;
using test_support::within_abs;
using test_support::within_rel_to_max;
using test_support::write_random_model;

namespace {

std::vector<int32_t> tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % vocab));
  return t;
}

void check_decoder_matches_training_forward(bool tied, int64_t n_kv_heads, const std::string& arch = "llama",
                                            int64_t head_dim = 0) {
  TempDir tmp;
  auto c = small_model_config(tied, n_kv_heads);
  c.arch = arch;
  c.head_dim = head_dim;
  if (arch == "gemma3") {  // layers 0 and 2 local, 1 global; none of them at llama.cpp's defaults
    c.n_layers = 3;
    c.sliding_window = 11;
    c.swa_pattern = 2;
    c.rope_freq_base_swa = 1000;
    c.rope_scaling_factor = 4;
  }
  auto p = write_random_model(c, tmp / "m.gguf");
  const int64_t T = 40, V = c.vocab;
  model::LlamaModel<float> m(c, 1, T);
  std::copy(p.begin(), p.end(), m.params());
  auto toks = tokens(T, V);
  m.forward(toks.data(), nullptr);

  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder batch(f);
  batch.eval(toks.data(), T, true);
  EXPECT_TRUE(within_rel_to_max(compare(batch.logits(), m.logits(), size_t(T * V)), 1e-5)) << "batch logits";

  // A prompt, then one token at a time through the KV cache.
  infer::Decoder step(f);
  step.eval(toks.data(), 7, false);
  EXPECT_TRUE(within_rel_to_max(compare(step.logits(), m.logits() + 6 * V, size_t(V)), 1e-5)) << "prompt logits";
  for (int64_t i = 7; i < T; ++i) {
    step.eval(&toks[size_t(i)], 1, false);
    ASSERT_TRUE(within_rel_to_max(compare(step.logits(), m.logits() + i * V, size_t(V)), 1e-5)) << "position " << i;
  }
  EXPECT_EQ(step.position(), T);
}

}  // namespace

TEST(Decoder, MatchesTrainingForwardGqaUntied) { check_decoder_matches_training_forward(false, 2); }

// Llama 3.x RoPE scaling (rope_freqs.weight): written, read back, and applied
// by the decoder as by the training forward; and it matters (the same
// weights without the factors give other logits). llama.cpp's agreement on
// what the factors mean: tests/compat/llama_cpp_llama3_check.sh.
TEST(Decoder, MatchesTrainingForwardWithLlama3RopeFactors) {
  TempDir tmp;
  auto c = small_model_config(false, 2);
  c.rope_freq_base = 500000;
  c.rope_freq_factors = {1.0f, 1.5f, 3.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};  // d_head 16
  auto p = write_random_model(c, tmp / "m.gguf");
  gguf::GgufFile f(tmp / "m.gguf");
  EXPECT_EQ(model::config_from_llama_gguf(f).rope_freq_factors, c.rope_freq_factors);
  const int64_t T = 40, V = c.vocab;
  const auto toks = tokens(T, V);
  model::LlamaModel<float> m(c, 1, T);
  std::copy(p.begin(), p.end(), m.params());
  m.forward(toks.data(), nullptr);
  infer::Decoder d(f);
  d.eval(toks.data(), T, true);
  EXPECT_TRUE(within_rel_to_max(compare(d.logits(), m.logits(), size_t(T * V)), 1e-5));

  auto plain_cfg = c;
  plain_cfg.rope_freq_factors.clear();
  model::LlamaModel<float> plain(plain_cfg, 1, T);
  std::copy(p.begin(), p.end(), plain.params());
  plain.forward(toks.data(), nullptr);
  const auto cmp = compare(plain.logits(), m.logits(), size_t(T * V));
  ASSERT_TRUE(cmp.finite());
  EXPECT_GT(cmp.rel_to_max(), 1e-3) << "the factors do not change the logits: the test would not see them ignored";
}
TEST(Decoder, MatchesTrainingForwardMqaTied) { check_decoder_matches_training_forward(true, 1); }
TEST(Decoder, MatchesTrainingForwardQwen3) { check_decoder_matches_training_forward(true, 2, "qwen3", 24); }
TEST(Decoder, MatchesTrainingForwardQwen2) { check_decoder_matches_training_forward(false, 2, "qwen2"); }
TEST(Decoder, MatchesTrainingForwardGemma3) { check_decoder_matches_training_forward(true, 2, "gemma3", 24); }

// With an fp16 cache (llama.cpp's default), a prompt run as one batch (the
// flash kernel over the rounded keys and values) and the same tokens fed one
// at a time (the cache's own kernel) agree as closely as two fp32 paths do,
// and both stay near the fp32 cache's logits (fp16 keeps 11 bits).
TEST(Decoder, Fp16CacheBatchAndStepsAgreeAndFollowFp32) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  write_random_model(c, tmp / "m.gguf");
  const int64_t T = 40, V = c.vocab;
  const auto toks = tokens(T, V);
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder batch(f, 0, kernels::CacheType::kF16), exact(f, 0, kernels::CacheType::kF32);
  batch.eval(toks.data(), T, true);
  exact.eval(toks.data(), T, true);
  const Comparison to_fp32 = compare(batch.logits(), exact.logits(), size_t(T * V));
  EXPECT_TRUE(within_rel_to_max(to_fp32, 5e-3)) << "fp16 cache vs fp32 cache";
  // The check below could not tell an unrounded batch from a rounded one
  // if fp16 changed less than this.
  EXPECT_GT(to_fp32.rel_to_max(), 1e-3) << "the fp16 cache rounded (almost) nothing";
  const std::vector<float> all(batch.logits(), batch.logits() + T * V);
  infer::Decoder step(f, 0, kernels::CacheType::kF16);
  for (int64_t i = 0; i < T; ++i) {
    step.eval(&toks[size_t(i)], 1, false);
    // Not 1e-5: a key computed by a GEMM (batch) or a GEMV (step) can differ
    // in its last float bit and round to the neighbouring fp16 value
    // (measured up to 9.5e-5; a batch attending to unrounded keys: 1e-3).
    ASSERT_TRUE(within_rel_to_max(compare(step.logits(), all.data() + i * V, size_t(V)), 3e-4)) << "position " << i;
  }
}

// The decoder over parameters in memory (a training run's) computes what the
// decoder over the GGUF written from them computes, bit for bit.
TEST(Decoder, InMemoryParametersEqualTheirGguf) {
  TempDir tmp;
  for (bool tied : {false, true}) {
    const auto c = small_model_config(tied, 2);
    const auto p = write_random_model(c, tmp / "m.gguf");
    gguf::GgufFile f(tmp / "m.gguf");
    infer::Decoder from_file(f), in_memory(c, p.data());
    const auto toks = tokens(30, c.vocab);
    from_file.eval(toks.data(), 30, true);
    in_memory.eval(toks.data(), 30, true);
    EXPECT_TRUE(within_abs(compare(in_memory.logits(), from_file.logits(), size_t(30 * c.vocab)), 0.0))
        << "tied " << tied;
  }
  auto lens = small_model_config(false, 2);
  lens.donor_dim = 16;  // a lens model must be folded first
  const std::vector<float> none(size_t(model::ParamLayout(lens).total()));
  EXPECT_THROW(infer::Decoder(lens, none.data()), Error);
}

// The generation loop: the prompt once, then one token at a time; it stops
// after the stop token, at n tokens, or when the context is full, and the
// greedy continuation is the argmax of the full forward pass at each step.
TEST(Generate, GreedyFollowsTheFullForwardAndStops) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  const auto p = write_random_model(c, tmp / "m.gguf");
  infer::Decoder dec(c, p.data(), nullptr, 20);
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = tokens(5, c.vocab);
  std::vector<int32_t> seen;
  const auto g = infer::generate(dec, prompt, 8, greedy, 1, {}, [&](int32_t t) { seen.push_back(t); });
  ASSERT_EQ(g.tokens.size(), 8u);
  EXPECT_EQ(seen, g.tokens);
  std::vector<int32_t> ctx = prompt;
  for (int32_t t : g.tokens) {
    infer::Decoder full(c, p.data(), nullptr, 20);
    full.eval(ctx.data(), int64_t(ctx.size()), false);
    EXPECT_EQ(t, int32_t(std::max_element(full.logits(), full.logits() + c.vocab) - full.logits()));
    ctx.push_back(t);
  }
  // Stops after the stop token (kept), and when the context (20) is full.
  const auto stop_at = std::find(g.tokens.begin(), g.tokens.end(), g.tokens[2]);  // its first time
  EXPECT_EQ(infer::generate(dec, prompt, 8, greedy, 1, {g.tokens[2]}).tokens,
            std::vector<int32_t>(g.tokens.begin(), stop_at + 1));
  EXPECT_EQ(infer::generate(dec, prompt, 100, greedy, 1, {}).tokens.size(), size_t(20 - 5 + 1));
}

TEST(Decoder, RefusesTokensPastTheContext) {
  TempDir tmp;
  write_random_model(small_model_config(false, 2), tmp / "m.gguf");
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f, 8);
  auto t = tokens(9, 96);
  EXPECT_THROW(d.eval(t.data(), 9, false), Error);
  t[0] = 96;
  EXPECT_THROW(d.eval(t.data(), 1, false), Error);  // outside the vocabulary
}

TEST(Perplexity, FollowsLlamaCppRule) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  auto p = write_random_model(c, tmp / "m.gguf");
  const int64_t n_ctx = 16, bos = 1;
  auto toks = tokens(16 * 3 + 5, c.vocab);  // 3 full chunks; the tail is dropped
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f);
  std::vector<int32_t> token_bytes(size_t(c.vocab));
  for (size_t v = 0; v < token_bytes.size(); ++v) token_bytes[v] = int32_t(v % 5);  // some tokens have none
  auto r = infer::perplexity(d, toks, n_ctx, bos, {}, &token_bytes);
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.scored, 3 * (n_ctx - 1 - n_ctx / 2));
  // Independently, with the training forward pass: chunk c, first token BOS,
  // positions n_ctx/2 .. n_ctx-2 predict the next original token.
  model::LlamaModel<float> m(c, 1, n_ctx);
  std::copy(p.begin(), p.end(), m.params());
  double nll = 0, bytes = 0;
  for (int64_t ch = 0; ch < 3; ++ch) {
    std::vector<int32_t> w(toks.begin() + ch * n_ctx, toks.begin() + (ch + 1) * n_ctx);
    w[0] = bos;
    m.forward(w.data(), nullptr);
    for (int64_t k = n_ctx / 2; k < n_ctx - 1; ++k) {
      const float* z = m.logits() + k * c.vocab;
      double mx = *std::max_element(z, z + c.vocab), s = 0;
      for (int64_t v = 0; v < c.vocab; ++v) s += std::exp(z[v] - mx);
      nll += mx + std::log(s) - z[toks[size_t(ch * n_ctx + k + 1)]];
      bytes += double(toks[size_t(ch * n_ctx + k + 1)] % 5);
    }
  }
  EXPECT_NEAR(r.ppl, std::exp(nll / double(r.scored)), 1e-5 * r.ppl);
  // Bits per byte: the same total in bits over the scored tokens' bytes.
  EXPECT_EQ(double(r.bytes), bytes);
  EXPECT_NEAR(r.bpb, nll / std::log(2.0) / bytes, 1e-5 * r.bpb);
  EXPECT_THROW(infer::perplexity(d, tokens(31, c.vocab), n_ctx, bos), Error);  // < 2 chunks
}

TEST(Sampler, GreedyTopKAndPenalty) {
  std::vector<float> z{0.5f, 2.0f, -1.0f, 1.9f};
  auto rng = infer::sampler_rng(1);
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng), 1);
  infer::SamplerConfig top1;
  top1.top_k = 1;
  top1.temperature = 5;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(infer::sample_token(z.data(), 4, top1, rng), 1);
  // Repeat penalty 2: logit 2.0 of a recent token becomes 1.0 < 1.9.
  greedy.repeat_penalty = 2.0;
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {1}), 3);
  // All penalised: 2.0 -> 1.0, 1.9 -> 0.95, and -1 -> -2 (multiplied when negative).
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {2, 1, 3}), 1);
  z = {0.5f, -0.6f, -1.0f, -0.7f};
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {0}), 0);  // 0.25 still highest
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {1}), 0);
  z = {-0.5f, -0.6f};
  EXPECT_EQ(infer::sample_token(z.data(), 2, greedy, rng, {0}), 1);  // -0.5 -> -1.0
}

TEST(Sampler, TemperatureOneDrawsFromTheSoftmax) {
  std::vector<float> z{0.0f, float(std::log(3.0))};
  infer::SamplerConfig s;
  s.temperature = 1;
  s.top_k = 0;
  s.top_p = 1;
  s.min_p = 0;
  auto rng = infer::sampler_rng(7);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += infer::sample_token(z.data(), 2, s, rng);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
  auto a = infer::sampler_rng(9), b = infer::sampler_rng(9);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(infer::sample_token(z.data(), 2, s, a), infer::sample_token(z.data(), 2, s, b));
}

// top-p and min-p cut the distribution before temperature (a temperature
// of 1000 then makes what is left nearly uniform): probabilities 0.5, 0.3,
// 0.15, 0.05 keep {0, 1} at top-p 0.75 and {0, 1, 2} at min-p 0.25 (>= 0.125).
TEST(Sampler, TopPAndMinPCutBeforeTemperature) {
  std::vector<float> z;
  for (double p : {0.5, 0.3, 0.15, 0.05}) z.push_back(float(std::log(p)));
  auto seen_with = [&](double top_p, double min_p) {
    infer::SamplerConfig s;
    s.temperature = 1000;
    s.top_k = 0;
    s.top_p = top_p;
    s.min_p = min_p;
    auto rng = infer::sampler_rng(3);
    std::vector<int> seen(4, 0);
    for (int i = 0; i < 2000; ++i) ++seen[size_t(infer::sample_token(z.data(), 4, s, rng))];
    return seen;
  };
  const auto p = seen_with(0.75, 0);
  EXPECT_GT(p[0], 800);
  EXPECT_GT(p[1], 800);
  EXPECT_EQ(p[2] + p[3], 0);
  const auto m = seen_with(1, 0.25);
  EXPECT_GT(m[0], 500);
  EXPECT_GT(m[1], 500);
  EXPECT_GT(m[2], 500);
  EXPECT_EQ(m[3], 0);
  const auto both = seen_with(0.75, 0.25);  // min-p on what top-p left
  EXPECT_EQ(both[2] + both[3], 0);
}
TEST(Decoder, UnsupportedWeightTypeIsAClearError) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  model::ParamLayout layout(c);
  std::vector<float> p(static_cast<size_t>(layout.total()), 0.01f);
  gguf::GgufWriter w;
  model::add_llama_model(w, c, layout, p.data());
  w.write(tmp / "ok.gguf");
  // The same model with attn_q stored as Q4_1 (20 bytes per 32 values), a
  // type ggtrain neither writes nor reads.
  gguf::GgufFile ok(tmp / "ok.gguf");
  gguf::GgufWriter bad;
  for (const auto& [k, v] : ok.metadata()) bad.set(k, v);
  std::vector<uint8_t> q4(size_t(64 * 64 / 32 * 20), 0);
  for (const auto& t : ok.tensors()) {
    if (t.name == "blk.0.attn_q.weight") bad.add_tensor_raw(t.name, gguf::TensorType::Q4_1, t.shape(), q4.data());
    else bad.add_tensor_raw(t.name, t.type, t.shape(), t.data);
  }
  bad.write(tmp / "bad.gguf");
  gguf::GgufFile f(tmp / "bad.gguf");
  try {
    infer::Decoder d(f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Q4_1"), std::string::npos) << msg;
  }
}
