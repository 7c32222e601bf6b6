#include "tokenizer/tokenizer.h"

#include "tokenizer/bpe_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <optional>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/bigram_merge.h"
#include "tokenizer/special_tokens.h"
#include "util/error.h"

namespace ggtrain::tokenizer {

namespace {

using gguf::Value;
using gguf::ValueType;

constexpr std::string_view kSpace = kSentencePieceSpace;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Byte value of a "<0xXX>" piece, or -1.
int byte_piece_value(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// An array-valued key; nullptr when absent and optional.
const Value* get_array(const gguf::GgufFile& f, const std::string& key, bool required) {
  const Value* v = f.find(key);
  if (!v) {
    if (required) fail("{}: missing metadata key '{}'", f.path(), key);
    return nullptr;
  }
  if (v->type != ValueType::ARRAY)
    fail("{}: metadata '{}' must be an array, is {}", f.path(), key, value_type_name(v->type));
  return v;
}

// tokenizer.ggml.scores and .token_type of n tokens: optional in llama.cpp
// (0 and NORMAL by default), but when present they must cover exactly the tokens.
std::vector<float> read_scores(const gguf::GgufFile& f, size_t n) {
  std::vector<float> scores(n, 0.0f);
  if (const Value* s = get_array(f, "tokenizer.ggml.scores", false)) {
    if (s->elem_type != ValueType::F32 && s->elem_type != ValueType::I32)
      fail("{}: metadata 'tokenizer.ggml.scores' must be an array of f32, holds {}", f.path(),
           value_type_name(s->elem_type));
    if (s->items.size() != n)
      fail("{}: metadata 'tokenizer.ggml.scores' has {} entries for {} tokens", f.path(), s->items.size(), n);
    for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>(s->items[i].as_double());
  }
  return scores;
}

std::vector<int32_t> read_token_types(const gguf::GgufFile& f, size_t n) {
  std::vector<int32_t> types(n, kNormal);
  if (const Value* ty = get_array(f, "tokenizer.ggml.token_type", false)) {
    if (ty->elem_type != ValueType::I32)
      fail("{}: metadata 'tokenizer.ggml.token_type' must be an array of i32, holds {}", f.path(),
           value_type_name(ty->elem_type));
    if (ty->items.size() != n)
      fail("{}: metadata 'tokenizer.ggml.token_type' has {} entries for {} tokens", f.path(), ty->items.size(), n);
    for (size_t i = 0; i < n; ++i) {
      int64_t v = ty->items[i].i;
      if (v < kUndefined || v > kByte)
        fail("{}: metadata 'tokenizer.ggml.token_type' has type {} at id {}", f.path(), v, i);
      types[i] = static_cast<int32_t>(v);
    }
  }
  return types;
}

}  // namespace

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  for (size_t pos = 0;;) {
    size_t hit = s.find(from, pos);
    out.append(s.substr(pos, hit == std::string_view::npos ? s.size() - pos : hit - pos));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    pos = hit + from.size();
  }
}

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& f) {
  const std::string& model = f.get_string("tokenizer.ggml.model");
  if (model == "gpt2") return from_gguf_bpe(f);
  if (model != "llama")
    fail("{}: tokenizer.ggml.model is '{}': that vocabulary type is not supported yet "
         "(only 'llama', sentencepiece BPE, and 'gpt2', byte-level BPE)",
         f.path(), model);

  Tokenizer t;
  const Value* tokens = get_array(f, "tokenizer.ggml.tokens", true);
  if (tokens->elem_type != ValueType::STRING)
    fail("{}: metadata 'tokenizer.ggml.tokens' must be an array of string, holds {}", f.path(),
         value_type_name(tokens->elem_type));
  const size_t n = tokens->items.size();
  if (n == 0 || n > INT32_MAX) fail("{}: metadata 'tokenizer.ggml.tokens' has {} entries", f.path(), n);
  for (const auto& it : tokens->items) t.pieces_.push_back(it.s);

  t.scores_ = read_scores(f, n);
  t.types_ = read_token_types(f, n);

  // get_uint rejects negative and non-integer values, naming file and key.
  // llama.cpp only warns about an id outside the vocabulary; we refuse it.
  auto id = [&](const char* key, int32_t fallback) {
    uint64_t v = f.get_uint_or(key, static_cast<uint64_t>(fallback));
    if (v >= n) fail("{}: metadata '{}' = {} is outside the {} tokens", f.path(), key, v, n);
    return static_cast<int32_t>(v);
  };
  t.bos_ = id("tokenizer.ggml.bos_token_id", 1);
  t.eos_ = id("tokenizer.ggml.eos_token_id", 2);
  t.unk_ = id("tokenizer.ggml.unknown_token_id", 0);
  t.add_bos_ = f.get_bool_or("tokenizer.ggml.add_bos_token", true);
  t.add_space_prefix_ = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  t.finish(f.path());
  // llama.cpp fixes some tokens' attributes by their text for every
  // vocabulary type (Gemma's user-defined "</s>" is an end-of-generation
  // control token to it): the cut lists come from those.
  LoadedAttrs loaded = loaded_attrs(f, t.pieces_, t.types_);
  t.user_defined_ = std::move(loaded.cut_first);
  t.special_ = std::move(loaded.special);
  t.read_chat_keys(f);
  return t;
}

