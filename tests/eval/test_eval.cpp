// eval/: the multiple-choice task readers and scoring. The scores are
// checked against the training forward pass over each whole sequence (no
// KV cache, no shared prefix) with log-softmax in double here; llama.cpp's
// own llama-perplexity is the check of the rule (tests/compat/llama_cpp_choice_check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "eval/choice_score.h"
#include "eval/choice_tasks.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/transformer.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ggtrain {
namespace {

using eval::ChoiceTask;
using test_support::TempDir;

// The Error's message of f(), or "" when it does not throw.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A --multiple-choice file written here byte by byte, as llama.cpp's
// reader expects it: count, positions, then per task the question, the
// answers and their int32 labels, and a second (ignored) answer list.
struct McWriter {
  std::string bytes;
  void u32(uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); }
  void text(const std::string& s) {
    u32(uint32_t(s.size()));
    bytes += s;
  }
  std::string task(const std::string& q, const std::vector<std::string>& answers, const std::vector<int>& labels) {
    McWriter t;
    t.text(q);
    t.u32(uint32_t(answers.size()));
    for (const auto& a : answers) t.text(a);
    for (int l : labels) t.u32(uint32_t(l));
    t.u32(1);  // one "mc2" answer, read and ignored
    t.text("ignored");
    t.u32(1);
    return t.bytes;
  }
  static std::string file(const std::vector<std::string>& tasks) {
    McWriter f;
    f.u32(uint32_t(tasks.size()));
    uint32_t at = 4 + 4 * uint32_t(tasks.size());
    for (const auto& t : tasks) {
      f.u32(at);
      at += uint32_t(t.size());
    }
    for (const auto& t : tasks) f.bytes += t;
    return f.bytes;
  }
};

TEST(ChoiceTasks, ReadsTheMultipleChoiceFile) {
  McWriter w;
  const std::string bytes =
      McWriter::file({w.task("Q one?", {"a", "b", "c"}, {0, 0, 1}), w.task("Q two?", {"yes", "no"}, {1, 0})});
  const auto tasks = eval::parse_multiple_choice(bytes, "t.bin");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].context, "Q one?");
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].gold, 0);
  EXPECT_EQ(eval::task_format_named("", "arc.bin"), eval::TaskFormat::kMultipleChoice);
}

TEST(ChoiceTasks, MultipleChoiceErrorsNameFileTaskAndField) {
  McWriter w;
  const std::string good = w.task("Q?", {"a", "b"}, {0, 1});
  const std::string file = McWriter::file({good});
  auto err = [](const std::string& bytes) { return error_of([&] { eval::parse_multiple_choice(bytes, "t.bin"); }); };
  EXPECT_NE(err(file.substr(0, file.size() - 6)).find("t.bin: task 0"), std::string::npos);  // truncated
  EXPECT_NE(err(file.substr(0, file.size() - 6)).find("truncated"), std::string::npos);
  EXPECT_NE(err(std::string("\xff\xff\xff\x7f", 4)).find("task positions"), std::string::npos);  // 2^31 tasks, no room
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "b"}, {1, 1})})).find("2 answers are labelled right"),
            std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "b"}, {0, 7})})).find("label is 7"), std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a"}, {1})})).find("at least 2"), std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "\xff"}, {1, 0})})).find("not UTF-8"), std::string::npos);
  std::string far = file;
  far[4] = '\x7f';  // the first task's position past the end
  EXPECT_NE(err(far).find("past the file"), std::string::npos);
  McWriter many;
  many.text("Q?");
  many.u32(101);
  EXPECT_NE(err(McWriter::file({many.bytes})).find("at most 100"), std::string::npos);
}

TEST(ChoiceTasks, ReadsTheHellaswagForm) {
  const auto tasks = eval::parse_hellaswag("ctx one\n2\na\nb\nc\nd\nctx two\r\n0\ne\nf\ng\nh", "t.txt");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].context, "ctx one");
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].context, "ctx two\r");  // as llama-perplexity's getline keeps it
  EXPECT_EQ(tasks[1].endings.back(), "h");
}

TEST(ChoiceTasks, HellaswagFormErrorsNameFileAndLine) {
  EXPECT_NE(
      error_of([] { eval::parse_hellaswag("c\n1\na\nb\nc\n", "t.txt"); }).find("t.txt: 5 lines, not a multiple of 6"),
      std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\n4\na\nb\nc\nd\n", "t.txt"); }).find("t.txt:2: the gold ending"),
            std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\nx\na\nb\nc\nd\n", "t.txt"); }).find("t.txt:2:"), std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\n1\na\nb\n\xff\nd\n", "t.txt"); }).find("t.txt:5: byte 1"),
            std::string::npos);
}

