// Batched decoding (Decoder::eval_batch, infer::generate_group) against each
// sequence decoded alone, for every architecture, at 3 threads (what users
// run), with F32 and F16 caches. Part of the infer suite: it runs at every
// CPU level.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdio>
#include <string>
#include <vector>

#include "infer/decoder.h"
#include "infer/generate.h"
#include "model/architecture.h"
#include "support/compare.h"
#include "support/family_shapes.h"
#include "support/random_model.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::within_rel_to_max;

namespace {

model::Config config_for(const model::Architecture& row) {
  auto c = test_support::small_model_config(false, 2);
  c.arch = row.name;
  c.ctx = 64;
  if (row.default_swa_pattern) c.sliding_window = 9, c.swa_pattern = 2;  // cut inside the prompts and the steps
  test_support::shape_family_layers(c);  // one layer without RoPE; layer 0 recurrent
  return c;
}

// Sequence s: a prompt of its own length (so the batch's rows sit at
// different positions; the longest fills the flash kernel's tiles), then
// its own token per step.
constexpr int64_t kSequences = 4, kSteps = 12;
std::vector<int32_t> prompt_of(const model::Config& c, int64_t s) {
  auto t = test_support::spread_tokens(3 + 7 * s, c.vocab);
  for (auto& id : t) id = int32_t((id + 31 * s) % c.vocab);
  return t;
}
int32_t step_token(const model::Config& c, int64_t s, int64_t step) {
  return int32_t((7 + 13 * s + 29 * step) % c.vocab);
}

// Which sequences a step runs, in which order: all, then a shrinking,
// reordered subset (replies that stopped leave the batch).
std::vector<int64_t> batch_at(int64_t step) {
  if (step < 4) return {0, 1, 2, 3};
  if (step < 8) return {3, 1, 0};
  return {2, 0};
}

// Each sequence alone: its prompt, then each of its steps' token, one at a
// time, keeping the logits of every step it ran in the batch.
std::vector<std::vector<float>> alone(const model::Config& c, const std::vector<float>& params,
                                      kernels::CacheType cache) {
  std::vector<std::vector<float>> out(kSequences);
  for (int64_t s = 0; s < kSequences; ++s) {
    infer::Decoder d(c, params.data(), nullptr, 0, cache);
    const auto p = prompt_of(c, s);
    d.eval(p.data(), int64_t(p.size()), false);
    for (int64_t step = 0; step < kSteps; ++step) {
      const auto b = batch_at(step);
      if (std::find(b.begin(), b.end(), s) == b.end()) continue;
      const int32_t t = step_token(c, s, step);
      d.eval(&t, 1, false);
      out[size_t(s)].insert(out[size_t(s)].end(), d.logits(), d.logits() + c.vocab);
    }
  }
  return out;
}

// The same through one decoder: each prompt into sequence 0 and copied to
// its own sequence (sequence 0's prompt last), then the steps batched.
std::vector<std::vector<float>> batched(const model::Config& c, const std::vector<float>& params,
                                        kernels::CacheType cache) {
  infer::Decoder d(c, params.data(), nullptr, 0, cache);
  d.set_sequences(kSequences);
  for (int64_t s = kSequences - 1; s >= 0; --s) {
    const auto p = prompt_of(c, s);
    d.reset();
    d.eval(p.data(), int64_t(p.size()), false);
    d.copy_sequence(0, s);
  }
  std::vector<std::vector<float>> out(kSequences);
  for (int64_t step = 0; step < kSteps; ++step) {
    const auto b = batch_at(step);
    std::vector<int32_t> tokens;
    for (int64_t s : b) tokens.push_back(step_token(c, s, step));
    d.eval_batch(tokens.data(), b.data(), int64_t(b.size()));
    for (size_t j = 0; j < b.size(); ++j)
      out[size_t(b[j])].insert(out[size_t(b[j])].end(), d.logits() + int64_t(j) * c.vocab,
                               d.logits() + int64_t(j + 1) * c.vocab);
  }
  return out;
}

}  // namespace

// Not bit-identical by design: a batch's products are one GEMM over its
// rows where a sequence alone is a one-row product, and the library may sum
// in another order (and an fp16 cache may round a key that differs in its
// last bit to the neighbouring step). Measured on an Intel Xeon (AVX-512,
// AVX512_BF16, no AMX), 3 threads, of the largest logit, the worst
// architecture: F32 cache 6.6e-6 (v4), 4.3e-6 (v3), 2.9e-6 (v2); F16
// cache 6.3e-5 (v4), 4.3e-5 (v3), 1.4e-4 (v2). Limits 5e-5 and 5e-4, the decoder's
// thread-count limits (test_decoder_threads.cpp), which cover the other levels' and -O1's larger differences there.
// Negative controls, measured on every architecture: a batch whose rows all read sequence 0's cache differs by 0.36
// to 1.8, one that gives every row the first row's position by 0.26 to 1.8, one whose Gated DeltaNet rows all run
// sequence 0's state by 1.6.
TEST(DecoderBatch, EachRowEqualsItsSequenceDecodedAlone) {
  omp_set_num_threads(3);  // before the decoders plan their per-thread scratch
  for (const auto& row : model::architectures()) {
    const model::Config c = config_for(row);
    test_support::TempDir tmp;
    const std::vector<float> params = test_support::write_random_model(c, tmp / "m.gguf");
    for (const auto cache : {kernels::CacheType::kF32, kernels::CacheType::kF16}) {
      const bool f16 = cache == kernels::CacheType::kF16;
      SCOPED_TRACE(std::string(row.name) + (f16 ? " f16 cache" : " f32 cache"));
      const auto one = alone(c, params, cache), many = batched(c, params, cache);
      double worst = 0;
      for (int64_t s = 0; s < kSequences; ++s) {
        ASSERT_EQ(many[size_t(s)].size(), one[size_t(s)].size());
        const Comparison cmp = compare(many[size_t(s)], one[size_t(s)]);
        EXPECT_TRUE(within_rel_to_max(cmp, f16 ? 5e-4 : 5e-5)) << "sequence " << s;
        worst = std::max(worst, cmp.rel_to_max());
      }
      std::printf("%s, %s cache, batched vs alone: logits %.2e (of max)\n", row.name, f16 ? "f16" : "f32", worst);
    }
  }
  omp_set_num_threads(1);
}

