// A new user's first hour, through the CLI as they would type it: the first
// run on their own text, the messages on typing mistakes, the llama.cpp flags
// they know, a run's lifecycle (finished, stopped, lengthened), a chat LoRA
// adapter's template through chat and merge, what each command says it wrote
// and what to run next. Each test failed before the behaviour it checks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "model/config.h"
#include "quant/importance_matrix.h"
#include "support/cli_runner.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using namespace ggtrain::test_support;
namespace fs = std::filesystem;

namespace {

// English prose with the characters real text has and the KJV lacks
// (digits, brackets, quotes, symbols, accented letters): 80+ distinct
// characters, more than the tiny preset's 320 pieces leave room for.
void write_english_text(const std::string& path, int lines) {
  static const char* words[] = {"the",
                                "quick",
                                "brown",
                                "fox",
                                "jumps",
                                "over",
                                "a",
                                "lazy",
                                "dog",
                                "while",
                                "Alice's",
                                "(small)",
                                "cat",
                                "naps;",
                                "\"quotes\",",
                                "numbers",
                                "12,345",
                                "&",
                                "67%",
                                "-",
                                "dashes:",
                                "why?",
                                "yes!",
                                "[brackets]",
                                "{braces}",
                                "<angle>",
                                "@home",
                                "#tag",
                                "$5",
                                "*star*",
                                "~tilde",
                                "^caret",
                                "|",
                                "pipe",
                                "/",
                                "slash",
                                "=",
                                "+",
                                "plus",
                                "_under",
                                "caf\xc3\xa9",
                                "na\xc3\xafve",
                                "r\xc3\xa9sum\xc3\xa9",
                                "Zebra",
                                "Quiet",
                                "Xylophone",
                                "Jazz",
                                "Victory",
                                "Kite",
                                "Umbrella",
                                "Ostrich",
                                "Garden",
                                "Window",
                                "Harbor"};
  const size_t n = sizeof(words) / sizeof(words[0]);
  std::ofstream out(path);
  uint64_t s = 12345;
  for (int i = 0; i < lines; ++i) {
    std::string line;
    const int len = 6 + int(i % 9);
    for (int k = 0; k < len; ++k) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      if (k) line += ' ';
      line += words[(s >> 33) % n];
    }
    out << line << ".\n";
  }
}

int distinct_characters(const std::string& path) {
  const std::string text = slurp(path);
  std::set<std::string> chars;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t len = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (text[i] != '\n') chars.insert(text.substr(i, len));
    i += len;
  }
  return int(chars.size());
}

// The CLI in a folder of its own: every test's files live there.
class FirstHour : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("ggtrain-first-hour");
    write_english_text(*dir_ / "mine.txt", 600);
    // The model the other tests run: trained with room for the text's
    // characters, so that those tests do not depend on the vocabulary fix.
    base_run_ =
        new CliResult(cli({"train", "--preset", "tiny", "--set", "data.corpus=" + (*dir_ / "mine.txt"), "--set",
                           "data.vocab_size=512", "--set", "train.threads=1", "--run-dir", *dir_ / "runs/base"}));
  }
  static void TearDownTestSuite() {
    delete base_run_;
    delete dir_;
  }
  static CliResult cli(std::vector<std::string> args, const CliOptions& opts = {}) {
    args.insert(args.begin(), GGTRAIN_BIN);
    return run_cli(args, *dir_ / "out.txt", opts);
  }
  static std::string t(const std::string& rel) { return *dir_ / rel; }
  static std::string model() { return train::weights_path(t("runs/base"), 40); }

  static TempDir* dir_;
  static CliResult* base_run_;
};
TempDir* FirstHour::dir_ = nullptr;
CliResult* FirstHour::base_run_ = nullptr;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_F(FirstHour, TinyPresetTrainsOnOrdinaryEnglish) {
  ASSERT_GT(distinct_characters(t("mine.txt")), 320 - 259) << "the text must need more than the preset's vocabulary";
  // The first run on one's own text, as the README's quick start has it.
  const std::string run = t("runs/mine"), weights = train::weights_path(run, 40);
  const CliResult r = cli({"train", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--set",
                           "train.threads=1", "--run-dir", run});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "distinct characters, more than a vocabulary of 320 holds")) << r.output;
  const gguf::GgufFile f(weights);
  const uint64_t vocab = f.find("tokenizer.ggml.tokens")->items.size();
  EXPECT_GE(vocab, uint64_t(259 + distinct_characters(t("mine.txt"))));
  EXPECT_EQ(vocab % 64, 0u);
  EXPECT_TRUE(contains(r.output, "epochs of the")) << r.output;
  // Progress from the first step, with an estimate of the time left.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(step +1/40 \| loss [0-9.]+ \|.* ETA )"))) << r.output;
  // What it wrote, and what to run next.
  EXPECT_TRUE(contains(r.output, "loss plot " + run + "/loss.svg")) << r.output;
  EXPECT_TRUE(contains(r.output, "next: ggtrain generate -m " + weights)) << r.output;
}