TEST(ChoiceTasks, ReadsTheJsonlForm) {
  const auto tasks =
      eval::parse_choice_jsonl("{\"context\": \"c\", \"endings\": [\"x\", \"y\", \"z\"], \"label\": 2}\n\n"
                               "{\"label\": 0, \"endings\": [\"p\", \"q\"], \"context\": \"d\"}\n",
                               "t.jsonl");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].endings.size(), 3u);
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].context, "d");
}

TEST(ChoiceTasks, JsonlErrorsNameFileLineAndField) {
  auto err = [](const char* text) { return error_of([&] { eval::parse_choice_jsonl(text, "t.jsonl"); }); };
  EXPECT_NE(err("{\"endings\": [\"a\", \"b\"], \"label\": 0}").find("t.jsonl:1: no \"context\""), std::string::npos);
  EXPECT_NE(err("\n{\"context\": \"c\", \"endings\": [\"a\", \"b\"], \"label\": 2}").find("t.jsonl:2: \"label\""),
            std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", \"endings\": [\"a\"], \"label\": 0}").find("\"endings\""), std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", \"endings\": [\"a\", \"\"], \"label\": 0}").find("non-empty"), std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", ").find("t.jsonl:1: not a JSON object"), std::string::npos);
  EXPECT_NE(err("[1, 2]").find("t.jsonl:1: not a JSON object"), std::string::npos);
}

TEST(ChoiceTasks, TheDrawIsFixedAndTakesEachTaskOnce) {
  std::vector<ChoiceTask> tasks(20);
  for (int i = 0; i < 20; ++i) tasks[size_t(i)].index = i;
  const auto all = eval::draw_tasks(tasks, 0);
  std::set<int64_t> seen;
  for (const auto& t : all) seen.insert(t.index);
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(seen.size(), 20u);
  bool in_file_order = true;
  for (size_t i = 0; i < all.size(); ++i) in_file_order = in_file_order && all[i].index == int64_t(i);
  EXPECT_FALSE(in_file_order);  // drawn, as llama-perplexity draws even a whole file
  // Fewer tasks: the first ones of the same draw.
  const auto five = eval::draw_tasks(tasks, 5);
  ASSERT_EQ(five.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(five[i].index, all[i].index);
  EXPECT_EQ(eval::draw_tasks(tasks, 50).size(), 20u);
}

TEST(ChoiceTasks, ReadsTheWinograndeCsv) {
  const auto tasks = eval::parse_winogrande("index,sentence,option1,option2,answer\n"
                                            "0,\"Sarah, not Maria, got the _ cases.\",easier,harder,1\n"
                                            "1,The _ sat.,cat,dog,2\r\n",
                                            "w.csv");
  ASSERT_EQ(tasks.size(), 2u);  // the header skipped
  EXPECT_EQ(tasks[0].context, "Sarah, not Maria, got the ");
  EXPECT_EQ(tasks[0].after, " cases.");
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"easier", "harder"}));
  EXPECT_EQ(tasks[0].gold, 0);
  EXPECT_EQ(tasks[0].rule, eval::ChoiceRule::kWinogrande);
  EXPECT_EQ(tasks[1].gold, 1);
  EXPECT_EQ(tasks[1].index, 1);
  auto err = [](const char* text) { return error_of([&] { eval::parse_winogrande(text, "w.csv"); }); };
  EXPECT_NE(err("0,The _ sat.,cat,dog,1\n1,The _ sat.,cat,dog,3\n").find("w.csv:2: the answer must be 1 or 2"),
            std::string::npos);
  EXPECT_NE(err("0,The cat sat.,cat,dog,1\n").find("w.csv:1: the sentence has no '_'"), std::string::npos);
  EXPECT_NE(err("0,The _ sat.,cat\n").find("w.csv:1: not index,sentence"), std::string::npos);
}

TEST(ChoiceTasks, WinograndeKeepsFileOrderUnlessFewerAreAskedFor) {
  std::vector<ChoiceTask> tasks(10);
  for (int i = 0; i < 10; ++i) tasks[size_t(i)].index = i;
  const auto all = eval::draw_tasks(tasks, 0, eval::TaskFormat::kWinogrande);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].index, int64_t(i));
  const auto some = eval::draw_tasks(tasks, 6, eval::TaskFormat::kWinogrande);
  std::set<int64_t> seen;
  for (const auto& t : some) seen.insert(t.index);
  EXPECT_EQ(some.size(), 6u);
  EXPECT_EQ(seen.size(), 6u);
  const auto again = eval::draw_tasks(tasks, 6, eval::TaskFormat::kWinogrande);
  for (size_t i = 0; i < some.size(); ++i) EXPECT_EQ(again[i].index, some[i].index);
}

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
  const auto cfg = model::config_from_llama_gguf(f);
  std::vector<float> params(size_t(model::ParamLayout(cfg).total()));
  model::load_llama_params(f, model::ParamLayout(cfg), params.data());

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
      model::LlamaModel<float> m(cfg, 1, int64_t(s.size()));
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
