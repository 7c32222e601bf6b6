// The "gpt2" vocabulary type of tokenizer::Tokenizer: reading it from a GGUF,
// encoding, decoding and writing it back. The llama.cpp functions each step
// reproduces are named at the step (src/llama-vocab.cpp unless said).
#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/bigram_merge.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ggtrain::tokenizer {

namespace {

using gguf::Value;
using gguf::ValueType;
using Names = std::initializer_list<std::string_view>;

constexpr int32_t kBpeDefaultSpecialId = 11;  // llama.cpp's default bos/eos for gpt2 vocabularies

uint64_t pair_key(int32_t left, int32_t right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

const Value& array_of(const gguf::GgufFile& f, const std::string& key, ValueType elem) {
  const Value* v = f.find(key);
  if (!v) fail("{}: missing metadata key '{}'", f.path(), key);
  if (v->type != ValueType::ARRAY || v->elem_type != elem)
    fail("{}: metadata '{}' must be an array of {}", f.path(), key, value_type_name(elem));
  return *v;
}

// llama.cpp's special-token ids: the key when present (we refuse an id
// outside the vocabulary, which llama.cpp only warns about), else `fallback`
// when it is inside the vocabulary, else none.
int32_t special_id(const gguf::GgufFile& f, const std::string& key, int32_t fallback, size_t n) {
  if (f.find(key)) {
    uint64_t v = f.get_uint(key);
    if (v >= n) fail("{}: metadata '{}' = {} is outside the {} tokens", f.path(), key, v, n);
    return int32_t(v);
  }
  return fallback >= 0 && size_t(fallback) < n ? fallback : -1;
}

// llama_token_type -> llama_token_attr, as llama_vocab::impl::load maps them.
uint32_t attr_of_type(int32_t type) {
  switch (type) {
    case kUnknown: return kAttrUnknown;
    case kUnused: return kAttrUnused;
    case kNormal: return kAttrNormal;
    case kControl: return kAttrControl;
    case kUserDefined: return kAttrUserDefined;
    case kByte: return kAttrByte;
    default: return 0;
  }
}

bool contains_any(std::string_view s, Names parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return s.find(p) != s.npos; });
}

// Token attributes as llama_vocab::impl::load leaves them (llama.cpp of
// 2026-08, commit 3f545bec): the token types, then its fix-ups by token text
// and model name. Only what changes encoding without special-token parsing,
// or decoding, is reproduced: CONTROL (not cut out of the text, decoded as
// nothing), USER_DEFINED (cut out, decoded as its text), NORMAL, LSTRIP and
// RSTRIP. llama.cpp marks only the first FIM token its hash map yields
// per kind; a vocabulary with several tokens of one kind gets all marked here.
class AttrFixups {
 public:
  AttrFixups(const gguf::GgufFile& f, const std::vector<std::string>& pieces, std::vector<uint32_t>& attrs)
      : f_(f), pieces_(pieces), attrs_(attrs) {}

