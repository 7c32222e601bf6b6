// Test tool for tests/compat/llama_cpp_tokenizer_check.sh:
//   make_bpe_vocab lines OUT.txt N SEED
//       N lines of varied text (tests/support/varied_text.h).
//   make_bpe_vocab vocab KIND CORPUS.txt N_MERGES OUT.gguf
//       A gpt2 vocabulary with tokenizer.ggml.pre = KIND (default, gpt-2,
//       llama-bpe, smollm, qwen2, lfm2, qwen35) learned on CORPUS, as a llama model llama.cpp loads
//       (tests/support/bpe_vocab.h).
//   make_bpe_vocab model VOCAB.gguf OUT.gguf
//       VOCAB's tokenizer.* keys (`ggtrain tokenizer import`'s output) in a
//       1-layer llama with random weights, so that llama.cpp loads it.
//   make_bpe_vocab decode MODEL.gguf IDS.txt
//       For each line of comma-separated ids (an empty line is no ids):
//       Tokenizer::decode as lower-case hex bytes.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "support/bpe_vocab.h"
#include "support/varied_text.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::stringstream ss(line);
  for (std::string tok; std::getline(ss, tok, ',');) ids.push_back(int32_t(std::stol(tok)));
  return ids;
}

int usage() {
  std::fprintf(stderr, "usage: make_bpe_vocab lines OUT.txt N SEED\n"
                       "       make_bpe_vocab vocab KIND CORPUS.txt N_MERGES OUT.gguf\n"
                       "       make_bpe_vocab model VOCAB.gguf OUT.gguf\n"
                       "       make_bpe_vocab decode MODEL.gguf IDS.txt\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 4 && a[0] == "lines") {
      std::ofstream out(a[1], std::ios::binary);
      for (const auto& l : test_support::varied_lines(std::stoi(a[2]), std::stoull(a[3]))) out << l << '\n';
      if (!out.flush()) fail("{}: cannot write", a[1]);
      return 0;
    }
    if (a.size() == 5 && a[0] == "vocab") {
      const auto v = test_support::build_bpe_vocab(a[1], read_lines(a[2]), std::stoi(a[3]));
      test_support::write_bpe_vocab_gguf(a[4], a[1], v);
      std::fprintf(stderr, "%s: %zu tokens, %zu merges, pre '%s'\n", a[4].c_str(), v.tokens.size(), v.merges.size(),
                   a[1].c_str());
      return 0;
    }
    if (a.size() == 3 && a[0] == "model") {
      test_support::write_model_with_vocabulary(a[2], gguf::GgufFile(a[1]));
      return 0;
    }
    if (a.size() == 3 && a[0] == "decode") {
      const auto tok = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(a[1]));
      for (const auto& line : read_lines(a[2])) {
        for (unsigned char c : tok.decode(parse_ids(line))) std::printf("%02x", c);
        std::printf("\n");
      }
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_bpe_vocab: %s\n", e.what());
    return 1;
  }
  return usage();
}
