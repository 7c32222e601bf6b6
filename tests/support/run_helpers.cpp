#include "support/run_helpers.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/reader.h"

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
