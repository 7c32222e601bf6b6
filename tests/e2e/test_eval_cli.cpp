// `ggtrain eval --run`: every checkpoint of a run scored through the CLI,
// each row of RUN/eval.csv what `eval -m` prints for that checkpoint.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  return f;
}

TEST(EvalRun, EachRowIsWhatEvalPrintsForThatCheckpoint) {
  TempDir tmp("ggtrain_eval_run");
  const std::string corpus = tmp / "corpus.txt", tasks = tmp / "tasks.jsonl", run = tmp / "run";
  write_synthetic_corpus(corpus, 600);
  const auto text = lines_of(corpus);
  {
    std::ofstream out(tasks);
    for (size_t i = 0; i + 9 < 40; i += 3)
      out << nlohmann::json{{"context", text[i]}, {"endings", {text[i + 1], text[i + 7]}}, {"label", 0}}.dump() << "\n";
  }
  ASSERT_EQ(
      run_cli(tiny_train_args(GGTRAIN_BIN, run, corpus, {"train.steps=20", "model.ctx=256"}), tmp / "train.log").status,
      0);
  const auto r = run_cli({GGTRAIN_BIN, "eval", "--run", run, "--text", corpus, "--task", tasks, "-c", "128", "-t", "1"},
                         tmp / "eval.log");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"eval.csv", "eval.json", "eval_text.svg", "eval_task.svg"})
    EXPECT_TRUE(std::filesystem::exists(run + "/" + f)) << f;

  const auto csv = lines_of(run + "/eval.csv");
  ASSERT_EQ(csv.size(), 3u);  // the header, steps 10 and 20
  EXPECT_EQ(csv[0], "step,file,ppl,bpb,acc,acc_norm,gold_logprob");
  for (size_t i = 1; i < csv.size(); ++i) {
    const auto f = split_csv(csv[i]);
    ASSERT_EQ(f.size(), 7u) << csv[i];
    const std::string model = run + "/" + f[1];
    EXPECT_EQ(f[0], std::to_string(10 * i));
    const auto t =
        run_cli({GGTRAIN_BIN, "eval", "-m", model, "--text", corpus, "-c", "128", "-t", "1"}, tmp / "text.log");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(t.output, m, std::regex("perplexity ([0-9.]+) .* ([0-9.]+) bits per byte")))
        << t.output;
    EXPECT_NEAR(std::stod(f[2]), std::stod(m[1]), 1e-4 * std::stod(m[1]));  // both printed rounded
    EXPECT_NEAR(std::stod(f[3]), std::stod(m[2]), 1e-4);
    const auto k = run_cli({GGTRAIN_BIN, "eval", "-m", model, "--task", tasks, "-c", "128", "-t", "1", "--json"},
                           tmp / "task.log");
    ASSERT_EQ(k.status, 0) << k.output;
    const auto j = nlohmann::json::parse(k.output.substr(k.output.find('{')));
    EXPECT_NEAR(std::stod(f[4]), j["acc"].get<double>(), 1e-6);
    EXPECT_NEAR(std::stod(f[5]), j["acc_norm"].get<double>(), 1e-6);
    EXPECT_NEAR(std::stod(f[6]), j["gold_logprob"].get<double>(), 1e-5 * std::abs(j["gold_logprob"].get<double>()));
  }
  // The two checkpoints differ: the rows are not one model's scores twice.
  EXPECT_NE(split_csv(csv[1])[3], split_csv(csv[2])[3]);
}

// A LoRA run's checkpoints are adapters: each row is its adapter on the
// base the run recorded, what `eval -m BASE --lora ADAPTER` prints.
TEST(EvalRun, ALoraRunScoresEachAdapterOnItsBase) {
  TempDir tmp("ggtrain_eval_run_lora");
  const std::string corpus = tmp / "corpus.txt", base_run = tmp / "base", run = tmp / "lora";
  write_synthetic_corpus(corpus, 600);
  ASSERT_EQ(
      run_cli(tiny_train_args(GGTRAIN_BIN, base_run, corpus, {"train.steps=10", "model.ctx=256"}), tmp / "base.log")
          .status,
      0);
  const std::string base = base_run + "/weights/step_10.gguf";
  ASSERT_EQ(run_cli(tiny_train_args(GGTRAIN_BIN, run, corpus,
                                    {"train.steps=20", "init.from=" + base, "train.lora.rank=4", "train.lr_max=1e-2"}),
                    tmp / "train.log")
                .status,
            0);
  const auto r =
      run_cli({GGTRAIN_BIN, "eval", "--run", run, "--text", corpus, "-c", "128", "-t", "1"}, tmp / "eval.log");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("LoRA adapters, each applied to " + base), std::string::npos) << r.output;
  const auto csv = lines_of(run + "/eval.csv");
  ASSERT_EQ(csv.size(), 3u);
  const auto row = split_csv(csv[2]);
  const auto t =
      run_cli({GGTRAIN_BIN, "eval", "-m", base, "--lora", run + "/" + row[1], "--text", corpus, "-c", "128", "-t", "1"},
              tmp / "text.log");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(t.output, m, std::regex("perplexity ([0-9.]+) "))) << t.output;
  EXPECT_NEAR(std::stod(row[2]), std::stod(m[1]), 1e-4 * std::stod(m[1]));
  // The adapter moved the model: the base alone scores otherwise.
  const auto b = run_cli({GGTRAIN_BIN, "eval", "-m", base, "--text", corpus, "-c", "128", "-t", "1"}, tmp / "b.log");
  ASSERT_TRUE(std::regex_search(b.output, m, std::regex("perplexity ([0-9.]+) "))) << b.output;
  EXPECT_GT(std::abs(std::stod(row[2]) - std::stod(m[1])), 1e-3 * std::stod(m[1]));
  // -m names a base for a LoRA run only.
  const auto whole = run_cli({GGTRAIN_BIN, "eval", "--run", base_run, "-m", base, "--text", corpus}, tmp / "w.log");
  EXPECT_NE(error_line(whole.output).find("-m names a base only for a LoRA run"), std::string::npos) << whole.output;
}

TEST(EvalRun, ARunWithoutCheckpointsOrMetricsIsRefused) {
  TempDir tmp("ggtrain_eval_run_bad");
  const auto a = run_cli({GGTRAIN_BIN, "eval", "--run", tmp / "nothing", "--text", "x.txt"}, tmp / "a.log");
  EXPECT_NE(a.status, 0);
  EXPECT_NE(error_line(a.output).find("no weights/step_N.gguf checkpoints"), std::string::npos) << a.output;
  const auto b = run_cli({GGTRAIN_BIN, "eval", "--run", tmp / "nothing"}, tmp / "b.log");
  EXPECT_NE(error_line(b.output).find("give --text FILE, --task FILE or both"), std::string::npos) << b.output;
}

}  // namespace
