// infer/decoder: the KV-cache decoder against the training forward pass
// (every architecture, the fp16 cache, parameters in memory), and its
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/transformer.h"
#include "support/compare.h"
#include "support/random_model.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::small_model_config;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::within_abs;
using test_support::within_rel_to_max;
using test_support::write_random_model;

namespace {

// Gated DeltaNet layers 0 and 2 (2 key heads shared by 4 value heads of
// 16, 3 taps), gated attention 1 and 3 rotating 8 of each head's 16
// dimensions.
void qwen35_layers(model::Config& c) {
  c.n_layers = 4;
  c.attention_layers = "1,3";
  c.ssm_state_size = 16;
  c.ssm_group_count = 2;
  c.ssm_time_step_rank = 4;
  c.ssm_conv_kernel = 3;
  c.rope_dim = 8;
}

// T tokens (gemma3: local layers with a window of `window`), in a model of
// context `ctx` (0: at least T).
void check_decoder_matches_training_forward(bool tied, int64_t n_kv_heads, const std::string& arch = "llama",
                                            int64_t head_dim = 0, int64_t T = 40, int64_t window = 11,
                                            int64_t ctx = 0) {
  TempDir tmp;
  auto c = small_model_config(tied, n_kv_heads);
  c.arch = arch;
  c.head_dim = head_dim;
  c.ctx = ctx > 0 ? ctx : std::max(c.ctx, T);
  if (arch == "smollm3") c.n_layers = 5;  // layer 3 without RoPE, 4 with it again
  if (arch == "lfm2") {  // convolution layers 0 and 2 of 4 taps (LFM2's are 3), attention 1 and 3
    c.n_layers = 4;
    c.attention_layers = "1,3";
    c.shortconv_l_cache = 4;
  }
  if (arch == "qwen35" || arch == "qwen35moe") qwen35_layers(c);
  if (c.has_experts()) {  // 8 experts, 3 a token, none at a family's size
    c.n_experts = 8;
    c.n_experts_used = 3;
    if (c.architecture().expert_width_key) c.d_ff_expert = 40;
    if (c.has_shared_expert()) c.d_ff_shared = 56;
  }
  if (c.architecture().qk_norm_whole) c.n_kv_heads = c.n_heads;
  if (arch == "gemma3") {  // layers 0 and 2 local, 1 global; none of them at llama.cpp's defaults
    c.n_layers = 3;
    c.sliding_window = window;
    c.swa_pattern = 2;
    c.rope_freq_base_swa = 1000;
    c.rope_scaling_factor = 4;
  }
  auto p = write_random_model(c, tmp / "m.gguf");
  const int64_t V = c.vocab;
  model::Transformer<float> m(c, 1, T);
  std::copy(p.begin(), p.end(), m.params());
  auto toks = spread_tokens(T, V);
  m.forward(toks.data(), nullptr);

  gguf::GgufFile f(tmp / "m.gguf");
  const int64_t n_ctx = std::max(c.ctx, T);
  infer::Decoder batch(f, n_ctx);
  batch.eval(toks.data(), T, true);
  EXPECT_TRUE(within_rel_to_max(compare(batch.logits(), m.logits(), size_t(T * V)), 1e-5)) << "batch logits";

  // A prompt, then one token at a time through the KV cache. Step by step
  // the products run on one row, so their last bits differ from the batch
  // GEMMs', and recurrent layers carry that along: measured (worst position,
  // the v2, v3 and v4 builds on an AMD EPYC) qwen35 5.2-9.0e-6, qwen35moe
  // 1.2-1.6e-5 (its experts and shared expert on top), the others
  // 0.5-5.5e-6; limits 1e-5, and 2e-5 and 3e-5 for the two with DeltaNet
  // layers (about 2x their worst).
  const double step_limit = arch == "qwen35moe" ? 3e-5 : arch == "qwen35" ? 2e-5 : 1e-5;
  infer::Decoder step(f, n_ctx);
  step.eval(toks.data(), 7, false);
  EXPECT_TRUE(within_rel_to_max(compare(step.logits(), m.logits() + 6 * V, size_t(V)), 1e-5)) << "prompt logits";
  for (int64_t i = 7; i < T; ++i) {
    step.eval(&toks[size_t(i)], 1, false);
    ASSERT_TRUE(within_rel_to_max(compare(step.logits(), m.logits() + i * V, size_t(V)), step_limit))
        << "position " << i;
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
  EXPECT_EQ(model::config_from_gguf(f).rope_freq_factors, c.rope_freq_factors);
  const int64_t T = 40, V = c.vocab;
  const auto toks = spread_tokens(T, V);
  model::Transformer<float> m(c, 1, T);
  std::copy(p.begin(), p.end(), m.params());
  m.forward(toks.data(), nullptr);
  infer::Decoder d(f);
  d.eval(toks.data(), T, true);
  EXPECT_TRUE(within_rel_to_max(compare(d.logits(), m.logits(), size_t(T * V)), 1e-5));

  auto plain_cfg = c;
  plain_cfg.rope_freq_factors.clear();
  model::Transformer<float> plain(plain_cfg, 1, T);
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
// A window of 100 in a 300-token sequence: the prompt's flash kernel cuts
// the window inside and across its 64-row tiles, the cache's kernel slides it
// over 293 steps.
TEST(Decoder, MatchesTrainingForwardGemma3PastTheWindowAndTiles) {
  check_decoder_matches_training_forward(true, 2, "gemma3", 24, 300, 100);
}
TEST(Decoder, MatchesTrainingForwardSmollm3) { check_decoder_matches_training_forward(true, 2, "smollm3"); }
TEST(Decoder, MatchesTrainingForwardLfm2) { check_decoder_matches_training_forward(true, 2, "lfm2"); }
// 150 positions: the training forward's delta rule crosses two state
// checkpoints (every 64) and ends inside a chunk; the decoder's recurrent
// form, as one prompt and token by token, must follow it.
TEST(Decoder, MatchesTrainingForwardQwen35) { check_decoder_matches_training_forward(false, 2, "qwen35", 0, 150); }
// A window past the model's context (100 of 48): the recurrent families
// train it (their attention layers at rotary positions past 48), and the
// decoder given that much room must compute the same.
TEST(Decoder, MatchesTrainingForwardPastTheContextQwen35) {
  check_decoder_matches_training_forward(false, 2, "qwen35", 0, 100, 11, 48);
}
TEST(Decoder, MatchesTrainingForwardPastTheContextLfm2) {
  check_decoder_matches_training_forward(true, 2, "lfm2", 0, 100, 11, 48);
}

// 300 positions: the decoder routes a prompt in chunks of 256 tokens, each
// grouped by expert; one token at a time it runs 1-row products of the 3
// chosen experts. Both must follow the training forward's grouped GEMMs.
TEST(Decoder, MatchesTrainingForwardQwen3Moe) { check_decoder_matches_training_forward(true, 2, "qwen3moe", 24, 300); }
TEST(Decoder, MatchesTrainingForwardQwen35Moe) {
  check_decoder_matches_training_forward(false, 2, "qwen35moe", 0, 300);
}
TEST(Decoder, MatchesTrainingForwardOlmoe) { check_decoder_matches_training_forward(false, 4, "olmoe", 0, 300); }

namespace {

// A random model of config c written to a file, the training forward over
// T spread tokens (what the decoder's logits are held to) and a decoder on
// the file: the set-up of the cut-cache tests below.
struct CutCacheCase {
  TempDir tmp;
  model::Config c;
  int64_t T, V;
  std::vector<int32_t> toks;
  model::Transformer<float> m;
  std::unique_ptr<gguf::GgufFile> f;
  std::unique_ptr<infer::Decoder> d;

  CutCacheCase(const model::Config& config, int64_t positions)
      : c(config), T(positions), V(config.vocab), toks(spread_tokens(positions, config.vocab)), m(c, 1, T) {
    const auto p = write_random_model(c, tmp / "m.gguf");
    std::copy(p.begin(), p.end(), m.params());
    m.forward(toks.data(), nullptr);
    f = std::make_unique<gguf::GgufFile>(tmp / "m.gguf");
    d = std::make_unique<infer::Decoder>(*f);
  }
  // Runs another continuation after position `at`, then cuts back to it.
  void diverge_and_cut(int64_t at) {
    auto other = toks;
    for (int64_t i = at; i < T; ++i) other[size_t(i)] = int32_t((other[size_t(i)] + 5) % V);
    d->eval(other.data(), T, false);
    d->truncate(at);
  }
  // The decoder's last logits are the training forward's at position `at`.
  ::testing::AssertionResult agrees_at(int64_t at) const {
    return within_rel_to_max(compare(d->logits(), m.logits() + at * V, size_t(V)), 1e-5);
  }
  // Token by token from `from` to the end, each position checked.
  void continue_to_the_end(int64_t from) {
    for (int64_t i = from; i < T; ++i) {
      d->eval(&toks[size_t(i)], 1, false);
      ASSERT_TRUE(agrees_at(i)) << "position " << i;
    }
  }
};

model::Config qwen35_config() {
  auto c = small_model_config(true, 2);
  c.arch = "qwen35";
  qwen35_layers(c);
  return c;
}

}  // namespace

// A cache cut back to a shared prefix cannot cut the Gated DeltaNet state
// back: the next eval recomputes the kept prefix, and the logits after the
// cut equal the training forward's over the whole sequence.
TEST(Decoder, Qwen35TruncatedCacheRecomputesTheState) {
  CutCacheCase k(qwen35_config(), 40);
  k.diverge_and_cut(12);
  EXPECT_EQ(k.d->position(), 12);
  k.d->eval(k.toks.data() + 12, 3, false);  // positions 12..14
  EXPECT_TRUE(k.agrees_at(14));
  k.continue_to_the_end(15);
}

// A chat's next turn cuts the cache back to where the last reply began,
// which is where the last prompt ended: the Gated DeltaNet states saved
// there restart the layers, so only the new tokens run (counted at a block
// matrix: 3 rows, not the 15 of a recompute from position 0), and the logits
// equal the training forward's. A cut before every saved state recomputes
// from position 0.
TEST(Decoder, Qwen35NextTurnRestartsFromTheLastPromptsState) {
  CutCacheCase k(qwen35_config(), 24);
  int64_t rows = 0;
  k.d->observe_matrix_inputs([&](const infer::Decoder::MatrixInput& in) {
    if (in.name == "blk.0.ffn_up.weight") rows += in.rows;
  });
  k.d->eval(k.toks.data(), 12, false);  // the prompt
  for (int64_t i = 12; i < 20; ++i) {  // a reply the next turn renders otherwise
    const int32_t t = int32_t((k.toks[size_t(i)] + 5) % k.V);
    k.d->eval(&t, 1, false);
  }
  k.d->truncate(12);
  rows = 0;
  k.d->eval(k.toks.data() + 12, 3, false);  // positions 12..14
  EXPECT_EQ(rows, 3);
  EXPECT_TRUE(k.agrees_at(14));
  k.continue_to_the_end(15);
  k.d->truncate(10);  // before the states saved at 12 and 15
  rows = 0;
  k.d->eval(k.toks.data() + 10, 2, false);
  EXPECT_EQ(rows, 12);
  EXPECT_TRUE(k.agrees_at(11));
}

// A cache cut back to a shared prefix (a chat's next turn, a multiple-choice
// ending) continues the convolution from the kept positions: the logits
// after the cut equal the training forward's over the whole sequence.
TEST(Decoder, Lfm2TruncatedCacheContinuesTheConvolution) {
  auto c = small_model_config(true, 2);
  c.arch = "lfm2";
  c.n_layers = 3;
  c.attention_layers = "2";
  CutCacheCase k(c, 30);
  k.diverge_and_cut(12);
  k.d->eval(k.toks.data() + 12, 3, false);  // positions 12..14: read the kept 10 and 11
  EXPECT_TRUE(k.agrees_at(14));
  k.continue_to_the_end(15);
}

// SmolLM3's unrotated layers are exactly every fourth: with the same
// weights, three smollm3 layers give llama's logits to the bit, and four do
// not (the fourth attends without RoPE).
TEST(Decoder, Smollm3DropsRopeOnTheFourthLayerOnly) {
  const int64_t T = 24;
  auto logits = [&](const std::string& arch, int64_t n_layers) {
    TempDir tmp;
    auto c = small_model_config(false, 2);
    c.arch = arch;
    c.n_layers = n_layers;
    auto llama = c;
    llama.arch = "llama";
    const auto p = write_random_model(llama, tmp / "m.gguf");  // the same weights for both
    infer::Decoder d(c, p.data());
    const auto toks = spread_tokens(T, c.vocab);
    d.eval(toks.data(), T, true);
    return std::vector<float>(d.logits(), d.logits() + T * c.vocab);
  };
  const auto three = logits("smollm3", 3), three_llama = logits("llama", 3);
  EXPECT_EQ(three, three_llama);
  const auto four = logits("smollm3", 4), four_llama = logits("llama", 4);
  const auto cmp = compare(four.data(), four_llama.data(), four.size());
  std::printf("smollm3 vs llama, 4 layers: logits differ by %.3g at most\n", cmp.max_abs_diff);
  EXPECT_TRUE(test_support::differs_by_more_than(cmp, 1e-2)) << "the fourth layer rotates as llama's does";
}

// With an fp16 cache (llama.cpp's default), a prompt run as one batch (the
// flash kernel over the rounded keys and values) and the same tokens fed one
// at a time (the cache's own kernel) agree as closely as two fp32 paths do,
// and both stay near the fp32 cache's logits (fp16 keeps 11 bits).
TEST(Decoder, Fp16CacheBatchAndStepsAgreeAndFollowFp32) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  write_random_model(c, tmp / "m.gguf");
  const int64_t T = 40, V = c.vocab;
  const auto toks = spread_tokens(T, V);
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
    const auto toks = spread_tokens(30, c.vocab);
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

TEST(Decoder, RefusesTokensPastTheContext) {
  TempDir tmp;
  write_random_model(small_model_config(false, 2), tmp / "m.gguf");
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f, 8);
  auto t = spread_tokens(9, 96);
  EXPECT_THROW(d.eval(t.data(), 9, false), Error);
  t[0] = 96;
  EXPECT_THROW(d.eval(t.data(), 1, false), Error);  // outside the vocabulary
}

TEST(Decoder, UnsupportedWeightTypeIsAClearError) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  model::ParamLayout layout(c);
  std::vector<float> p(static_cast<size_t>(layout.total()), 0.01f);
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, p.data());
  w.write(tmp / "ok.gguf");
  // The same model with attn_q stored as IQ4_NL (18 bytes per 32 values), a
  // type ggtrain neither writes nor reads.
  gguf::GgufFile ok(tmp / "ok.gguf");
  gguf::GgufWriter bad;
  for (const auto& [k, v] : ok.metadata()) bad.set(k, v);
  std::vector<uint8_t> q4(size_t(64 * 64 / 32 * 18), 0);
  for (const auto& t : ok.tensors()) {
    if (t.name == "blk.0.attn_q.weight") bad.add_tensor_raw(t.name, gguf::TensorType::IQ4_NL, t.shape(), q4.data());
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
    EXPECT_NE(msg.find("IQ4_NL"), std::string::npos) << msg;
  }
}