  void apply() {
    struct Fim {
      Names keys, texts;
    };
    const Fim fims[] = {
        {{"fim_pre", "prefix"},
         {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
          "<\xef\xbd\x9c"
          "fim\xe2\x96\x81"
          "begin\xef\xbd\x9c>",
          "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"}},
        {{"fim_suf", "suffix"},
         {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
          "<\xef\xbd\x9c"
          "fim\xe2\x96\x81"
          "hole\xef\xbd\x9c>",
          "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"}},
        {{"fim_mid", "middle"},
         {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
          "<\xef\xbd\x9c"
          "fim\xe2\x96\x81"
          "end\xef\xbd\x9c>",
          "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"}},
        {{"fim_pad"}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {{"fim_rep"}, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {{"fim_sep"}, {"<|file_sep|>"}},
    };
    for (const Fim& fim : fims)
      if (!any_id_key(fim.keys)) set(fim.texts, kAttrControl);
    // End-of-generation tokens (the end-of-turn and end-of-message lists are
    // part of this one) are control tokens whatever their type says.
    set({"<|eot_id|>",
         "<|im_end|>",
         "<|end|>",
         "<|return|>",
         "<|call|>",
         "<|flush|>",
         "<|calls|>",
         "<end_of_turn>",
         "<|endoftext|>",
         "</s>",
         "<|eom_id|>",
         "<EOT>",
         "_<EOT>",
         "[EOT]",
         "[EOS]",
         "<|end_of_text|>",
         "<end_of_utterance>",
         "<eos>",
         "<turn|>",
         "<|tool_response>",
         "<\xef\xbd\x9c"
         "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
         "[e~["},
        kAttrControl);
    replace({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}, kAttrUserDefined);  // gpt-oss
    const bool call = has("<|call|>") || has("<|calls|>");
    if (has("<|end|>") && call && (has("<|return|>") || has("<|flush|>")))
      replace({"<|end|>"}, kAttrUserDefined);  // o200k_harmony, solar-open
    if (has("<|tool_response>")) replace({"</s>"}, kAttrNormal);  // gemma4, paddleocr
  }

  // llama.cpp's cache_special_tokens: control, user-defined and unknown
  // tokens, longest first by std::sort (not stable: equal lengths end up in
  // the order libstdc++'s introsort leaves them, reproduced by calling it on
  // the same input).
  std::vector<int32_t> special_tokens() const {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < attrs_.size(); ++i)
      if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) ids.push_back(int32_t(i));
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return pieces_[a].size() > pieces_[b].size(); });
    return ids;
  }

  // Strip flags llama.cpp sets by tokenizer, architecture and model name.
  void apply_strip_rules(const std::vector<int32_t>& special) {
    auto text_of = [&](const char* key) {
      const Value* v = f_.find(key);
      return v && v->type == ValueType::STRING ? v->s : std::string();
    };
    std::string name = text_of("general.name");
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? char(c + 32) : c; });
    if (contains_any(text_of("tokenizer.ggml.pre"), {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains_any(text_of("general.architecture"), {"nomic-bert-moe", "jina-bert-v3"})) {
      set_bit({"<mask>"}, kAttrLstrip, true);
    } else if (contains_any(name, {"phi-3", "phi3"})) {
      for (int32_t id : special) attrs_[id] |= kAttrRstrip;
      set_bit({"</s>"}, kAttrRstrip, true);
      set_bit({"<unk>", "<s>", "<|endoftext|>"}, kAttrRstrip, false);
    } else if (contains_any(name, {"modern-bert"})) {
      set_bit({"[MASK]"}, kAttrLstrip, true);
    }
  }

 private:
  bool any_id_key(Names keys) const {
    for (std::string_view k : keys) {
      const std::string key = "tokenizer.ggml." + std::string(k) + "_token_id";
      if (f_.find(key) && f_.get_uint(key) < pieces_.size()) return true;
    }
    return false;
  }
  bool has(std::string_view text) const { return std::find(pieces_.begin(), pieces_.end(), text) != pieces_.end(); }
  template <typename F>
  void each(Names texts, F&& f) {
    for (size_t i = 0; i < pieces_.size(); ++i)
      for (std::string_view t : texts)
        if (pieces_[i] == t) f(attrs_[i]);
  }
  void set(Names texts, uint32_t bit) {
    each(texts, [&](uint32_t& a) { a |= bit; });
  }
  void replace(Names texts, uint32_t attr) {
    each(texts, [&](uint32_t& a) { a = attr; });
  }
  void set_bit(Names texts, uint32_t bit, bool on) {
    each(texts, [&](uint32_t& a) { a = on ? a | bit : a & ~bit; });
  }

  const gguf::GgufFile& f_;
  const std::vector<std::string>& pieces_;
  std::vector<uint32_t>& attrs_;
};

// llama_decode_text: a normal token's text in GPT-2's byte alphabet back to
// bytes; a character outside the alphabet comes out as llama.cpp writes it.
std::string bytes_of_token_text(const std::string& text) {
  std::string out;
  for (uint32_t cpt : unicode::decode_utf8_lenient(text)) {
    if (int b = unicode::unicode_to_byte(cpt); b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text + "]";
  }
  return out;
}

// detokenize's clean_spaces (clean_up_tokenization_spaces), its three passes.
std::string clean_spaces(const std::string& in) {
  // 1: " ?", " !", " .", " ," lose the space.
  std::string a;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i > 0 && in[i - 1] == ' ' && std::string_view("?!.,").find(in[i]) != std::string_view::npos) a.pop_back();
    a.push_back(in[i]);
  }
  // 2: " ' " becomes "'" (the apostrophe loses both spaces).
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      b.push_back(x);
      a[++i] = '\0';  // the space after it is skipped, and is no space for the next test
      continue;
    }
    b.push_back(x);
  }
  // 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it).
  std::string c;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i > 0 && b[i - 1] == ' ' && b[i] == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (i + 2 < b.size() && ((x1 == 'r' || x1 == 'v') && x2 == 'e'))) c.pop_back();
    }
    c.push_back(b[i]);
  }
  return c;
}