TEST_F(FirstHour, TokenizerTrainNamesTheVocabularyThatWorks) {
  const int need = 259 + distinct_characters(t("mine.txt"));
  CliResult r = cli(
      {"tokenizer", "train", "--input", t("mine.txt"), "--vocab", std::to_string(need - 1), "--out", t("tok.model")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(error_line(r.output), fmt::format("need at least {}; ask for {} or more", need, need)))
      << r.output;
  EXPECT_FALSE(contains(r.output, "character_coverage")) << "sentencepiece's own option leaked: " << r.output;
  r = cli({"tokenizer", "train", "--input", t("mine.txt"), "--vocab", std::to_string(need), "--out", t("tok.model")});
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(FirstHour, DataPrepareCreatesItsFolder) {
  const std::string out = t("new/deeper/run");
  const CliResult r =
      cli({"data", "prepare", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--out", out});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(out + "/data/manifest.json"));
  EXPECT_TRUE(contains(r.output, "next: ggtrain train --run-dir " + out)) << r.output;
}

TEST_F(FirstHour, UsageErrorsSayWhatToTypeAndExitWithTwo) {
  struct Row {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Row> rows = {
      {{}, {"no command given", "train, generate"}},
      {{"foo"}, {"unknown command 'foo'", "the commands are: train"}},
      {{"trian"}, {"unknown command 'trian' (did you mean 'train'?)"}},
      {{"data", "prep"}, {"ggtrain data: unknown command 'prep' (did you mean 'prepare'?)"}},
      {{"data"}, {"ggtrain data takes a command: prepare"}},
      {{"generate", "-m", "x.gguf", "--tmep", "0.5"},
       {"ggtrain generate: unexpected arguments --tmep 0.5", "did you mean --temp for --tmep?"}},
      {{"generate"}, {"ggtrain generate: --model is required", "see ggtrain generate --help"}},
      {{"generate", "-m", "x.gguf", "-n", "-2"}, {"--n-predict", "-2"}},
      // llama.cpp habits the parser would misread (-n gl, --ctx-size nv)
      {{"generate", "-m", "x.gguf", "-ngl", "0"}, {"-ngl is a llama.cpp flag ggtrain does not take", "on the CPU"}},
      {{"generate", "-m", "x.gguf", "-cnv"}, {"-cnv is a llama.cpp flag", "ggtrain chat -m MODEL"}},
      {{"eval", "-m", "x.gguf", "--hellaswag", "-f", "h.txt"}, {"--task FILE --task-format hellaswag"}},
      {{"chat", "-m", "x.gguf", "--jinja"}, {"--jinja is a llama.cpp flag", "chat template"}},
      {{"generate", "-m", "x.gguf", "--temperature", "0.5"}, {"the flag is --temp"}},
  };
  for (const auto& row : rows) {
    const CliResult r = cli(row.args);
    SCOPED_TRACE(fmt::format("ggtrain {}", fmt::join(row.args, " ")));
    EXPECT_EQ(r.status, 2) << r.output;
    const std::string line = error_line(r.output);
    ASSERT_FALSE(line.empty()) << "no 'ggtrain: error:' line: " << r.output;
    for (const auto& s : row.says) EXPECT_TRUE(contains(line, s)) << "'" << s << "' not in: " << line;
    EXPECT_FALSE(line.starts_with("ggtrain: ")) << "the program named twice: ggtrain: error: " << line;
  }
  // --help names the program it is the help of.
  const CliResult help = cli({"--help"});
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_TRUE(contains(help.output, "Usage: ggtrain [OPTIONS] SUBCOMMAND")) << help.output;
  // A config key typed wrong gets the same help.
  const CliResult r = cli({"config", "show", "--set", "train.step=3"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(error_line(r.output), "unknown config key 'train.step' (did you mean 'train.steps'?)"))
      << r.output;
}

TEST_F(FirstHour, ConfigShowListsEveryKeyAndReadsBack) {
  CliResult r = cli({"config", "show", "--preset", "tiny", "--set", "train.steps=77"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shown = r.output;
  int keys = 0;
  std::istringstream in(shown);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    ++keys;
    EXPECT_TRUE(std::regex_search(line, std::regex(R"(^[\w.]+ = .* # \S.{10,})"))) << "no description: " << line;
  }
  EXPECT_GE(keys, 55);
  for (const char* k : {"steps = 77", "vocab_size = 320", "d_model = 64", "lora.rank", "keep_last", "from = "})
    EXPECT_TRUE(contains(shown, k)) << k;
  // Saved and given back, it is the same config.
  spit(t("shown.toml"), shown);
  r = cli({"config", "show", "--config", t("shown.toml")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find('\n')), shown.substr(shown.find('\n')));
  r = cli({"train", "--help"});
  EXPECT_TRUE(contains(r.output, "ggtrain config show")) << r.output;
  // With init.from, the model section is the file's (the tiny base, 64
  // wide), as `train` would take it, not the default preset's (s15: 288
  // wide, 6 layers).
  r = cli({"config", "show", "--set", "train.seq_len=64", "--set", "init.from=" + model()});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "model from " + model())) << r.output;
  EXPECT_TRUE(contains(r.output, "\nd_model = 64 ")) << r.output;
  EXPECT_TRUE(contains(r.output, "\nn_layers = 2 ")) << r.output;
}

TEST_F(FirstHour, GenerateTakesLlamaCppFlags) {
  ASSERT_EQ(base_run_->status, 0) << base_run_->output;
  spit(t("prompt.txt"), "The quick brown");
  // -f FILE and -s SEED mean what -p TEXT and --seed do.
  const CliResult a = cli({"generate", "-m", model(), "-f", t("prompt.txt"), "-s", "7", "-n", "12", "--print-ids"});
  const CliResult b =
      cli({"generate", "-m", model(), "-p", "The quick brown", "--seed", "7", "-n", "12", "--print-ids"});
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  auto ids = [](const std::string& out) { return out.substr(0, out.find("prompt:")); };
  EXPECT_EQ(ids(a.output), ids(b.output));
  const CliResult c =
      cli({"generate", "-m", model(), "-p", "The quick brown", "--seed", "8", "-n", "12", "--print-ids"});
  EXPECT_NE(ids(c.output), ids(b.output)) << "the seed changes nothing: the comparison above proves nothing";
  // -n -1: until the end of text or a full context, which is said.
  const CliResult full = cli({"generate", "-m", model(), "-p", "The", "-n", "-1", "--ignore-eos", "--print-ids"});
  ASSERT_EQ(full.status, 0) << full.output;
  EXPECT_TRUE(contains(full.output, "stopped: the context of 64 tokens is full")) << full.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(full.output, m, std::regex(R"(prompt: (\d+) tokens.*generated (\d+) tokens)")))
      << full.output;
  // Every position of the 64-token context filled, and one token more
  // sampled from the last one's logits.
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), 64 + 1);
  // -np 3: three continuations decoded together, sequence i the one seed
  // 7 + i gives alone.
  const CliResult par =
      cli({"generate", "-m", model(), "-p", "The quick brown", "-s", "7", "-n", "12", "-np", "3", "--print-ids"});
  ASSERT_EQ(par.status, 0) << par.output;
  for (int i = 0; i < 3; ++i) {
    const CliResult one = cli(
        {"generate", "-m", model(), "-p", "The quick brown", "-s", std::to_string(7 + i), "-n", "12", "--print-ids"});
    const std::string alone = ids(one.output), want_ids = alone.substr(alone.rfind('\n', alone.size() - 2) + 1);
    const size_t at = par.output.find("--- sequence " + std::to_string(i) + " (seed " + std::to_string(7 + i) + ")");
    ASSERT_NE(at, std::string::npos) << par.output;
    EXPECT_NE(par.output.find(want_ids, at), std::string::npos) << "sequence " << i << ": " << want_ids << " in\n"
                                                                << par.output;
  }
  EXPECT_TRUE(contains(par.output, "in 3 sequences")) << par.output;
  // -c past the trained context: a warning, as llama.cpp gives.
  const CliResult longer = cli({"generate", "-m", model(), "-p", "The", "-n", "4", "-c", "128"});
  ASSERT_EQ(longer.status, 0) << longer.output;
  EXPECT_TRUE(contains(longer.output, "warning: -c 128 is longer than the 64 tokens")) << longer.output;
}

// The model a user runs in ollama, by its ollama name: the run's GGUF laid
// into a store as ollama lays it out (manifest by name and tag, blob by
// digest) generates the same tokens under `-m ollama:NAME:TAG` as under its
// path, and `init.from = ollama:NAME:TAG` finetunes that very file.
TEST_F(FirstHour, OllamaNamesTheModel) {
  ASSERT_EQ(base_run_->status, 0) << base_run_->output;
  const std::string store = t("ollama-store"), digest(64, 'e');
  std::filesystem::create_directories(store + "/blobs");
  std::filesystem::create_directories(store + "/manifests/registry.ollama.ai/library/mine");
  std::filesystem::copy_file(model(), store + "/blobs/sha256-" + digest,
                             std::filesystem::copy_options::overwrite_existing);
  spit(store + "/manifests/registry.ollama.ai/library/mine/v1",
       R"({"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" + digest +
           R"(","size":1}]})");
  CliOptions env;
  env.env = {{"OLLAMA_MODELS", store}};
  const CliResult by_path = cli({"generate", "-m", model(), "-p", "The quick", "-s", "3", "-n", "8", "--print-ids"});
  const CliResult by_name =
      cli({"generate", "-m", "ollama:mine:v1", "-p", "The quick", "-s", "3", "-n", "8", "--print-ids"}, env);
  ASSERT_EQ(by_path.status, 0) << by_path.output;
  ASSERT_EQ(by_name.status, 0) << by_name.output;
  auto ids = [](const std::string& out) { return out.substr(0, out.find("prompt:")); };
  EXPECT_EQ(ids(by_name.output), ids(by_path.output));
  const CliResult tuned =
      cli({"train", "--preset", "tiny", "--set", "init.from=ollama:mine:v1", "--set", "data.corpus=" + t("mine.txt"),
           "--set", "train.steps=2", "--set", "train.threads=1", "--run-dir", t("runs/from-ollama")},
          env);
  ASSERT_EQ(tuned.status, 0) << tuned.output;
  const std::string saved = slurp(t("runs/from-ollama/config.toml"));
  EXPECT_TRUE(contains(saved, "blobs/sha256-" + digest)) << saved;
}