Tokenizer Tokenizer::from_sentencepiece(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  if (auto st = sp.Load(model_path); !st.ok())
    fail("{}: cannot load sentencepiece model: {}", model_path, st.ToString());
  Tokenizer t;
  const int n = sp.GetPieceSize();
  // Same mapping as llama.cpp's _create_vocab_sentencepiece (conversion/base.py).
  for (int i = 0; i < n; ++i) {
    t.pieces_.push_back(sp.IdToPiece(i));
    t.scores_.push_back(sp.GetScore(i));
    int32_t type = kNormal;
    if (sp.IsUnknown(i)) type = kUnknown;
    else if (sp.IsControl(i)) type = kControl;
    else if (sp.IsUnused(i)) type = kUnused;
    else if (sp.IsByte(i)) type = kByte;
    t.types_.push_back(type);
  }
  if (sp.bos_id() < 0 || sp.eos_id() < 0 || sp.unk_id() < 0)
    fail("{}: sentencepiece model lacks <unk>, <s> or </s> (ids {}, {}, {})", model_path, sp.unk_id(), sp.bos_id(),
         sp.eos_id());
  t.bos_ = sp.bos_id();
  t.eos_ = sp.eos_id();
  t.unk_ = sp.unk_id();
  // add_space_prefix = normalizer_spec.add_dummy_prefix. The 0.1.97 API does
  // not expose it, so ask sentencepiece how it normalizes "a": a leading
  // U+2581 means the dummy prefix is on.
  std::vector<int> ids;
  std::string normalized;
  if (auto st = sp.Encode("a", &ids); !st.ok()) fail("{}: sentencepiece cannot encode: {}", model_path, st.ToString());
  for (int i : ids) {
    int b = sp.IsByte(i) ? byte_piece_value(sp.IdToPiece(i)) : -1;
    normalized += b >= 0 ? std::string(1, static_cast<char>(b)) : sp.IdToPiece(i);
  }
  t.add_space_prefix_ = normalized.starts_with(kSpace);
  t.finish(model_path);
  return t;
}

