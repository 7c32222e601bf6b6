// Inference: the KV-cache decoder against the training forward pass, export
// to F16/BF16/Q8_0, the perplexity rule, and the samplers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "chat/ollama_modelfile.h"
#include "convert/export.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/perplexity.h"
#include "infer/sampler.h"
#include "kernels/number_formats.h"
#include "kernels/q8_dot.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/transformer.h"
#include "nn/packed_matrix.h"
#include "quant/blocks.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "support/compare.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::TempDir;
using test_support::within_abs;
using test_support::within_rel_to_max;

namespace {

model::LlamaConfig config(bool tied, int64_t n_kv_heads) {
  model::LlamaConfig c;
  c.vocab = 96;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = n_kv_heads;
  c.d_ff = 96;
  c.ctx = 48;
  c.tied = tied;
  return c;
}

// Random model written as a llama GGUF; returns its parameters.
std::vector<float> write_model(const model::LlamaConfig& c, const std::string& path) {
  model::ParamLayout layout(c);
  std::vector<float> p(static_cast<size_t>(layout.total()));
  model::init_params(c, layout, p.data(), 5, 0.2);  // large weights: logits that matter
  // Biases (init: 0), head norms and post-norms (init: 1) away from their start, so a
  // decoder that skipped or swapped one would be seen.
  for (const auto& t : layout.tensors())
    if (t.name.ends_with(".bias") || t.name.ends_with("_q_norm.weight") || t.name.ends_with("_k_norm.weight") ||
        t.name.ends_with("post_attention_norm.weight") || t.name.ends_with("post_ffw_norm.weight"))
      for (int64_t i = 0; i < t.size; ++i)
        p[size_t(t.offset + i)] += float(0.3 * std::sin(double(i) * 0.7 + double(t.offset % 97)));
  gguf::GgufWriter w;
  model::add_llama_model(w, c, layout, p.data());
  w.write(path);
  return p;
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % vocab));
  return t;
}

void check_decoder_matches_training_forward(bool tied, int64_t n_kv_heads, const std::string& arch = "llama",
                                            int64_t head_dim = 0) {
  TempDir tmp;
  auto c = config(tied, n_kv_heads);
  c.arch = arch;
  c.head_dim = head_dim;
  if (arch == "gemma3") {  // layers 0 and 2 local, 1 global; none of them at llama.cpp's defaults
    c.n_layers = 3;
    c.sliding_window = 11;
    c.swa_pattern = 2;
    c.rope_freq_base_swa = 1000;
    c.rope_scaling_factor = 4;
  }
  auto p = write_model(c, tmp / "m.gguf");
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
  auto c = config(false, 2);
  c.rope_freq_base = 500000;
  c.rope_freq_factors = {1.0f, 1.5f, 3.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};  // d_head 16
  auto p = write_model(c, tmp / "m.gguf");
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
  const auto c = config(false, 2);
  write_model(c, tmp / "m.gguf");
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
    const auto c = config(tied, 2);
    const auto p = write_model(c, tmp / "m.gguf");
    gguf::GgufFile f(tmp / "m.gguf");
    infer::Decoder from_file(f), in_memory(c, p.data());
    const auto toks = tokens(30, c.vocab);
    from_file.eval(toks.data(), 30, true);
    in_memory.eval(toks.data(), 30, true);
    EXPECT_TRUE(within_abs(compare(in_memory.logits(), from_file.logits(), size_t(30 * c.vocab)), 0.0))
        << "tied " << tied;
  }
  auto lens = config(false, 2);
  lens.donor_dim = 16;  // a lens model must be folded first
  const std::vector<float> none(size_t(model::ParamLayout(lens).total()));
  EXPECT_THROW(infer::Decoder(lens, none.data()), Error);
}

// The generation loop: the prompt once, then one token at a time; it stops
// after the stop token, at n tokens, or when the context is full, and the
// greedy continuation is the argmax of the full forward pass at each step.
TEST(Generate, GreedyFollowsTheFullForwardAndStops) {
  TempDir tmp;
  const auto c = config(false, 2);
  const auto p = write_model(c, tmp / "m.gguf");
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
  write_model(config(false, 2), tmp / "m.gguf");
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f, 8);
  auto t = tokens(9, 96);
  EXPECT_THROW(d.eval(t.data(), 9, false), Error);
  t[0] = 96;
  EXPECT_THROW(d.eval(t.data(), 1, false), Error);  // outside the vocabulary
}

