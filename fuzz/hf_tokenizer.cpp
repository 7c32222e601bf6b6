// Fuzz target: Hugging Face tokenizer.json and tokenizer_config.json
// (src/tokenizer/hf_tokenizer.h), what `tokenizer import` and
// data.tokenizer read. The input is tokenizer.json, then optionally a NUL
// byte and tokenizer_config.json (JSON holds no raw NUL). The reader accepts
// them or throws ggtrain::Error; an accepted vocabulary holds together (a
// type per token, a score per token for SentencePiece ones, special ids
// inside the vocabulary or unset) and its tokenizer.ggml.* keys are written.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "gguf/writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ggtrain_fuzz::MemFile json_file, config_file;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul), config = nul == std::string_view::npos ? "" : all.substr(nul + 1);
  const std::string json_path = json_file.write(reinterpret_cast<const uint8_t*>(json.data()), json.size());
  const std::string config_path =
      nul == std::string_view::npos ? std::string()
                                    : config_file.write(reinterpret_cast<const uint8_t*>(config.data()), config.size());
  try {
    const tokenizer::HfVocabulary v = tokenizer::read_hf_tokenizer(json_path, config_path);
    const int64_t n = int64_t(v.tokens.size());
    if (v.model != "gpt2" && v.model != "llama") ggtrain_fuzz::finding("a model that is neither gpt2 nor llama");
    if (v.types.size() != v.tokens.size()) ggtrain_fuzz::finding("token types do not match the tokens");
    if (v.model == "llama" && v.scores.size() != v.tokens.size())
      ggtrain_fuzz::finding("a SentencePiece vocabulary without a score per token");
    for (const int32_t id : {v.bos, v.eos, v.pad, v.unk})
      if (id < -1 || id >= n) ggtrain_fuzz::finding("a special id outside the vocabulary was accepted");
    gguf::GgufWriter w;
    tokenizer::add_hf_vocabulary(w, v);
    ggtrain_fuzz::sink(uint64_t(n) + v.merges.size());
  } catch (const Error&) {
  }
  return 0;
}