void Tokenizer::finish(const std::string& src) {
  source_ = src;
  const auto n = static_cast<int32_t>(pieces_.size());
  piece_to_id_.reserve(pieces_.size());
  for (int32_t i = 0; i < n; ++i) {
    if (pieces_[i].empty()) pieces_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    auto [it, fresh] = piece_to_id_.emplace(pieces_[i], i);
    // llama.cpp aborts on a duplicate (id_to_token.size() != token_to_id.size()).
    if (!fresh) fail("{}: tokenizer.ggml.tokens holds '{}' twice (ids {} and {})", src, pieces_[i], it->second, i);
    if (types_[i] == kByte && byte_piece_value(pieces_[i]) < 0)
      fail("{}: tokenizer.ggml.token_type marks '{}' (id {}) as a byte token, but it is not "
           "<0xXX>",
           src, pieces_[i], i);
    if (types_[i] == kUserDefined) user_defined_.push_back(i);
    if (types_[i] == kUserDefined || types_[i] == kControl || types_[i] == kUnknown) special_.push_back(i);
  }
  for (auto [key, id] : {std::pair{"bos", bos_}, std::pair{"eos", eos_}, std::pair{"unk", unk_}})
    if (id < (bpe_ ? -1 : 0) || id >= n) fail("{}: {} id {} is outside the {} tokens", src, key, id, n);

  // llama.cpp's byte_to_token: "<0xXX>" (upper-case hex), else the byte itself.
  for (int b = 0; b < 256; ++b) {
    int32_t id = find(fmt::format("<0x{:02X}>", b));
    byte_to_id_[b] = id >= 0 ? id : find(std::string(1, static_cast<char>(b)));
  }
  // User-defined pieces are split out before BPE, longest first (llama.cpp
  // sorts with an unstable sort; equal lengths keep id order here).
  auto longest_first = [&](int32_t a, int32_t b) { return pieces_[a].size() > pieces_[b].size(); };
  std::stable_sort(user_defined_.begin(), user_defined_.end(), longest_first);
  std::stable_sort(special_.begin(), special_.end(), longest_first);
}

void Tokenizer::read_chat_keys(const gguf::GgufFile& f) {
  if (const Value* v = f.find("tokenizer.chat_template")) {
    if (v->type != ValueType::STRING)
      fail("{}: metadata 'tokenizer.chat_template' must be a string, is {}", f.path(), value_type_name(v->type));
    chat_template_ = v->s;
  }
  if (f.find("tokenizer.ggml.eot_token_id")) {
    const uint64_t id = f.get_uint_or("tokenizer.ggml.eot_token_id", 0);
    if (id >= uint64_t(vocab_size()))
      fail("{}: metadata 'tokenizer.ggml.eot_token_id' = {} is outside the {} tokens", f.path(), id, vocab_size());
    eot_ = int32_t(id);
  }
}

void Tokenizer::set_chat_template(const std::string& jinja, int32_t eot_id) {
  if (eot_id < 0 || eot_id >= vocab_size())
    fail("{}: end-of-turn id {} is outside the {} tokens", source_, eot_id, vocab_size());
  chat_template_ = jinja;
  eot_ = eot_id;
}

Tokenizer Tokenizer::with_control_tokens(const std::vector<std::string>& pieces) const {
  if (bpe_)
    fail("{}: a gpt2 (byte-level BPE) vocabulary cannot grow tokens here; it lacks {}", source_,
         pieces.empty() ? std::string("nothing") : pieces.front());
  Tokenizer t = *this;
  for (const std::string& p : pieces) {
    if (t.find(p) >= 0) fail("{}: '{}' is already a token (id {})", source_, p, t.find(p));
    t.pieces_.push_back(p);
    t.scores_.push_back(0.0f);
    t.types_.push_back(kControl);
  }
  t.piece_to_id_.clear();
  t.user_defined_.clear();
  t.special_.clear();
  t.finish(source_);
  return t;
}

int32_t Tokenizer::find(std::string_view text) const {
  auto it = piece_to_id_.find(text);
  return it == piece_to_id_.end() ? -1 : it->second;
}