TEST(Export, Q8_0BlocksAreTheReferenceQuantizerAndNormsStayF32) {
  TempDir tmp;
  const auto c = config(false, 2);
  auto p = write_model(c, tmp / "m.gguf");
  convert::export_model(tmp / "m.gguf", tmp / "q.gguf", gguf::TensorType::Q8_0);
  gguf::GgufFile q(tmp / "q.gguf");
  model::ParamLayout layout(c);
  EXPECT_EQ(q.get_uint("general.file_type"), 7u);
  for (const auto& t : layout.tensors()) {
    const auto& ti = q.tensor(t.name);
    if (t.shape.size() == 1) {
      EXPECT_EQ(ti.type, gguf::TensorType::F32) << t.name;
      continue;
    }
    ASSERT_EQ(ti.type, gguf::TensorType::Q8_0) << t.name;
    std::vector<uint8_t> expect(gguf::storage_bytes(gguf::TensorType::Q8_0, size_t(t.size)));
    kernels::quantize_q8_0(p.data() + t.offset, expect.data(), size_t(t.size));
    EXPECT_EQ(0, std::memcmp(ti.data, expect.data(), expect.size())) << t.name;
  }
  // F16 and BF16 round each weight once, to nearest even.
  convert::export_model(tmp / "m.gguf", tmp / "h.gguf", gguf::TensorType::F16);
  gguf::GgufFile h(tmp / "h.gguf");
  const auto& emb = layout.get("token_embd.weight");
  auto back = quant::tensor_floats(h, h.tensor("token_embd.weight"));
  for (int64_t i = 0; i < emb.size; ++i)
    ASSERT_EQ(back[size_t(i)], kernels::fp16_to_fp32(kernels::fp32_to_fp16(p[size_t(emb.offset + i)])));
}

TEST(Export, ModelfileNamesTheGgufAndStopPiece) {
  const std::string mf = chat::ollama_modelfile("m.gguf", "</s>");
  EXPECT_NE(mf.find("FROM ./m.gguf\n"), std::string::npos);
  EXPECT_NE(mf.find("PARAMETER stop \"</s>\""), std::string::npos);
  EXPECT_NE(mf.find("{{ .Prompt }}"), std::string::npos);
}

TEST(Perplexity, FollowsLlamaCppRule) {
  TempDir tmp;
  const auto c = config(false, 2);
  auto p = write_model(c, tmp / "m.gguf");
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

// A quantized weight as the decoder multiplies it: each type's dequantized
// rows times the activations rounded to its dot type (Q8_0 for the 32-block
// types, Q8_K for the K-quants), computed here in double from the decoded
// blocks: what ggml's integer dot products compute, up to float summation.
// The activations are rounded here too, as ggml defines its quantizers (not
// with the library's rounding). A batch of 3 takes the decode kernels, one
// of 9 the prompt path.
class QuantizedMatrix : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Decoder, QuantizedMatrix, ::testing::Values(3, 9));
// What ggml's Q5_1 x Q8_1 dot adds beyond the dequantized weights times the
// rounded activations: each Q8_1 block carries s = fp16(d * sum of its
// quants), d = amax / 127 before rounding, and the weight block's min m
// multiplies s where the rounded activations would give fp16(d) * sum:
// sum over blocks of m * (s - fp16(d) * sum).
namespace {
bool is_k_quant(gguf::TensorType t) {
  return t == gguf::TensorType::Q4_K || t == gguf::TensorType::Q5_K || t == gguf::TensorType::Q6_K;
}

// x as ggml's integer dot products see it, from ggml-quants.c's definitions.
// Q8_0 (and Q8_1's quants): blocks of 32, d = amax / 127, q = round(x / d),
// the value q * fp16(d). Q8_K: blocks of 256, the element of largest |x|
// (with its sign) sets iscale = -127 / max, q = min(127, nearest(iscale x)),
// the value q / iscale (a float d). Ties between two integers round
// differently in ggml's reference (roundf) and SIMD (to even) quantizers;
// `ties` counts them, so the test can show its data has none.
std::vector<float> rounded_as_ggml(gguf::TensorType weight, const float* x, int64_t n, int* ties) {
  std::vector<float> out(static_cast<size_t>(n));
  const int64_t block = is_k_quant(weight) ? 256 : 32;
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0, max = 0;
    for (int64_t j = b; j < b + block; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    float multiplier = 0, value_of_one = 0;
    if (is_k_quant(weight)) {
      const float iscale = amax != 0 ? -127.f / max : 0.f;
      multiplier = iscale;
      value_of_one = amax != 0 ? 1 / iscale : 0.f;
    } else {
      const float d = amax / 127.f;
      multiplier = d != 0 ? 1.0f / d : 0.f;
      value_of_one = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d));
    }
    for (int64_t j = b; j < b + block; ++j) {
      const float v = x[j] * multiplier;
      if (std::fabs(v - std::trunc(v)) == 0.5f) ++*ties;
      const float q = std::min(127.f, std::nearbyint(v));
      out[size_t(j)] = q * value_of_one;
    }
  }
  return out;
}