// tokenizer.ggml.token_type (every token normal when absent), checked.
std::vector<int32_t> token_types(const gguf::GgufFile& f, size_t n) {
  std::vector<int32_t> types(n, kNormal);
  if (!f.find("tokenizer.ggml.token_type")) return types;
  const Value& ty = array_of(f, "tokenizer.ggml.token_type", ValueType::I32);
  if (ty.items.size() != n)
    fail("{}: metadata 'tokenizer.ggml.token_type' has {} entries for {} tokens", f.path(), ty.items.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t type = ty.items[i].i;
    if (type < kUndefined || type > kByte)
      fail("{}: metadata 'tokenizer.ggml.token_type' has type {} at id {}", f.path(), type, i);
    types[i] = int32_t(type);
  }
  return types;
}

// Scores mean nothing to BPE, but llama.cpp refuses the file if they are
// not numbers for every token.
void check_scores(const gguf::GgufFile& f, size_t n) {
  const Value* s = f.find("tokenizer.ggml.scores");
  if (!s) return;
  if (s->type != ValueType::ARRAY || (s->elem_type != ValueType::F32 && s->elem_type != ValueType::I32))
    fail("{}: metadata 'tokenizer.ggml.scores' must be an array of f32", f.path());
  if (s->items.size() != n)
    fail("{}: metadata 'tokenizer.ggml.scores' has {} entries for {} tokens", f.path(), s->items.size(), n);
}

// Pre-tokenizer; an absent key is "default", as in llama.cpp.
const PreTokenizer* pre_tokenizer_of(const gguf::GgufFile& f) {
  const std::string pre = f.find("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "";
  const PreTokenizer* p = find_pre_tokenizer(pre);
  if (!p)
    fail("{}: metadata 'tokenizer.ggml.pre' is '{}': not a pre-tokenizer ggtrain implements "
         "(known: {}){}",
         f.path(), pre, pre_tokenizer_names(), pre == "gpt2" ? "; llama.cpp spells GPT-2's 'gpt-2'" : "");
  return p;
}

// Merges "LEFT RIGHT" (split at the first space after the first byte, as
// llama.cpp does); rank = position, the first of duplicates counts. `find`
// gives a token's id or -1.
template <typename Find>
std::unordered_map<uint64_t, int32_t> merge_ranks(const gguf::GgufFile& f, Find find) {
  const Value& merges = array_of(f, "tokenizer.ggml.merges", ValueType::STRING);
  std::unordered_map<uint64_t, int32_t> ranks;
  ranks.reserve(merges.items.size());
  for (size_t i = 0; i < merges.items.size(); ++i) {
    const std::string& m = merges.items[i].s;
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos)
      fail("{}: metadata 'tokenizer.ggml.merges' entry {} '{}' is not 'LEFT RIGHT'", f.path(), i, m);
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const int32_t l = find(left), r = find(right);
    for (auto [id, text] : {std::pair{l, left}, std::pair{r, right}, std::pair{find(left + right), left + right}})
      if (id < 0)
        fail("{}: metadata 'tokenizer.ggml.merges' entry {} '{}' names '{}', which is not in "
             "tokenizer.ggml.tokens",
             f.path(), i, m, text);
    ranks.try_emplace(pair_key(l, r), int32_t(std::min<size_t>(i, INT32_MAX)));
  }
  return ranks;
}

}  // namespace

LoadedAttrs loaded_attrs(const gguf::GgufFile& f, const std::vector<std::string>& pieces,
                         const std::vector<int32_t>& types) {
  LoadedAttrs out;
  out.attrs.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) out.attrs[i] = attr_of_type(types[i]);
  AttrFixups fix(f, pieces, out.attrs);
  fix.apply();
  out.special = fix.special_tokens();
  fix.apply_strip_rules(out.special);
  for (int32_t id : out.special)
    if (!(out.attrs[id] & (kAttrControl | kAttrUnknown))) out.cut_first.push_back(id);
  return out;
}

