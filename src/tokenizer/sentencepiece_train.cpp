#include "tokenizer/sentencepiece_train.h"

#include <sentencepiece_trainer.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::tokenizer {

// sentencepiece skips lines longer than max_sentence_length bytes (4192 by
// default) without saying so; raised here, and what is still longer counted.
constexpr int64_t kMaxSentenceBytes = 1 << 16;

namespace {
SentencepieceReport count_lines(const std::string& path) {
  SentencepieceReport r;
  r.max_line_bytes = kMaxSentenceBytes;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    ++r.lines;
    if (int64_t(line.size()) > kMaxSentenceBytes) ++r.long_lines;
  }
  return r;
}
}  // namespace

int64_t minimum_bpe_vocab(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read training text: {}", path, errno_text(errno));
  std::unordered_set<uint32_t> chars;  // a character's UTF-8 bytes packed into one number
  for (std::string line; std::getline(in, line);)
    for (size_t i = 0; i < line.size();) {
      const auto lead = static_cast<unsigned char>(line[i]);
      const size_t n = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
      uint32_t key = 0;
      for (size_t k = 0; k < n && i + k < line.size(); ++k) key = key << 8 | static_cast<unsigned char>(line[i + k]);
      chars.insert(key);
      i += n;
    }
  return kReservedBpePieces + int64_t(chars.size());
}

SentencepieceReport train_sentencepiece_bpe(const std::string& input_path, int vocab_size,
                                            const std::string& out_model_path) {
  struct stat st {};
  if (::stat(input_path.c_str(), &st) != 0) fail("{}: cannot read training text: {}", input_path, errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: training text is not a regular file", input_path);
  if (const int64_t need = minimum_bpe_vocab(input_path); vocab_size < need)
    fail("{}: a vocabulary of {} is too small for this text: its {} distinct characters and the {} reserved pieces "
         "(256 bytes, <unk>, <s>, </s>) need at least {}; ask for {} or more",
         input_path, vocab_size, need - kReservedBpePieces, kReservedBpePieces, need, need);

  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::unordered_map<std::string, std::string> args{
      {"input", input_path},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"character_coverage", "1.0"},
      // unk 0, bos 1, eos 2 are sentencepiece's defaults and llama.cpp's.
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      // Callers sample the corpus (train/run_data.cpp: a seeded reservoir of
      // data.tokenizer_sample_lines lines); up to 10M lines are all used.
      {"input_sentence_size", "10000000"},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"num_threads", std::to_string(threads)},
      // 0 = INFO (hundreds of lines per run), 1 = warnings and errors only.
      {"minloglevel", std::getenv("GGTRAIN_VERBOSE") ? "0" : "1"},
  };
  // Asking for the serialized model instead of a model_prefix keeps
  // sentencepiece from writing <prefix>.model/.vocab itself: we write the
  // exact path requested, atomically (temp file in the same folder + rename).
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
  if (!status.ok())
    fail("{}: sentencepiece training failed (vocabulary {}): {}", input_path, vocab_size, status.ToString());
  write_file_atomic(out_model_path, model.data(), model.size());
  return count_lines(input_path);
}

}  // namespace ggtrain::tokenizer
