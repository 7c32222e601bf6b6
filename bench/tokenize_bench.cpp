// Tokenization throughput: ggtrain's encoder (llama.cpp's SPM
// algorithm from the model's vocabulary) against libsentencepiece's own
// encoder, same model, same text, one line = one document, in MB of text
// per second at 1 and N threads. Also counts lines whose ids differ.
// With a .gguf (e.g. a gpt2 vocabulary) only ggtrain's encoder is timed
// (bench/llama_tokenize.mjs times llama.cpp's on the same file).
//
//   bench_tokenize MODEL.model|MODEL.gguf TEXT [threads...]      (default: 1 and all cores)
#include <omp.h>
#include <sentencepiece_processor.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

using namespace ggtrain;

namespace {

std::vector<std::string> read_lines(const std::string& path, size_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  *bytes = 0;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) *bytes += l.size(), lines.push_back(std::move(l));
  return lines;
}

// Seconds to encode every line with `encode` on `threads` threads (best of 3).
template <typename Encode>
double time_encode(const std::vector<std::string>& lines, int threads, Encode encode) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = bench::now_s();
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
    for (size_t i = 0; i < lines.size(); ++i) encode(lines[i]);
    best = std::min(best, bench::now_s() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.model TEXT [threads...]\n", argv[0]);
    return 2;
  }
  std::vector<int> threads;
  for (int i = 3; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, omp_get_max_threads()};
  size_t bytes = 0;
  const auto lines = read_lines(argv[2], &bytes);
  const std::string model = argv[1];
  const bool gguf_model = model.size() > 5 && model.substr(model.size() - 5) == ".gguf";
  if (gguf_model) {
    const auto tok = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(model));
    size_t tokens = 0;  // to compare with llama.cpp's count (bench/llama_tokenize.mjs)
    for (const auto& l : lines) tokens += tok.encode(l, false).size();
    std::printf("%s: %zu lines, %.1f MB, %s vocabulary %lld, %zu tokens\n", argv[2], lines.size(), double(bytes) / 1e6,
                std::string(tok.model()).c_str(), (long long)tok.vocab_size(), tokens);
    for (int t : threads) {
      const double s = time_encode(lines, t, [&](const std::string& l) { return tok.encode(l, false); });
      std::printf("%-8d %-14s %10.2f %14.1f\n", t, "ggtrain", s, double(bytes) / 1e6 / s);
    }
    return 0;
  }
  const auto tok = tokenizer::Tokenizer::from_sentencepiece(model);
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model).ok()) return 1;

  size_t differ = 0;
  for (const auto& l : lines) {
    std::vector<int> ids;
    (void)sp.Encode(l, &ids);
    const auto ours = tok.encode(l, false);
    if (std::vector<int32_t>(ids.begin(), ids.end()) != ours) ++differ;
  }
  std::printf("%s: %zu lines, %.1f MB, vocabulary %lld; lines whose ids differ: %zu\n", argv[2], lines.size(),
              double(bytes) / 1e6, (long long)tok.vocab_size(), differ);
  std::printf("%-8s %-14s %10s %14s\n", "threads", "encoder", "seconds", "MB/s");
  for (int t : threads) {
    const double ours = time_encode(lines, t, [&](const std::string& l) { return tok.encode(l, false); });
    const double theirs = time_encode(lines, t, [&](const std::string& l) {
      std::vector<int> ids;
      (void)sp.Encode(l, &ids);
      return ids;
    });
    std::printf("%-8d %-14s %10.2f %14.1f\n", t, "ggtrain", ours, double(bytes) / 1e6 / ours);
    std::printf("%-8d %-14s %10.2f %14.1f\n", t, "sentencepiece", theirs, double(bytes) / 1e6 / theirs);
  }
  return 0;
}
