#pragma once
// Pre-tokenizers of llama.cpp's byte-level BPE vocabularies
// (tokenizer.ggml.pre): the text is cut into words before merges apply, the
// way llama.cpp's unicode_regex_split (src/unicode.cpp) cuts it for the
// regex list of llm_tokenizer_bpe (src/llama-vocab.cpp), and each word is
// then spelled in GPT-2's byte alphabet.
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::tokenizer {

// The regex lists implemented here (each named by its main pre-tokenizer).
enum class PreSplit {
  kDefault,  // [\p{P}\$\+<=>\^~\|]+, then GPT-2's, then \p{N}+, then [0-9][0-9][0-9]
  kGpt2,  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
            // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kSmollm,  // \p{N} (every digit alone), then GPT-2's
  kQwen2,  // kLlama3's with \p{N} for \p{N}{1,3} (Qwen2, Qwen2.5, Qwen3)
  kQwen35,  // kQwen2's with combining marks in letter runs: [\p{L}\p{M}]+ (Qwen3.5)
};

// What a tokenizer.ggml.pre name selects in llama.cpp's llama_vocab::load.
struct PreTokenizer {
  std::string_view name;
  PreSplit split;
  bool ignore_merges;  // a word that is a token as a whole is taken as is
  bool clean_spaces;  // detokenize removes " " before ?!., and in " 's" etc.
  bool add_bos;  // default of tokenizer.ggml.add_bos_token
};

// nullptr for a name this implementation does not know (llama.cpp knows
// more); "" means the key is absent, which llama.cpp reads as "default".
const PreTokenizer* find_pre_tokenizer(std::string_view name);
// "default, gpt-2, ..." for error messages.
std::string pre_tokenizer_names();

// Words of `text` (any bytes; invalid UTF-8 reads as U+FFFD) in GPT-2's byte
// alphabet, in order; their concatenation spells the whole text.
std::vector<std::string> pre_tokenize(std::string_view text, PreSplit split);

}  // namespace ggtrain::tokenizer
