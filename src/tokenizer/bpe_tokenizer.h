#pragma once
// What a Tokenizer holds for llama.cpp's "gpt2" vocabulary type: byte-level
// BPE driven by tokenizer.ggml.merges (rank = position in the list), after
// the pre-tokenizer named by tokenizer.ggml.pre. The Tokenizer members that
// use it (Tokenizer::*_bpe, defined in bpe_tokenizer.cpp) reproduce
// llama.cpp's llm_tokenizer_bpe_session, tokenizer_st_partition,
// token_to_piece and detokenize (src/llama-vocab.cpp) step for step.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "gguf/value.h"
#include "tokenizer/pre_tokenizer.h"

namespace ggtrain::tokenizer {

// llama.cpp's llama_token_attr bits.
enum TokenAttr : uint32_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

// Token attributes as llama.cpp has them once a vocabulary is loaded (the
// token types, then its fix-ups by token text and model name, for every
// vocabulary type), and its special-token cache.
struct LoadedAttrs {
  std::vector<uint32_t> attrs;
  // Tokens cut out of the text before tokenization when special tokens are
  // not parsed (user-defined ones), in llama.cpp's order.
  std::vector<int32_t> cut_first;
  // ... and when they are (parse_special): every special token, in that order.
  std::vector<int32_t> special;
};
LoadedAttrs loaded_attrs(const gguf::GgufFile& f, const std::vector<std::string>& pieces,
                         const std::vector<int32_t>& types);

struct BpeVocab {
  const PreTokenizer* pre = nullptr;
  // (left id << 32 | right id) -> rank; every merge names two tokens whose
  // concatenation is a token too.
  std::unordered_map<uint64_t, int32_t> ranks;
  // Per token, as llama.cpp has them once loaded: the token_type, then its
  // fix-ups by token text and model name.
  std::vector<uint32_t> attrs;
  // Tokens cut out of the text before pre-tokenization when special tokens
  // are not parsed (user-defined ones), in llama.cpp's order.
  std::vector<int32_t> cut_first;
  // ... and when they are (parse_special): every special token, in that order.
  std::vector<int32_t> special;
  int32_t bos = -1, eos = -1;  // as llama.cpp resolves them; -1: none
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  // Every tokenizer.* key of the source file, written back verbatim so that
  // a model trained with this vocabulary tokenizes as its source does.
  std::vector<std::pair<std::string, gguf::Value>> keys;
};

}  // namespace ggtrain::tokenizer