// llm_tokenizer_spm_session::tokenize on already-escaped text: start from
// UTF-8 characters and keep merging the adjacent pair whose concatenation is
// the best-scoring piece. A merged symbol is always a piece, so llama.cpp's
// rev_merge re-segmentation never applies; what is left unmerged and is not
// a piece goes out as byte tokens.
void Tokenizer::encode_spm(const std::string& text, std::vector<int32_t>& out) const {
  // Ranked by the score of the merged piece (adjacent pieces are adjacent
  // in text, so the merged piece is a view too).
  auto rank = [&](std::string_view l, std::string_view r) -> std::optional<float> {
    const int32_t id = find(std::string_view(l.data(), l.size() + r.size()));
    if (id < 0) return std::nullopt;
    return scores_[size_t(id)];
  };
  merge_bigrams(text, rank, [&](std::string_view s) {
    if (int32_t id = find(s); id >= 0) {
      out.push_back(id);
      return;
    }
    for (char c : s) {
      int32_t id = byte_to_id_[static_cast<uint8_t>(c)];
      if (id < 0)
        fail("{}: the tokenizer has no token for byte 0x{:02X} (<0x{:02X}>)", source_, static_cast<uint8_t>(c),
             static_cast<uint8_t>(c));
      out.push_back(id);
    }
  });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  return encode(text, EncodeOptions{.add_bos = add_bos});
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  if (bpe_) return encode_bpe(text, o);
  // llama_vocab::impl::tokenize for SPM: user-defined pieces (with
  // parse_special also control and unknown ones) are cut out of the text;
  // every text fragment that follows the start (or such a piece) gets the
  // space prefix.
  const std::vector<Fragment> frags =
      cut_special_tokens(text, o.parse_special ? special_ : user_defined_, pieces_, [](int32_t) { return Strip{}; });
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (o.add_bos) out.push_back(bos_);
  bool prev_special = !o.continuation;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    std::string raw = add_space_prefix_ && prev_special ? " " : "";
    raw.append(text.substr(f.off, f.len));
    encode_spm(replace_all(raw, " ", kSpace), out);
    prev_special = false;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) fail("{}: token id {} is outside the {} tokens", source_, id, vocab_size());
  if (bpe_) return token_to_piece_bpe(id);
  switch (types_[id]) {
    case kNormal: return replace_all(pieces_[id], kSpace, " ");
    case kUserDefined: return pieces_[id];
    case kByte: return std::string(1, static_cast<char>(byte_piece_value(pieces_[id])));
    default: return "";  // control, unknown, unused, undefined: not text
  }
}

std::vector<int32_t> Tokenizer::token_byte_lengths() const {
  std::vector<int32_t> n(static_cast<size_t>(vocab_size()));
  for (int32_t id = 0; id < vocab_size(); ++id) n[size_t(id)] = static_cast<int32_t>(token_to_piece(id).size());
  return n;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  if (bpe_) return decode_bpe(ids);
  // The space prefix added by encode is dropped from the first piece, unless
  // the ids start with BOS (llama_detokenize keeps it then).
  bool remove_space = add_space_prefix_;
  size_t i = 0;
  if (add_bos_ && !ids.empty() && ids[0] == bos_) {
    remove_space = false;
    i = 1;
  }
  std::string out;
  for (; i < ids.size(); ++i) {
    std::string p = token_to_piece(ids[i]);
    out.append(p, remove_space && !p.empty() && p[0] == ' ' ? 1 : 0);
    remove_space = false;
  }
  return out;
}

void Tokenizer::add_to_gguf(gguf::GgufWriter& w) const {
  if (bpe_) return add_to_gguf_bpe(w);
  w.set("tokenizer.ggml.model", Value::str("llama"));
  w.set("tokenizer.ggml.tokens", Value::string_array(pieces_));
  w.set("tokenizer.ggml.scores", Value::f32_array(scores_));
  w.set("tokenizer.ggml.token_type", Value::i32_array(types_));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<uint32_t>(bos_)));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(eos_)));
  w.set("tokenizer.ggml.unknown_token_id", Value::u32(static_cast<uint32_t>(unk_)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(add_bos_));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
  w.set("tokenizer.ggml.add_space_prefix", Value::boolean(add_space_prefix_));
  add_chat_keys(w);
}

void Tokenizer::add_chat_keys(gguf::GgufWriter& w) const {
  if (!chat_template_.empty()) w.set("tokenizer.chat_template", Value::str(chat_template_));
  if (eot_ >= 0) w.set("tokenizer.ggml.eot_token_id", Value::u32(static_cast<uint32_t>(eot_)));
}

}  // namespace ggtrain::tokenizer
