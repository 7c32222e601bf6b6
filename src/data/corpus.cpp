#include "data/corpus.h"

#include <fstream>
#include <vector>

#include "data/token_file.h"
#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::data {

CorpusStats prepare_corpus(const std::string& text_path, const Tokenizer& tok,
                           double val_fraction, uint64_t seed, const std::string& train_out,
                           const std::string& val_out) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) fail("{}: cannot read the corpus", text_path);
  std::vector<std::string> lines;
  CorpusStats st;
  for (std::string line; std::getline(in, line);) {
    st.bytes += int64_t(line.size()) + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  if (lines.empty()) fail("{}: the corpus has no text", text_path);
  std::vector<std::vector<int32_t>> encoded(lines.size());
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < lines.size(); ++i) encoded[i] = tok.encode(lines[i], true);

  std::vector<int32_t> train, val;
  for (size_t i = 0; i < lines.size(); ++i) {
    Rng h(seed ^ (0xd1b54a32d192ed03ULL * (i + 1)));
    auto& dst = h.uniform() < val_fraction ? val : train;
    dst.insert(dst.end(), encoded[i].begin(), encoded[i].end());
  }
  st.documents = int64_t(lines.size());
  st.train_tokens = int64_t(train.size());
  st.val_tokens = int64_t(val.size());
  write_token_file(train_out, tok.vocab_size(), train);
  write_token_file(val_out, tok.vocab_size(), val);
  return st;
}

}  // namespace ggtrain::data
