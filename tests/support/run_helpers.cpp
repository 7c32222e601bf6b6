#include "support/run_helpers.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "train/run_checkpoint.h"

namespace ggtrain::test_support {

void write_synthetic_corpus(const std::string& path, int lines) {
  static const char* words[] = {"the",  "king", "said",   "unto",  "them", "and",       "went", "into",
                                "land", "of",   "water",  "light", "day",  "night",     "was",  "good",
                                "he",   "made", "heaven", "earth", "in",   "beginning", "all",  "things"};
  const int n_words = int(sizeof(words) / sizeof(words[0]));
  std::ofstream out(path);
  uint64_t s = 12345;
  for (int i = 0; i < lines; ++i) {
    const int len = 6 + int(i % 9);
    for (int w = 0; w < len; ++w) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      out << (w ? " " : "") << words[(s >> 33) % uint64_t(n_words)];
    }
    out << (i % 3 == 0 ? ", 12 of 34.\n" : ".\n");
  }
}

void write_reversed_lines(const std::string& from, const std::string& to, int lines) {
  std::ifstream in(from);
  std::ofstream out(to);
  int n = 0;
  for (std::string line; n < lines && std::getline(in, line); ++n) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    std::reverse(w.begin(), w.end());
    for (size_t i = 0; i < w.size(); ++i) out << (i ? " " : "") << w[i];
    out << "\n";
  }
}

train::RunConfig tiny_run_config(const std::string& corpus, int64_t steps) {
  auto c = train::preset("tiny");
  c.data.corpus = {corpus};
  c.train.steps = steps;
  c.train.threads = 1;
  c.train.eval_every = 10;
  c.checkpoint.every = 10;
  return c;
}

train::TrainSummary run_quiet(const std::string& dir, const train::RunConfig& c, bool resume, int64_t stop_at) {
  train::TrainOptions o;
  o.run_dir = dir;
  o.config = resume ? train::saved_run_config(dir) : c;
  o.resume = resume;
  o.quiet = true;
  o.stop_at = stop_at;
  return train::run_training(o);
}

std::vector<nlohmann::json> metrics_records(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

nlohmann::json step_record(const std::string& run_dir, int64_t step) {
  for (const auto& r : metrics_records(run_dir))
    if (r.value("step", -1) == step && r.contains("loss")) return r;
  return nullptr;
}

nlohmann::json last_eval(const std::string& run_dir) {
  nlohmann::json last;
  for (const auto& r : metrics_records(run_dir))
    if (r.contains("val_loss")) last = r;
  return last;
}

std::string tiny_base_model(const std::string& dir) {
  write_synthetic_corpus(dir + "/corpus.txt", 1200);
  run_quiet(dir + "/base", tiny_run_config(dir + "/corpus.txt", 10), false);
  return train::weights_path(dir + "/base", 10);
}

namespace {

// The records of metrics.jsonl without what depends on the clock: step,
// loss, lr, grad_norm, val_loss (and any other number a run decides by
// its data and weights), one per line.
std::vector<std::string> metrics_without_timing(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      out.push_back("unparsable: " + line);
      continue;
    }
    // Facts about the process, not the run: its timings and which CPU
    // level's build ran (recorded on a process's first step).
    for (const char* clocked : {"tokens_per_s", "elapsed_s", "cpu_level", "rollout_s", "train_s", "qat_s"})
      j.erase(clocked);
    out.push_back(j.dump());
  }
  return out;
}

}  // namespace

void expect_same_data_position(const std::string& state_a, const std::string& state_b) {
  gguf::GgufFile a(state_a), b(state_b);
  // (epoch, cursor) is the batch loader's whole state: its order is drawn
  // from (train.seed, epoch), and train.seed is part of the saved config.
  for (const char* key : {"ggtrain.step", "ggtrain.data.epoch", "ggtrain.data.cursor"})
    EXPECT_EQ(a.get_uint(key), b.get_uint(key)) << key << " of " << state_a << " vs " << state_b;
  const auto seed = [](const gguf::GgufFile& f) {
    return toml::parse(f.get_string("ggtrain.config"))["train"]["seed"].value_or<int64_t>(-1);
  };
  EXPECT_EQ(seed(a), seed(b)) << "train.seed of " << state_a << " vs " << state_b;
}

double first_loss_without_qat(const std::string& dir, train::RunConfig c) {
  c.train.qat.clear();
  c.train.qat_every = 1;
  c.train.steps = 1;
  run_quiet(dir, c, false);
  return step_record(dir, 1)["loss"].get<double>();
}

void expect_exact_resume(const std::string& dir_a, const std::string& dir_b, const train::RunConfig& c,
                         int64_t stop_at) {
  run_quiet(dir_a, c, false);
  run_quiet(dir_b, c, false, stop_at);
  // The second run must really have been interrupted, at stop_at.
  ASSERT_EQ(train::latest_step(dir_b), stop_at) << dir_b << ": --stop-at " << stop_at << " did not stop there";
  ASSERT_FALSE(std::filesystem::exists(train::weights_path(dir_b, c.train.steps)))
      << dir_b << " already holds the final checkpoint before the resume";
  const auto b_before_resume = metrics_without_timing(dir_b);
  EXPECT_EQ(b_before_resume.size() > 0, true) << dir_b << "/metrics.jsonl is empty after --stop-at";
  run_quiet(dir_b, c, true);
  const int64_t n = c.train.steps;
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(dir_a, n), train::weights_path(dir_b, n), &why)) << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(dir_a, n), train::state_path(dir_b, n), &why)) << why;
  expect_same_data_position(train::state_path(dir_a, n), train::state_path(dir_b, n));
  expect_same_metrics(dir_a, dir_b);
}

void expect_same_metrics(const std::string& dir_a, const std::string& dir_b) {
  const auto la = metrics_without_timing(dir_a), lb = metrics_without_timing(dir_b);
  ASSERT_EQ(la.size(), lb.size()) << "metrics.jsonl line counts of " << dir_a << " and " << dir_b;
  ASSERT_GT(la.size(), 0u) << dir_a << "/metrics.jsonl is empty";
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i], lb[i]) << "metrics.jsonl line " << i + 1;
}

bool same_tensor_data(const std::string& a, const std::string& b, std::string* why) {
  gguf::GgufFile fa(a), fb(b);
  if (fa.tensors().size() != fb.tensors().size()) {
    *why = "tensor counts differ";
    return false;
  }
  for (size_t i = 0; i < fa.tensors().size(); ++i) {
    const auto& ta = fa.tensors()[i];
    const auto& tb = fb.tensors()[i];
    if (ta.name != tb.name || ta.type != tb.type || ta.shape() != tb.shape() || ta.n_bytes != tb.n_bytes ||
        std::memcmp(ta.data, tb.data, ta.n_bytes) != 0) {
      *why = "tensor '" + ta.name + "' differs";
      return false;
    }
  }
  return true;
}

}  // namespace ggtrain::test_support