// `tokenize --sp` reads a sentencepiece model as llama.cpp's converter would:
// the same ids as the GGUF of a run trained with it (whose ids llama_cpp_check
// compares with llama.cpp's).
TEST_F(FirstHour, TokenizeSpGivesTheIdsOfTheRunsGguf) {
  ASSERT_EQ(base_run_->status, 0) << base_run_->output;
  const CliResult sp = cli({"tokenize", "--sp", t("runs/base/tokenizer.model"), "--lines", t("mine.txt")});
  ASSERT_EQ(sp.status, 0) << sp.output;
  const CliResult gguf = cli({"tokenize", "-m", model(), "--lines", t("mine.txt")});
  ASSERT_EQ(gguf.status, 0) << gguf.output;
  EXPECT_EQ(std::count(sp.output.begin(), sp.output.end(), '\n'), 600);
  EXPECT_EQ(sp.output, gguf.output);
}

TEST_F(FirstHour, RunLifecycleSaysWhereItStandsAndWhatNext) {
  const std::string run = t("runs/life");
  const std::vector<std::string> fresh = {
      "train", "--preset",        "tiny",      "--set", "data.corpus=" + t("mine.txt"),
      "--set", "train.threads=1", "--run-dir", run};
  std::vector<std::string> a = fresh;
  a.insert(a.end(), {"--stop-at", "15"});
  CliResult r = cli(a);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "stopped after step 15/40 (--stop-at)")) << r.output;
  EXPECT_TRUE(contains(r.output, "continue with: ggtrain train --resume --run-dir " + run)) << r.output;
  r = cli({"train", "--resume", "--run-dir", run});
  ASSERT_EQ(r.status, 0) << r.output;
  // Finished: a resume says so and how to go on, not an empty summary, and
  // writes nothing: every file of the run folder keeps its bytes.
  const auto snapshot = [&] {
    std::map<std::string, std::string> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(run))
      if (e.is_symlink()) files[e.path().string()] = "-> " + std::filesystem::read_symlink(e.path()).string();
      else if (e.is_regular_file()) files[e.path().string()] = slurp(e.path().string());
    return files;
  };
  const auto before = snapshot();
  r = cli({"train", "--resume", "--run-dir", run});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(snapshot() == before) << "a resume of a finished run changed its folder";
  EXPECT_FALSE(contains(r.output, "0 tokens/s")) << r.output;
  EXPECT_TRUE(contains(r.output, "already trained to step 40 of train.steps = 40; nothing to do")) << r.output;
  EXPECT_TRUE(contains(r.output, "--set train.steps=N")) << r.output;
  // A longer run reshapes the schedule: said, with the rate before and after.
  r = cli({"train", "--resume", "--run-dir", run, "--set", "train.steps=50"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output,
                                std::regex(R"(train.steps 40 -> 50: the cosine learning-rate schedule is )"
                                           R"(stretched to end at step 50; at step 40 the rate goes from \S+ to \S+)")))
      << r.output;
  EXPECT_EQ(train::latest_step(run), 50);
}