double q8_1_sum_term(const uint8_t* q5_1, const float* x, int64_t row, int64_t cols) {
  double term = 0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += int(std::round(xb[j] * id));
    const uint8_t* block = q5_1 + (row * cols / 32 + b) * 24;  // d, m (fp16 each), high bits, low nibbles
    uint16_t m16;
    std::memcpy(&m16, block + 2, 2);
    const double s = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d * float(sum)));
    term += double(kernels::fp16_to_fp32(m16)) * (s - double(kernels::fp16_to_fp32(kernels::fp32_to_fp16(d))) * sum);
  }
  return term;
}
}  // namespace

TEST_P(QuantizedMatrix, MultipliesAsGgmlDoes) {
  TempDir tmp;
  constexpr int64_t kRows = 21, kCols = 512;  // 21: a partial group of 16 rows in the VNNI layout
  const int64_t kBatch = GetParam();
  std::vector<float> w(size_t(kRows * kCols)), x(size_t(kBatch * kCols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37 * double(i)) * 0.05f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11 * double(i)) * 2.0f;
  for (auto type : {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q5_0, gguf::TensorType::Q5_1,
                    gguf::TensorType::Q4_K, gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    gguf::GgufWriter wr;
    quant::add_float_tensor(wr, "m.weight", type, {uint64_t(kCols), uint64_t(kRows)}, w.data());
    wr.write(tmp / "m.gguf");
    gguf::GgufFile f(tmp / "m.gguf");
    const nn::PackedMatrix m(f, f.tensor("m.weight"));
    std::vector<float> y(size_t(kBatch * kRows));
    m.matmul(x.data(), y.data(), kBatch);
    const std::vector<float> wq = quant::tensor_floats(f, f.tensor("m.weight"));
    int ties = 0;
    const std::vector<float> xr = rounded_as_ggml(type, x.data(), int64_t(x.size()), &ties);
    ASSERT_EQ(ties, 0) << "an activation halfway between two quants: ggml's paths disagree on it";
    for (int64_t i = 0; i < kBatch; ++i)
      for (int64_t r = 0; r < kRows; ++r) {
        double want = 0;
        for (int64_t k = 0; k < kCols; ++k) want += double(wq[size_t(r * kCols + k)]) * xr[size_t(i * kCols + k)];
        if (type == gguf::TensorType::Q5_1)
          want += q8_1_sum_term(f.tensor("m.weight").data, &x[size_t(i * kCols)], r, kCols);
        const float got = y[size_t(i * kRows + r)];
        ASSERT_TRUE(std::isfinite(got));
        ASSERT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << gguf::type_name(type) << " row " << r;
      }
    // Rows as the decoder reads them (token embeddings): ggml's dequantized values exactly.
    std::vector<float> row(static_cast<size_t>(kCols));
    for (int64_t r = 0; r < kRows; ++r) {
      m.row(r, row.data());
      for (int64_t k = 0; k < kCols; ++k)
        ASSERT_EQ(row[size_t(k)], wq[size_t(r * kCols + k)])
            << gguf::type_name(type) << " row " << r << " column " << k;
    }
    // and the rounding is really there: unrounded activations give other values
    double plain = 0;
    for (int64_t k = 0; k < kCols; ++k) plain += double(wq[size_t(k)]) * x[size_t(k)];
    EXPECT_GT(std::fabs(plain - y[0]), 1e-6) << gguf::type_name(type);
  }
}

TEST(Decoder, UnsupportedWeightTypeIsAClearError) {
  TempDir tmp;
  const auto c = config(false, 2);
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

// A hostile head count of 0 (with llama.rope.dimension_count present, as in
// every llama.cpp model) is a clear error, not a division by zero while the
// RoPE width is compared with the head size.
// Gemma 3's sliding-window keys: the window always (llama.cpp reads no
// window without it), the pattern and the local RoPE base only where they
// differ from what llama.cpp assumes (the converter writes neither), linear
// RoPE scaling as the converter writes it; all read back.
TEST(ModelConfig, Gemma3WritesTheSlidingWindowKeysLlamaCppWouldNotAssume) {
  TempDir tmp;
  auto c = config(true, 2);
  c.arch = "gemma3";
  c.sliding_window = 512;
  write_model(c, tmp / "default.gguf");
  const gguf::GgufFile d(tmp / "default.gguf");
  EXPECT_EQ(d.get_uint("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(d.find("gemma3.attention.sliding_window_pattern"), nullptr);
  EXPECT_EQ(d.find("gemma3.rope.freq_base_swa"), nullptr);
  EXPECT_EQ(d.find("gemma3.rope.scaling.type"), nullptr);
  EXPECT_EQ(model::config_from_llama_gguf(d).swa_pattern, 6);
  EXPECT_EQ(model::config_from_llama_gguf(d).rope_freq_base_swa, 10000.0);
  c.swa_pattern = 4;
  c.rope_freq_base_swa = 20000;
  c.rope_scaling_factor = 8;
  write_model(c, tmp / "other.gguf");
  const gguf::GgufFile o(tmp / "other.gguf");
  EXPECT_EQ(o.get_uint("gemma3.attention.sliding_window_pattern"), 4u);
  EXPECT_EQ(o.get_float("gemma3.rope.freq_base_swa"), 20000.0);
  EXPECT_EQ(o.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(o.get_float("gemma3.rope.scaling.factor"), 8.0);
  const auto back = model::config_from_llama_gguf(o);
  for (const auto& f : model::llama_fields()) EXPECT_TRUE(model::same_field(back, c, f, true)) << f.name;
}

TEST(ModelConfig, ZeroHeadCountIsAClearError) {
  ggtrain::test_support::TempDir tmp("ggtrain_zero_heads");
  const ggtrain::gguf::GgufFile src(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf");
  ASSERT_NE(src.find("llama.rope.dimension_count"), nullptr);
  ggtrain::gguf::GgufWriter w;
  for (const auto& [k, v] : src.metadata())
    w.set(k, k == "llama.attention.head_count" ? ggtrain::gguf::Value::u32(0) : v);
  std::vector<std::vector<float>> keep;
  for (const auto& t : src.tensors()) {
    keep.push_back(quant::tensor_floats(src, t));
    quant::add_float_tensor(w, t.name, t.type, t.shape(), keep.back().data());
  }
  w.write(tmp / "zero-heads.gguf");
  const ggtrain::gguf::GgufFile f(tmp / "zero-heads.gguf");
  for (bool embedding_is_d_model : {true, false}) {
    try {
      ggtrain::model::config_from_llama_gguf(f, embedding_is_d_model);
      ADD_FAILURE() << "a head count of 0 was accepted";
    } catch (const ggtrain::Error& e) {
      EXPECT_NE(std::string(e.what()).find("n_heads must be positive"), std::string::npos) << e.what();
    }
  }
}

// The Q8_0 dot product of inference (kernels/q8_dot.h): the hardware fp16
// conversion gives the software one's value for every finite half, and the
// vectorised dot equals the per-block scalar one up to the float sum's order.
TEST(Q8Dot, ScaleConversionMatchesSoftware) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint8_t blk[2] = {uint8_t(h & 0xff), uint8_t(h >> 8)};
    const float sw = kernels::fp16_to_fp32(uint16_t(h));
    if (std::isnan(sw)) {
      EXPECT_TRUE(std::isnan(kernels::q8_block_scale(blk))) << h;
      continue;
    }
    ASSERT_EQ(kernels::q8_block_scale(blk), sw) << "half " << h;
  }
}

TEST(Q8Dot, VectorDotEqualsScalarDot) {
  const int64_t n = 32 * 9;
  std::vector<float> w(n), x(n);
  uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(int64_t(s >> 40) % 2001 - 1000) / 250.f;
  };
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = next(), x[size_t(i)] = next();
  std::vector<uint8_t> wq(size_t(kernels::q8_0_row_bytes(n))), xq(wq.size());
  kernels::quantize_q8_0(w.data(), wq.data(), size_t(n));
  kernels::quantize_q8_0(x.data(), xq.data(), size_t(n));
  const float v = kernels::dot_q8_0(wq.data(), xq.data(), n), ref = kernels::dot_q8_0_scalar(wq.data(), xq.data(), n);
  ASSERT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, ref, 1e-5 * std::fabs(ref) + 1e-6);
  double exact = 0;  // and both are the quantized vectors' dot product
  std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
  kernels::dequantize_q8_0(wq.data(), wd.data(), size_t(n));
  kernels::dequantize_q8_0(xq.data(), xd.data(), size_t(n));
  for (int64_t i = 0; i < n; ++i) exact += double(wd[size_t(i)]) * xd[size_t(i)];
  EXPECT_NEAR(ref, exact, 1e-5 * std::fabs(exact) + 1e-5);
}