Tokenizer Tokenizer::from_gguf_bpe(const gguf::GgufFile& f) {
  const std::string& path = f.path();
  auto v = std::make_shared<BpeVocab>();
  Tokenizer t;
  t.bpe_ = v;

  const Value& tokens = array_of(f, "tokenizer.ggml.tokens", ValueType::STRING);
  const size_t n = tokens.items.size();
  if (n == 0 || n > INT32_MAX) fail("{}: metadata 'tokenizer.ggml.tokens' has {} entries", path, n);
  for (const auto& it : tokens.items) t.pieces_.push_back(it.s);
  t.types_ = token_types(f, n);
  check_scores(f, n);
  v->pre = pre_tokenizer_of(f);

  v->bos = special_id(f, "tokenizer.ggml.bos_token_id", kBpeDefaultSpecialId, n);
  v->eos = special_id(f, "tokenizer.ggml.eos_token_id", kBpeDefaultSpecialId, n);
  if (v->bos < 0 && v->eos < 0)
    fail("{}: no BOS or EOS token: metadata 'tokenizer.ggml.bos_token_id' and "
         "'tokenizer.ggml.eos_token_id' are absent and the vocabulary has only {} tokens",
         path, n);
  t.bos_ = v->bos >= 0 ? v->bos : v->eos;
  t.eos_ = v->eos;
  t.unk_ = special_id(f, "tokenizer.ggml.unknown_token_id", -1, n);
  v->add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v->pre->add_bos);
  v->add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  v->add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", false);
  t.add_bos_ = v->add_bos;
  t.add_space_prefix_ = v->add_space_prefix;
  t.finish(path);
  v->ranks = merge_ranks(f, [&](std::string_view text) { return t.find(text); });

  LoadedAttrs loaded = loaded_attrs(f, t.pieces_, t.types_);
  v->attrs = std::move(loaded.attrs);
  v->cut_first = std::move(loaded.cut_first);
  v->special = std::move(loaded.special);

  for (const auto& [key, value] : f.metadata())
    if (key.starts_with("tokenizer.")) v->keys.emplace_back(key, value);
  t.read_chat_keys(f);
  return t;
}

// tokenize(text, add_special = add_bos, parse_special = false) for a BPE
// vocabulary: tokenizer_st_partition cuts the user-defined tokens out (with
// their strip flags), then each piece of text is pre-tokenized and merged.
std::vector<int32_t> Tokenizer::encode_bpe(std::string_view text, const EncodeOptions& o) const {
  const std::vector<Fragment> frags =
      cut_special_tokens(text, o.parse_special ? bpe_->special : bpe_->cut_first, pieces_, [&](int32_t id) {
        const uint32_t attr = bpe_->attrs[size_t(id)];
        return Strip{(attr & kAttrLstrip) != 0, (attr & kAttrRstrip) != 0};
      });
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (o.add_bos) out.push_back(bos_);
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (const std::string& word : pre_tokenize(text.substr(f.off, f.len), bpe_->pre->split))
      encode_bpe_word(word, out);
  }
  return out;
}

// llm_tokenizer_bpe_session::tokenize for one word: start from its UTF-8
// characters and keep merging the adjacent pair of lowest merge rank. A
// final symbol that is not a token goes out byte by byte, as one-byte tokens
// where those exist; llama.cpp drops the other bytes, and so do we.
void Tokenizer::encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const {
  if (bpe_->pre->ignore_merges)
    if (int32_t id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  // Ranked by the merge rule's rank, the lowest first.
  auto rank = [&](std::string_view left, std::string_view right) -> std::optional<int64_t> {
    const int32_t l = find(left), r = find(right);
    if (l < 0 || r < 0) return std::nullopt;
    auto it = bpe_->ranks.find(pair_key(l, r));
    if (it == bpe_->ranks.end()) return std::nullopt;
    return -int64_t(it->second);
  };
  merge_bigrams(word, rank, [&](std::string_view s) {
    if (int32_t id = find(s); id >= 0) {
      out.push_back(id);
      return;
    }
    for (char c : s)
      if (int32_t id = find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
  });
}

// token_to_piece(special = false) of a BPE vocabulary.
std::string Tokenizer::token_to_piece_bpe(int32_t id) const {
  const uint32_t attr = bpe_->attrs[id];
  if (attr & (kAttrUnknown | kAttrControl)) return "";
  if (attr & kAttrUserDefined) return pieces_[id];
  if (attr & kAttrNormal) return bytes_of_token_text(pieces_[id]);
  if (attr & kAttrByte) return std::string(1, static_cast<char>(std::stoi(pieces_[id].substr(3, 2), nullptr, 16)));
  return "";  // unused, undefined
}

// llama_detokenize(remove_special = true, unparse_special = false).
std::string Tokenizer::decode_bpe(const std::vector<int32_t>& ids) const {
  bool remove_space = bpe_->add_space_prefix;
  size_t begin = 0, end = ids.size();
  if (bpe_->add_bos && end > 0 && ids[0] == bpe_->bos) {
    remove_space = false;
    begin = 1;
  }
  if (bpe_->add_eos && end > begin && ids[end - 1] == bpe_->eos) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    const std::string p = token_to_piece(ids[i]);
    out.append(p, remove_space && !p.empty() && p[0] == ' ' ? 1 : 0);
    remove_space = false;
  }
  return bpe_->pre->clean_spaces ? clean_spaces(out) : out;
}

void Tokenizer::add_to_gguf_bpe(gguf::GgufWriter& w) const {
  for (const auto& [key, value] : bpe_->keys) w.set(key, value);
  add_chat_keys(w);
}

}  // namespace ggtrain::tokenizer