// Setting lr_max alone keeps the rate at or under it (lr_min follows it, a
// tenth); the plan says the rates; a warmup as long as the run is warned.
TEST_F(FirstHour, LearningRatesAreWhatWasAskedAndSaid) {
  const CliResult r =
      cli({"train", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--set", "train.threads=1", "--set",
           "train.lr_max=2e-5", "--set", "train.steps=6", "--set", "train.warmup_steps=8", "--run-dir", t("runs/lr")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "learning rate: 8 warmup steps to 2e-05, cosine to 2e-06")) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: train.warmup_steps 8 >= train.steps 6: the rate never reaches "
                                 "train.lr_max 2e-05 (it peaks at 1.5e-05)"))
      << r.output;
  std::ifstream metrics(t("runs/lr/metrics.jsonl"));
  std::string line;
  int steps = 0;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("lr")) continue;
    ++steps;
    EXPECT_LE(j["lr"].get<double>(), 2e-5) << line;
  }
  EXPECT_EQ(steps, 6);
}

// A pretraining length on a finetune's few examples is said, with the
// steps that would make 3 epochs.
TEST_F(FirstHour, ManyEpochsAreWarned) {
  const CliResult r = cli({"train", "--run-dir", t("runs/epochs"), "--set", "data.corpus=" + t("mine.txt"), "--set",
                           "init.from=" + model(), "--set", "train.steps=40", "--set", "train.seq_len=64", "--set",
                           "train.batch=64", "--set", "train.threads=1"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(warning: 40 steps are [0-9.]+ epochs of the training tokens: )"
                                                     R"(the model will learn them by heart; 3 epochs would be )"
                                                     R"(train.steps=[0-9]+)")))
      << r.output;
}

