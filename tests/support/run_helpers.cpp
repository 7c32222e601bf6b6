#include "support/run_helpers.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "train/run_checkpoint.h"

namespace ggtrain::test_support {

void write_synthetic_corpus(const std::string& path, int lines) {
  static const char* words[] = {"the", "king", "said", "unto", "them", "and", "went", "into",
                                "land", "of", "water", "light", "day", "night", "was", "good",
                                "he", "made", "heaven", "earth", "in", "beginning", "all", "things"};
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

train::RunConfig tiny_run_config(const std::string& corpus, int64_t steps) {
  auto c = train::preset("tiny");
  c.data.corpus = corpus;
  c.train.steps = steps;
  c.train.threads = 1;
  c.train.eval_every = 10;
  c.checkpoint.every = 10;
  return c;
}

train::TrainSummary run_quiet(const std::string& dir, const train::RunConfig& c, bool resume,
                              int64_t stop_at) {
  train::TrainOptions o;
  o.run_dir = dir;
  o.config = resume ? train::saved_run_config(dir) : c;
  o.resume = resume;
  o.quiet = true;
  o.stop_at = stop_at;
  return train::run_training(o);
}

std::string tiny_base_model(const std::string& dir) {
  write_synthetic_corpus(dir + "/corpus.txt", 1200);
  run_quiet(dir + "/base", tiny_run_config(dir + "/corpus.txt", 10), false);
  return train::weights_path(dir + "/base", 10);
}

void expect_exact_resume(const std::string& dir_a, const std::string& dir_b, const train::RunConfig& c,
                         int64_t stop_at) {
  run_quiet(dir_a, c, false);
  run_quiet(dir_b, c, false, stop_at);
  run_quiet(dir_b, c, true);
  const int64_t n = c.train.steps;
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(dir_a, n), train::weights_path(dir_b, n), &why)) << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(dir_a, n), train::state_path(dir_b, n), &why)) << why;
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
    if (ta.name != tb.name || ta.type != tb.type || ta.shape() != tb.shape() ||
        ta.n_bytes != tb.n_bytes || std::memcmp(ta.data, tb.data, ta.n_bytes) != 0) {
      *why = "tensor '" + ta.name + "' differs";
      return false;
    }
  }
  return true;
}

}  // namespace ggtrain::test_support
