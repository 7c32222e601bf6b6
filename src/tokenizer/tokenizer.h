#pragma once
// llama.cpp's "llama" (SPM) tokenizer: sentencepiece-style BPE driven by the
// piece scores, byte fallback through <0xXX> pieces, spaces as U+2581.
// encode/decode reproduce llama.cpp's llm_tokenizer_spm and llama_detokenize
// (src/llama-vocab.cpp) step for step, so ids we train on are the ids
// llama.cpp feeds the model at inference.
// From a GGUF it also reads llama.cpp's "gpt2" type (byte-level BPE with
// merges and a pre-tokenizer; tokenizer/bpe_tokenizer.h), with the same API.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ggtrain::gguf {
class GgufFile;
class GgufWriter;
}  // namespace ggtrain::gguf

namespace ggtrain::tokenizer {

struct BpeVocab;

// SentencePiece's space, U+2581 ("▁"), which its pieces hold for " ".
inline constexpr std::string_view kSentencePieceSpace = "\xe2\x96\x81";
// s with every occurrence of `from` replaced by `to`.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// How encode() reads text, as llama.cpp's tokenize(add_special,
// parse_special) does; `continuation` is ggtrain's: the text continues
// text tokenized before it (an answer after its prompt), so it gets no
// space prefix at its start.
struct EncodeOptions {
  bool add_bos = false;
  bool parse_special = false;  // control tokens' texts (<s>, <|im_end|>, ...) become those tokens
  bool continuation = false;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* of a model GGUF; Error naming file and key when
  // the vocabulary is not "llama" or "gpt2" or any key is missing, mistyped
  // or bad.
  static Tokenizer from_gguf(const gguf::GgufFile& f);
  // Converts a sentencepiece .model like llama.cpp's convert script does.
  static Tokenizer from_sentencepiece(const std::string& model_path);

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const;
  // llama_detokenize(remove_special = true, unparse_special = false).
  std::string decode(const std::vector<int32_t>& ids) const;
  // One token's text for streaming: control/unknown/unused -> "", byte
  // tokens -> the raw byte, normal pieces with U+2581 turned into spaces.
  std::string token_to_piece(int32_t id) const;
  // Per token id, the bytes of its token_to_piece text (0 for control
  // tokens): what bits per byte divide by.
  std::vector<int32_t> token_byte_lengths() const;

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  // The token a document starts with: BOS; for a gpt2 vocabulary without
  // one (llama.cpp defaults its id to 11, so only under 12 tokens), EOS.
  int32_t bos_id() const { return bos_; }
  // -1 when a gpt2 vocabulary has none.
  int32_t eos_id() const { return eos_; }
  int32_t unk_id() const { return unk_; }  // -1 when a gpt2 vocabulary has none
  // tokenizer.ggml.model: "llama" or "gpt2".
  std::string_view model() const { return bpe_ ? "gpt2" : "llama"; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // tokenizer.ggml.add_bos_token as llama.cpp resolves it: whether its
  // tokenize(add_special = true) starts with BOS (for gpt2 vocabularies the
  // default depends on the pre-tokenizer, and it is often false).
  bool add_bos() const { return add_bos_; }
  const std::string& piece(int32_t id) const { return pieces_.at(id); }
  int32_t token_type(int32_t id) const { return types_.at(id); }
  // The id whose piece is exactly `text`, or -1.
  int32_t token_id(std::string_view text) const { return find(text); }

  // The same vocabulary with `pieces` appended as control tokens (GGUF
  // token type 3, score 0), in order: for chat markers a vocabulary lacks.
  // Llama (SPM) vocabularies only; Error for gpt2 ones and for a piece
  // that is already a token.
  Tokenizer with_control_tokens(const std::vector<std::string>& pieces) const;

  // tokenizer.chat_template (a Jinja string; "" when none) and
  // tokenizer.ggml.eot_token_id (the end of a chat turn; -1 when none), as
  // read from a GGUF or set for a chat run; add_to_gguf writes them.
  const std::string& chat_template() const { return chat_template_; }
  int32_t eot_id() const { return eot_; }
  void set_chat_template(const std::string& jinja, int32_t eot_id);
  // Takes the chat keys (tokenizer.chat_template, eot id) a file has, e.g.
  // a chat LoRA adapter's over its base's; keys the file lacks stay.
  void read_chat_keys(const gguf::GgufFile& f);
  // Just those two keys (when set), e.g. for a LoRA adapter of a chat run.
  void add_chat_keys(gguf::GgufWriter& w) const;

  // Writes the complete tokenizer.ggml.* set llama.cpp needs (for a gpt2
  // vocabulary: every tokenizer.* key of its source, as it was).
  void add_to_gguf(gguf::GgufWriter& w) const;

 private:
  struct Hash {
    using is_transparent = void;  // lets find() take a string_view
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  Tokenizer() = default;
  // Validates ids/pieces and builds the lookup tables; `src` names the
  // source (file) in error messages.
  void finish(const std::string& src);
  int32_t find(std::string_view text) const;
  void encode_spm(const std::string& text, std::vector<int32_t>& out) const;

  // The gpt2 vocabulary type, in bpe_tokenizer.cpp.
  static Tokenizer from_gguf_bpe(const gguf::GgufFile& f);
  std::vector<int32_t> encode_bpe(std::string_view text, const EncodeOptions& o) const;
  void encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const;
  std::string decode_bpe(const std::vector<int32_t>& ids) const;
  std::string token_to_piece_bpe(int32_t id) const;
  void add_to_gguf_bpe(gguf::GgufWriter& w) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  int32_t bos_ = 1, eos_ = 2, unk_ = 0;  // llama.cpp's SPM defaults
  bool add_bos_ = true;
  bool add_space_prefix_ = true;
  std::string source_;  // file the vocabulary came from, for error messages

  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> piece_to_id_;
  std::array<int32_t, 256> byte_to_id_{};  // -1: no token for that byte
  std::vector<int32_t> user_defined_;  // split out before BPE, longest first
  std::vector<int32_t> special_;  // with parse_special: control, user-defined, unknown; longest first
  std::string chat_template_;
  int32_t eot_ = -1;
  std::shared_ptr<const BpeVocab> bpe_;  // set for a gpt2 vocabulary
};

}  // namespace ggtrain::tokenizer