// A group's replies, sampled with their own seeds, are generate()'s with
// each seed: the same tokens, each stopping on its own (a stop token, the
// length limit), while the others go on; greedy ones are generate()'s
// greedy reply.
TEST(DecoderBatch, GroupRepliesEqualEachGeneratedAlone) {
  omp_set_num_threads(3);
  for (const auto& row : model::architectures()) {
    const model::Config c = config_for(row);
    SCOPED_TRACE(row.name);
    test_support::TempDir tmp;
    const std::vector<float> params = test_support::write_random_model(c, tmp / "m.gguf");
    infer::SamplerConfig s;
    s.temperature = 1.5;  // spread draws: the replies part early
    s.top_k = 0, s.top_p = 1, s.min_p = 0;
    const auto prompt = prompt_of(c, 2);
    const std::vector<uint64_t> seeds{11, 12, 13, 14, 15, 16};
    // Stops: two tokens the replies draw, so some replies stop early.
    infer::Decoder probe(c, params.data(), nullptr, 0);
    const auto first = infer::generate(probe, prompt, 30, s, seeds[1], {});
    const std::vector<int32_t> stops{first.tokens[3], first.tokens[6]};
    std::vector<infer::Generation> each;
    for (uint64_t seed : seeds) {
      infer::Decoder d(c, params.data(), nullptr, 0);
      each.push_back(infer::generate(d, prompt, 30, s, seed, stops));
    }
    infer::Decoder d(c, params.data(), nullptr, 0);
    const auto group = infer::generate_group(d, prompt, 30, s, seeds, stops);
    ASSERT_EQ(group.size(), seeds.size());
    size_t stopped = 0, lengths = 0, shortest = 1000, longest = 0;
    for (size_t i = 0; i < seeds.size(); ++i) {
      EXPECT_EQ(group[i].tokens, each[i].tokens) << "reply " << i;
      EXPECT_EQ(group[i].stopped, each[i].stopped) << "reply " << i;
      EXPECT_EQ(group[i].context_full, each[i].context_full) << "reply " << i;
      stopped += group[i].stopped;
      lengths += group[i].tokens.size();
      shortest = std::min(shortest, group[i].tokens.size());
      longest = std::max(longest, group[i].tokens.size());
    }
    EXPECT_GE(stopped, 1u);
    EXPECT_LT(shortest, longest);  // the batch shrank while others went on
    // Again on the same decoder, keeping the prompt's cache: the same replies.
    infer::GenerateControl keep;
    keep.reuse_cache = true;
    const auto again = infer::generate_group(d, prompt, 30, s, seeds, stops, keep);
    EXPECT_EQ(again[0].reused_tokens, int64_t(prompt.size()) - 1);
    for (size_t i = 0; i < seeds.size(); ++i) EXPECT_EQ(again[i].tokens, group[i].tokens) << "reply " << i;
    // Greedy: every reply is generate()'s greedy one.
    infer::SamplerConfig greedy;
    greedy.temperature = 0;
    infer::Decoder g1(c, params.data(), nullptr, 0);
    const auto want = infer::generate(g1, prompt, 20, greedy, 1, {}).tokens;
    for (const auto& g : infer::generate_group(d, prompt, 20, greedy, {1, 2, 3}, {})) EXPECT_EQ(g.tokens, want);
    std::printf("%s: %zu replies, %zu stopped, %zu tokens\n", row.name, seeds.size(), stopped, lengths);
  }
  omp_set_num_threads(1);
}

// The context ends each reply as it ends generate()'s.
TEST(DecoderBatch, GroupStopsAtTheContext) {
  const model::Config c = config_for(*model::find_architecture("llama"));
  test_support::TempDir tmp;
  const std::vector<float> params = test_support::write_random_model(c, tmp / "m.gguf");
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  const auto prompt = prompt_of(c, 3);  // 24 tokens of a 64-token context
  infer::Decoder d(c, params.data(), nullptr, 0);
  const auto group = infer::generate_group(d, prompt, -1, greedy, {1, 2, 3}, {});
  for (const auto& g : group) {
    EXPECT_TRUE(g.context_full);
    EXPECT_EQ(int64_t(g.tokens.size()), c.ctx - int64_t(prompt.size()) + 1);
  }
  EXPECT_EQ(infer::generate_group(d, prompt, 0, greedy, {1, 2}, {})[1].tokens.size(), 0u);
}

TEST(DecoderBatch, RefusesBadBatches) {
  const model::Config c = config_for(*model::find_architecture("llama"));
  test_support::TempDir tmp;
  const std::vector<float> params = test_support::write_random_model(c, tmp / "m.gguf");
  infer::Decoder d(c, params.data(), nullptr, 0);
  d.set_sequences(2);
  const int32_t t[2] = {1, 2};
  const int64_t twice[2] = {1, 1}, outside[2] = {0, 2};
  EXPECT_THROW(d.eval_batch(t, twice, 2), std::exception);
  EXPECT_THROW(d.eval_batch(t, outside, 2), std::exception);
  EXPECT_THROW(d.copy_sequence(0, 5), std::exception);
}
