// eval/choice_score: the scores are checked against the training forward
// pass over each whole sequence (no KV cache, no shared prefix) with
// log-softmax in double here; llama.cpp's own llama-perplexity is the check
// of the rule (tests/compat/llama_cpp_choice_check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "eval/choice_score.h"
#include "eval/choice_tasks.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/transformer.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain {
namespace {

using eval::ChoiceTask;
using test_support::error_of;
using test_support::TempDir;

// log softmax(z)[target] in double, written out here.
double reference_logprob(const float* z, int64_t vocab, int32_t target) {
  double mx = -INFINITY, s = 0;
  for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, double(z[v]));
  for (int64_t v = 0; v < vocab; ++v) s += std::exp(double(z[v]) - mx);
  return double(z[target]) - mx - std::log(s);
}

TEST(ChoiceScore, EqualsTheLogProbabilitiesOfEachWholeSequence) {
  TempDir tmp;
  const std::string path = test_support::tiny_base_model(tmp.path().string());
  gguf::GgufFile f(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(f);
  const auto cfg = model::config_from_gguf(f);
  std::vector<float> params(size_t(model::ParamLayout(cfg).total()));
  model::load_model_params(f, model::ParamLayout(cfg), params.data());

  // Endings of different lengths, one a single character; the second
  // task's endings share their first word (the shared prefix runs past the
  // context).
  std::vector<ChoiceTask> tasks(2);
  tasks[0].context = "the quick brown fox";
  tasks[0].endings = {"jumps over the lazy dog", "jumps into the river", "sleeps", "x"};
  tasks[0].gold = 1;
  tasks[1].index = 1;
  tasks[1].context = "a model learns";
  tasks[1].endings = {"from the data it is given", "from nothing at all"};
  infer::Decoder dec(f, 0, kernels::CacheType::kF32);
  const auto r = eval::score_choice_tasks(dec, tok, tasks);
  ASSERT_EQ(r.tasks.size(), 2u);

  int right = 0, right_norm = 0;
  double gold_mean = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    std::vector<std::vector<int32_t>> seqs;
    for (const auto& e : tasks[t].endings) seqs.push_back(tok.encode(tasks[t].context + " " + e, tok.add_bos()));
    size_t prefix = 0;  // shared by all, each keeping one token of its own
    auto shared = [&](size_t k) {
      for (const auto& s : seqs)
        if (k + 1 >= s.size() || s[k] != seqs[0][k]) return false;
      return true;
    };
    while (shared(prefix)) ++prefix;
    std::vector<double> sum, mean;
    for (size_t e = 0; e < seqs.size(); ++e) {
      const auto& s = seqs[e];
      model::Transformer<float> m(cfg, 1, int64_t(s.size()));
      std::copy(params.begin(), params.end(), m.params());
      m.forward(s.data(), nullptr);
      double lp = 0;
      for (size_t k = prefix; k < s.size(); ++k)
        lp += reference_logprob(m.logits() + (k - 1) * cfg.vocab, cfg.vocab, s[k]);
      sum.push_back(lp);
      mean.push_back(lp / double(s.size() - prefix));
      EXPECT_EQ(r.tasks[t].scored[e], int64_t(s.size() - prefix)) << "task " << t << " ending " << e;
      // Measured: at most 4e-7 nats per sequence (fp32 KV cache); the limit
      // is 50x that, and far below one token's log-probability (a token
      // skipped or scored twice moves the sum by several nats).
      EXPECT_NEAR(r.tasks[t].logprob[e], lp, 2e-5) << "task " << t << " ending " << e;
    }
    const int best_sum = int(std::max_element(sum.begin(), sum.end()) - sum.begin());
    const int best_mean = int(std::max_element(mean.begin(), mean.end()) - mean.begin());
    EXPECT_EQ(r.tasks[t].chosen_sum, best_sum);
    EXPECT_EQ(r.tasks[t].chosen_norm, best_mean);
    gold_mean += mean[size_t(tasks[t].gold)] / 2.0;
    right += best_sum == tasks[t].gold;
    right_norm += best_mean == tasks[t].gold;
  }
  EXPECT_DOUBLE_EQ(r.acc, right / 2.0);
  EXPECT_DOUBLE_EQ(r.acc_norm, right_norm / 2.0);
  EXPECT_NEAR(r.gold_logprob, gold_mean, 2e-5);
}

TEST(ChoiceScore, RefusesATaskLongerThanTheContext) {
  TempDir tmp;
  const std::string path = test_support::tiny_base_model(tmp.path().string());
  gguf::GgufFile f(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(f);
  infer::Decoder dec(f, 8);
  std::vector<ChoiceTask> tasks(1);
  tasks[0].index = 7;
  tasks[0].context = "a context of many words that will not fit";
  tasks[0].endings = {"one", "two"};
  EXPECT_NE(error_of([&] { eval::score_choice_tasks(dec, tok, tasks); }).find("task 7: an ending needs"),
            std::string::npos);
}

}  // namespace
}  // namespace ggtrain