// A finetune's length comes from its data, not the preset's pretraining
// steps: 1 epoch of text by default with init.from, train.epochs when set,
// recorded as steps so that --resume trains the same length.
TEST_F(FirstHour, FinetuneLengthIsEpochsOfTheData) {
  auto length = [](const std::string& out) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m,
                                  std::regex(R"(length: ([0-9]+) steps = ([0-9.]+) epoch\(s\) of ([0-9]+) )"
                                             R"(training tokens at ([0-9]+) tokens a step)")))
        << out;
    return m.size() == 5 ? std::vector<int64_t>{std::stoll(m[1]), std::stoll(m[3]), std::stoll(m[4])}
                         : std::vector<int64_t>{0, 0, 0};
  };
  CliResult r = cli({"train", "--preset", "tiny", "--run-dir", t("runs/ft1"), "--set", "init.from=" + model(), "--set",
                     "data.corpus=" + t("mine.txt"), "--set", "train.threads=1", "--stop-at", "2"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "a finetune's default of 1 epoch(s) of its text")) << r.output;
  const auto one = length(r.output);  // steps, tokens, tokens a step
  EXPECT_EQ(one[0], (one[1] + one[2] - 1) / one[2]);
  EXPECT_NE(one[0], 40);  // not the tiny preset's
  r = cli({"train", "--resume", "--run-dir", t("runs/ft1")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, fmt::format("trained steps 2..{}:", one[0]))) << r.output;
  r = cli({"train", "--preset", "tiny", "--run-dir", t("runs/ft2"), "--set", "data.corpus=" + t("mine.txt"), "--set",
           "train.epochs=2.5", "--set", "train.threads=1", "--stop-at", "1"});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto two = length(r.output);
  EXPECT_EQ(two[0], (5 * two[1] + 2 * two[2] - 1) / (2 * two[2]));  // ceil(2.5 tokens / a step)
  EXPECT_TRUE(contains(slurp(t("runs/ft2/config.toml")), fmt::format("steps = {}", two[0])));
  r = cli({"train", "--preset", "tiny", "--run-dir", t("runs/ft3"), "--set", "data.corpus=" + t("mine.txt"), "--set",
           "train.epochs=2", "--set", "train.steps=9"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(error_line(r.output), "train.epochs (2) and train.steps (9) are both set; give one"))
      << r.output;
}

// checkpoint.keep_best: the run's summary names the best checkpoint.
TEST_F(FirstHour, TheSummaryNamesTheBestCheckpoint) {
  const CliResult r = cli({"train", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--set",
                           "train.threads=1", "--set", "checkpoint.keep_best=val_loss", "--run-dir", t("runs/best")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(best val_loss: [0-9.]+ at step (20|40): .*runs/best/weights/)"
                                                     R"(best\.gguf)")))
      << r.output;
}

// checkpoint.keep_best on a task counts the starting weights' score: a run
// that never beats it (a rate too small to move a float) keeps step 0, the
// weights it started from, as weights/best.gguf.
TEST_F(FirstHour, KeepBestCountsTheStartingWeights) {
  spit(t("words.csv"), "0,\"the quick brown _ jumps over a lazy dog\",fox,pipe,1\n"
                       "1,\"Alice's (small) _ naps; while\",cat,tilde,1\n"
                       "2,\"jumps over a lazy _ while Alice's\",dog,caret,1\n"
                       "3,\"the _ brown fox jumps\",quick,star,1\n");
  const CliResult r = cli({"train",
                           "--preset",
                           "tiny",
                           "--run-dir",
                           t("runs/best0"),
                           "--set",
                           "init.from=" + model(),
                           "--set",
                           "data.corpus=" + t("mine.txt"),
                           "--set",
                           "train.steps=4",
                           "--set",
                           "train.lr_max=1e-12",
                           "--set",
                           "train.threads=1",
                           "--set",
                           "train.eval_tasks=" + t("words.csv"),
                           "--set",
                           "train.eval_tasks_every=2",
                           "--set",
                           "checkpoint.keep_best=task:words.csv"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(best task:words\.csv: [0-9.]+ at step 0: )"))) << r.output;
  EXPECT_EQ(fs::read_symlink(t("runs/best0/weights/best.gguf")).string(), "step_0.gguf");
  EXPECT_EQ(train::latest_step(t("runs/best0")), 4);
}

// Nothing dropped without a word: record members training does not use are
// counted with the first FILE:LINE, and a skipped bad record is named.
TEST_F(FirstHour, IgnoredMembersAndSkippedRecordsAreSaid) {
  std::string records;
  for (int i = 0; i < 40; ++i)
    records += fmt::format(R"({{"messages": [{{"role": "user", "content": "Say {}"}}, {{"role": "assistant", )"
                           R"("content": "{}"{}}}]}})"
                           "\n",
                           i, i, i % 2 ? R"(, "reasoning_content": "it was asked")" : "");
  spit(t("reasoning.jsonl"), "{\"messages\": []}\n" + records);
  const CliResult r = cli({"train", "--preset", "tiny", "--run-dir", t("runs/drops"), "--set", "init.from=" + model(),
                           "--set", "data.corpus=" + t("reasoning.jsonl"), "--set", "data.format=chat", "--set",
                           "data.on_bad_document=skip", "--set", "train.steps=1", "--set", "train.threads=1"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "note: 20 record(s) have \"messages[].reasoning_content\", which training does not "
                                 "use (the first: " +
                                     t("reasoning.jsonl") + ":3)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "1 bad records skipped; the first bad record: " + t("reasoning.jsonl") +
                                     ":1: the conversation has no messages"))
      << r.output;
}

TEST_F(FirstHour, AnEmptyValidationSetIsWarned) {
  const CliResult r =
      cli({"train", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--set", "train.threads=1", "--set",
           "data.val_fraction=0", "--set", "train.steps=2", "--run-dir", t("runs/noval")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: the validation set holds 0 tokens, less than one batch of 4 x 64: no "
                                 "validation loss will be reported"))
      << r.output;
}

// A chat adapter trained with a template the base lacks (llama2's [INST],
// whose markers are plain text) answers through that template in `chat`,
// in a merged model, and in the merged model's ollama Modelfile.
TEST_F(FirstHour, ChatAdapterKeepsItsTemplateThroughChatAndMerge) {
  ASSERT_EQ(base_run_->status, 0) << base_run_->output;
  {
    std::ofstream out(t("chat.jsonl"));
    const char* words[] = {"alpha", "beta", "gamma", "delta"};
    for (int i = 0; i < 64; ++i)
      out << fmt::format(R"({{"messages": [{{"role": "user", "content": "Which word is number {}?"}}, )"
                         R"({{"role": "assistant", "content": "{}"}}]}})",
                         i % 4, words[i % 4])
          << "\n";
  }
  const std::string adapter = train::weights_path(t("runs/lora"), 4);
  CliResult r =
      cli({"train", "--preset", "tiny", "--set", "init.from=" + model(), "--set", "data.corpus=" + t("chat.jsonl"),
           "--set", "data.format=chat", "--set", "data.chat_template=llama2", "--set", "train.lora.rank=4", "--set",
           "train.steps=4", "--set", "train.threads=1", "--run-dir", t("runs/lora")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "next: ggtrain chat -m " + model() + " --lora " + adapter)) << r.output;
  spit(t("q.txt"), "Which word is number 2?\n");
  std::string said;  // the last chat's output
  auto prompt_ids = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"chat", "--prompt-file", t("q.txt"), "--json", "-n", "2", "--temp", "0"};
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult c = cli(a);
    EXPECT_EQ(c.status, 0) << c.output;
    said = c.output;
    std::smatch m;
    std::regex_search(c.output, m, std::regex(R"("prompt_ids":\[([0-9,]+)\])"));
    return m.size() > 1 ? m[1].str() : "none: " + c.output;
  };
  const std::string llama2 = prompt_ids({"-m", model(), "--lora", adapter, "--chat-template", "llama2"});
  const std::string chatml = prompt_ids({"-m", model(), "--lora", adapter, "--chat-template", "chatml"});
  ASSERT_NE(llama2, chatml) << "the two templates must tokenize differently for this test to mean anything";
  EXPECT_EQ(prompt_ids({"-m", model(), "--lora", adapter}), llama2);
  // chat says what is talking: the model, its adapter, the template, the context
  EXPECT_TRUE(contains(said, "chat: " + model() + " with adapter " + adapter +
                                 " (scale 1), template llama2, context "
                                 "64 tokens"))
      << said;
  // Merged (float and quantized): the adapter's template is the model's.
  const std::string adapter_template = gguf::GgufFile(adapter).get_string("tokenizer.chat_template");
  for (const char* type : {"f32", "q8_0"}) {
    SCOPED_TRACE(type);
    const std::string merged = t(fmt::format("merged/{}.gguf", type));
    fs::create_directories(t("merged"));
    r = cli({"export", "--merge-lora", model(), adapter, merged, "--type", type, "--ollama"});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(gguf::GgufFile(merged).get_string("tokenizer.chat_template"), adapter_template);
    const std::string modelfile = t(fmt::format("merged/{}.Modelfile", type));
    EXPECT_TRUE(contains(slurp(modelfile), "[INST]")) << slurp(modelfile);
    EXPECT_TRUE(contains(slurp(modelfile), fmt::format("FROM ./{}.gguf", type))) << slurp(modelfile);
    EXPECT_FALSE(contains(r.output, "note: its TEMPLATE")) << r.output;  // llama2 is ggtrain's own rendering
    EXPECT_TRUE(contains(r.output, "next: ollama create NAME -f")) << r.output;
    EXPECT_EQ(prompt_ids({"-m", merged}), llama2);
  }
}

TEST_F(FirstHour, QuantizedExportSaysWhichTensorsFellBack) {
  ASSERT_EQ(base_run_->status, 0) << base_run_->output;
  // The tiny model's rows (64, 160) are no multiple of 256: every K-quant
  // matrix falls back, as llama-quantize reports too.
  CliResult r = cli({"export", model(), t("q4km.gguf"), "--type", "q4_k_m"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output,
                                std::regex(R"(note: \d+ of \d+ quantized tensors have rows that are not a multiple)")))
      << r.output;
  r = cli({"export", model(), t("q8.gguf"), "--type", "q8_0"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "fallback")) << "q8_0's 32-blocks fit every row: " << r.output;
}

// checkpoint.imatrix: the run ends with an importance matrix of its final
// weights over its validation tokens, which export --imatrix takes (and
// which changes the blocks it writes).
TEST_F(FirstHour, RunWritesAnImatrixOfItsValidationData) {
  const std::string run = t("runs/imatrix"), weights = train::weights_path(run, 10);
  const CliResult r = cli({"train", "--preset", "tiny", "--set", "data.corpus=" + t("mine.txt"), "--set",
                           "data.vocab_size=512", "--set", "train.steps=10", "--set", "train.threads=1", "--set",
                           "checkpoint.imatrix=true", "--run-dir", run});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "wrote " + run + "/imatrix.gguf")) << r.output;
  const quant::ImportanceMatrix m = quant::read_importance_matrix(run + "/imatrix.gguf");
  const model::Config mc = model::config_from_gguf(gguf::GgufFile(weights));
  EXPECT_EQ(int64_t(m.entries.size()), 7 * mc.n_layers);  // q, k, v, output, gate, up, down of every block
  EXPECT_EQ(int64_t(m.chunk_size), std::min<int64_t>(512, mc.ctx));
  const int64_t val_tokens = corpus::TokenStream({run + "/data/val-00000.tok"}).size();
  EXPECT_EQ(int64_t(m.chunk_count), std::min<int64_t>(200, val_tokens / m.chunk_size));
  ASSERT_EQ(m.datasets.size(), 1u);
  EXPECT_EQ(m.datasets[0], run + "/data/val-00000.tok");
  ASSERT_EQ(cli({"export", weights, t("with.gguf"), "--type", "q4_k_m", "--imatrix", run + "/imatrix.gguf"}).status, 0);
  ASSERT_EQ(cli({"export", weights, t("without.gguf"), "--type", "q4_k_m"}).status, 0);
  EXPECT_NE(test_support::slurp(t("with.gguf")), test_support::slurp(t("without.gguf")));
}
