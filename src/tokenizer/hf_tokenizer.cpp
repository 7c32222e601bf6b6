#include "tokenizer/hf_tokenizer.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <array>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ggtrain::tokenizer {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// The Split regexes of the byte-level BPE tokenizers whose llama.cpp
// pre-tokenizer ggtrain implements (tokenizer/pre_tokenizer.h), as tokenizer.json
// spells them; convert_hf_to_gguf.py tells them apart by a hash of their
// output, which names the same pre-tokenizers.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kPreByRegex = {{
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama-bpe"},
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2"},
    {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "gpt-2"},
}};

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
constexpr std::string_view kMeta = kSentencePieceSpace;

struct Json {
  simdjson::dom::parser parser;
  element root;
  std::string path;
  explicit Json(const std::string& p) : path(p) {
    if (auto err = parser.load(p).get(root)) fail("{}: cannot read it as JSON ({})", p, simdjson::error_message(err));
  }
  [[noreturn]] void bad(const std::string& member, const std::string& what) const {
    fail("{}: '{}' {}", path, member, what);
  }
};

std::string string_of(const Json& j, element e, const std::string& member) {
  std::string_view s;
  if (e.get_string().get(s)) j.bad(member, "is not a string");
  return std::string(s);
}

// tokenizer.ggml.pre from the pre_tokenizer's Split regex (ByteLevel alone:
// GPT-2's own regex).
std::string pre_of(const Json& j) {
  element pre;
  if (j.root["pre_tokenizer"].get(pre) || pre.is_null()) j.bad("pre_tokenizer", "is missing");
  std::string regex;
  std::string_view type;
  if (pre["type"].get_string().get(type)) j.bad("pre_tokenizer.type", "is missing");
  if (type == "ByteLevel") {
    bool use_regex = true;
    if (pre["use_regex"].get_bool().get(use_regex)) use_regex = true;
    if (use_regex) regex = std::string(kPreByRegex[2].first);
  } else if (type == "Sequence") {
    array parts;
    if (pre["pretokenizers"].get_array().get(parts)) j.bad("pre_tokenizer.pretokenizers", "is not an array");
    for (element p : parts) {
      std::string_view pt, rx;
      if (!p["type"].get_string().get(pt) && pt == "Split" && !p["pattern"]["Regex"].get_string().get(rx))
        regex = std::string(rx);
    }
  }
  for (const auto& [rx, name] : kPreByRegex)
    if (regex == rx) return std::string(name);
  j.bad("pre_tokenizer", fmt::format("splits with '{}', which is none of the byte-level BPE pre-tokenizers ggtrain "
                                     "implements (Llama 3's, Qwen2/3's, GPT-2's)",
                                     regex.empty() ? std::string(type) : regex));
}

std::string_view type_of(element e) {
  std::string_view t;
  return e["type"].get_string().get(t) ? std::string_view() : t;
}

// Replace(" " -> "▁") and Prepend("▁"): the normalizer steps of a
// SentencePiece tokenizer.json.
bool is_space_to_meta(element e) {
  std::string_view from, to;
  return type_of(e) == "Replace" && !e["pattern"]["String"].get_string().get(from) && from == " " &&
         !e["content"].get_string().get(to) && to == kMeta;
}
bool is_meta_prepend(element e) {
  std::string_view p;
  return type_of(e) == "Prepend" && !e["prepend"].get_string().get(p) && p == kMeta;
}

// Whether a SentencePiece-style tokenizer.json puts "▁" before the text
// (llama.cpp's add_space_prefix): spaces become "▁" in the normalizer
// (Gemma: Replace; Llama 2: Prepend then Replace) or in a Metaspace
// pre-tokenizer (prepend_scheme "always"/"first", or add_prefix_space).
// Anything else is refused: llama.cpp's SentencePiece tokenizer does
// exactly this and no more.
bool spm_space_prefix(const Json& j) {
  element norm, pre;
  const bool has_norm = !j.root["normalizer"].get(norm) && !norm.is_null();
  const bool has_pre = !j.root["pre_tokenizer"].get(pre) && !pre.is_null();
  if (has_norm) {
    std::vector<element> steps{norm};
    if (array list; type_of(norm) == "Sequence" && !norm["normalizers"].get_array().get(list))
      steps.assign(list.begin(), list.end());
    const bool prepend = steps.size() == 2 && is_meta_prepend(steps[0]) && is_space_to_meta(steps[1]);
    if (!prepend && !(steps.size() == 1 && is_space_to_meta(steps[0])))
      j.bad("normalizer",
            "is not SentencePiece's (Replace \" \" with \"\u2581\", optionally after Prepend \"\u2581\")");
    std::string_view split;
    // Gemma's Split on " " after the normalizer has no space left to split on
    const bool noop_pre =
        !has_pre || (type_of(pre) == "Split" && !pre["pattern"]["String"].get_string().get(split) && split == " ");
    if (!noop_pre) j.bad("pre_tokenizer", "splits the text; a SentencePiece tokenizer does not");
    return prepend;
  }
  std::string_view replacement, scheme;
  if (!has_pre || type_of(pre) != "Metaspace" || pre["replacement"].get_string().get(replacement) ||
      replacement != kMeta)
    j.bad("pre_tokenizer", "is not a Metaspace with \"\u2581\" (and no SentencePiece normalizer either)");
  if (!pre["prepend_scheme"].get_string().get(scheme)) return scheme != "never";
  bool add = true;
  if (pre["add_prefix_space"].get_bool().get(add)) add = true;
  return add;
}

// SentencePiece's byte pieces, "<0x00>" .. "<0xFF>".
bool is_byte_piece(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4]);
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

// The parts of merge i: ["a", "b"] or "a b" (SentencePiece pieces hold no
// space: theirs is "▁").
std::pair<std::string, std::string> merge_parts(const Json& j, element m, size_t i) {
  const std::string member = fmt::format("model.merges[{}]", i);
  if (m.is_string()) {
    const std::string ab = string_of(j, m, member);
    const size_t sp = ab.find(' ');
    if (sp == std::string::npos) j.bad(member, "is not \"a b\"");
    return {ab.substr(0, sp), ab.substr(sp + 1)};
  }
  array pair;
  if (m.get_array().get(pair) || pair.size() != 2) j.bad(member, "is neither \"a b\" nor [\"a\", \"b\"]");
  return {string_of(j, pair.at(0), member), string_of(j, pair.at(1), member)};
}

// A merge as GGUF stores it, "a b", from "a b" or ["a", "b"] (a space inside
// a part spelled as GPT-2's byte alphabet spells it, U+0120, as gguf-py does).
std::string merge_of(const Json& j, element m, size_t i) {
  if (m.is_string()) return string_of(j, m, fmt::format("model.merges[{}]", i));
  const auto [a, b] = merge_parts(j, m, i);
  std::string out;
  for (const std::string* part : {&a, &b}) {
    if (!out.empty()) out += ' ';
    for (char c : *part) out += c == ' ' ? std::string("\xc4\xa0") : std::string(1, c);
  }
  return out;
}

struct AddedToken {
  std::string content;
  bool special = false;
};

// Whether tokenizer.json's post-processor puts `bos` first (a
// TemplateProcessing whose single sequence starts with it, alone or in a
// Sequence), as gguf-py's SpecialVocab reads it.
bool post_processor_adds(const Json& j, const std::string& bos) {
  element pp;
  if (j.root["post_processor"].get(pp) || pp.is_null()) return false;
  std::vector<element> processors{pp};
  if (array list; !pp["processors"].get_array().get(list)) processors.assign(list.begin(), list.end());
  for (element p : processors) {
    std::string_view type, first;
    if (p["type"].get_string().get(type) || type != "TemplateProcessing") continue;
    array single;
    if (p["single"].get_array().get(single) || single.size() < 2) continue;
    if (!single.at(0)["SpecialToken"]["id"].get_string().get(first)) return first == bos;
  }
  return false;
}

// What tokenizer_config.json says (read on demand: its other members may
// hold numbers no double holds, e.g. Llama 3's model_max_length 1e30, which a
// whole-document parse refuses).
struct TokenizerConfig {
  std::string bos, eos, pad, unk, chat_template;  // token texts; "" when absent or null
  std::optional<bool> add_bos, add_eos;
};

TokenizerConfig read_tokenizer_config(const std::string& path) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string text;
  if (auto err = simdjson::padded_string::load(path).get(text))
    fail("{}: cannot read it ({})", path, simdjson::error_message(err));
  TokenizerConfig c;
  auto bad = [&](std::string_view member, const char* what) { fail("{}: '{}' {}", path, member, what); };
  try {
    simdjson::ondemand::document doc = parser.iterate(text);
    for (auto field : doc.get_object()) {
      const std::string_view key = field.unescaped_key();
      simdjson::ondemand::value value = field.value();
      std::string* token = key == "bos_token"   ? &c.bos
                           : key == "eos_token" ? &c.eos
                           : key == "pad_token" ? &c.pad
                           : key == "unk_token" ? &c.unk
                                                : nullptr;
      if (token) {  // a string, {"content": ...} or null
        if (value.is_null()) continue;
        if (value.type() == simdjson::ondemand::json_type::string) *token = std::string(std::string_view(value));
        else if (value.type() == simdjson::ondemand::json_type::object)
          *token = std::string(std::string_view(value["content"]));
        else bad(key, "is neither a string nor {\"content\": ...}");
      } else if (key == "add_bos_token" || key == "add_eos_token") {
        if (value.is_null()) continue;
        if (value.type() != simdjson::ondemand::json_type::boolean) bad(key, "is not true or false");
        (key == "add_bos_token" ? c.add_bos : c.add_eos) = bool(value);
      } else if (key == "chat_template" && value.type() == simdjson::ondemand::json_type::string) {
        c.chat_template = std::string(std::string_view(value));
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
  return c;
}

}  // namespace

namespace {

// model.vocab and added_tokens: the text of every id, and which are added.
struct Pieces {
  std::map<int64_t, std::string> by_id;
  std::map<int64_t, AddedToken> added;
};

Pieces read_pieces(const Json& j) {
  Pieces p;
  object vocab;
  if (j.root["model"]["vocab"].get_object().get(vocab)) j.bad("model.vocab", "is not an object");
  for (auto field : vocab) {
    int64_t id;
    if (field.value.get_int64().get(id) || id < 0 || id > (1 << 24))
      j.bad("model.vocab", fmt::format("gives '{}' an id that is not an integer in 0..16777216", field.key));
    if (!p.by_id.emplace(id, std::string(field.key)).second)
      j.bad("model.vocab", fmt::format("gives the id {} twice", id));
  }
  array added_tokens;
  if (!j.root["added_tokens"].get_array().get(added_tokens))
    for (element a : added_tokens) {
      int64_t id;
      std::string_view content;
      if (a["id"].get_int64().get(id) || id < 0 || id > (1 << 24) || a["content"].get_string().get(content))
        j.bad("added_tokens", "has an entry without a valid id and content");
      bool special = false;
      if (a["special"].get_bool().get(special)) special = false;
      p.added[id] = {std::string(content), special};
      p.by_id[id] = std::string(content);
    }
  if (p.by_id.empty()) j.bad("model.vocab", "is empty");
  return p;
}

array merges_of(const Json& j) {
  array merges;
  if (j.root["model"]["merges"].get_array().get(merges)) j.bad("model.merges", "is not an array");
  return merges;
}

// Byte-level BPE: tokens, types and merges as the converter's _set_vocab_gpt2.
void gpt2_vocabulary(const Json& j, const Pieces& p, HfVocabulary& v) {
  v.model = "gpt2";
  v.pre = pre_of(j);
  const int64_t n = p.by_id.rbegin()->first + 1;
  v.tokens.resize(size_t(n));
  v.types.assign(size_t(n), kUnused);
  for (int64_t id = 0; id < n; ++id) v.tokens[size_t(id)] = fmt::format("[PAD{}]", id);
  for (const auto& [id, text] : p.by_id) {
    v.tokens[size_t(id)] = text;
    const auto a = p.added.find(id);
    v.types[size_t(id)] = a == p.added.end()                         ? kNormal
                          : a->second.special || looks_special(text) ? kControl
                                                                     : kUserDefined;
  }
  size_t i = 0;
  for (element m : merges_of(j)) v.merges.push_back(merge_of(j, m, i++));
}

// SentencePiece BPE with byte fallback, as the converter's
// _create_vocab_sentencepiece reads tokenizer.model and then
// added_tokens_decoder: byte pieces BYTE, the unknown piece UNKNOWN, added
// tokens CONTROL (special) or USER_DEFINED (their "▁" back to spaces) at
// score -1000, missing ids "[PAD<id>]" UNUSED at -10000.
void spm_vocabulary(const Json& j, const Pieces& p, HfVocabulary& v) {
  v.model = "llama";
  v.pre = "default";
  if (!spm_space_prefix(j)) v.add_space_prefix = false;
  std::string_view unk;
  if (j.root["model"]["unk_token"].get_string().get(unk)) unk = {};
  const int64_t n = p.by_id.rbegin()->first + 1;
  v.tokens.resize(size_t(n));
  v.types.assign(size_t(n), kUnused);
  v.scores.assign(size_t(n), -10000.0f);
  std::unordered_map<std::string_view, int64_t> id_of;
  for (int64_t id = 0; id < n; ++id) v.tokens[size_t(id)] = fmt::format("[PAD{}]", id);
  for (const auto& [id, text] : p.by_id) {
    v.tokens[size_t(id)] = text;
    v.types[size_t(id)] = is_byte_piece(text) ? kByte : text == unk ? kUnknown : kNormal;
    v.scores[size_t(id)] = 0;
    id_of.emplace(text, id);
  }
  std::vector<bool> scored(size_t(n), false);
  size_t rank = 0;
  for (element m : merges_of(j)) {
    const auto [a, b] = merge_parts(j, m, rank);
    const auto it = id_of.find(a + b);
    if (it == id_of.end()) j.bad(fmt::format("model.merges[{}]", rank), "makes a piece the vocabulary lacks");
    if (!scored[size_t(it->second)]) {
      scored[size_t(it->second)] = true;
      v.scores[size_t(it->second)] = -float(rank);
    }
    ++rank;
  }
  for (const auto& [id, a] : p.added) {
    std::string& t = v.tokens[size_t(id)];
    const bool control = a.special || looks_special(t);
    v.types[size_t(id)] = control ? kControl : kUserDefined;
    v.scores[size_t(id)] = -1000.0f;
    if (!control) t = replace_all(t, kMeta, " ");
  }
}

}  // namespace

HfVocabulary read_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json) {
  const Json j(tokenizer_json);
  HfVocabulary v;
  std::string_view type;
  if (j.root["model"]["type"].get_string().get(type) || type != "BPE")
    j.bad("model.type", "is not \"BPE\": ggtrain reads byte-level BPE (gpt2) and SentencePiece BPE (llama) "
                        "tokenizers");
  bool byte_fallback = false;
  if (j.root["model"]["byte_fallback"].get_bool().get(byte_fallback)) byte_fallback = false;
  const Pieces p = read_pieces(j);
  if (byte_fallback) spm_vocabulary(j, p, v);
  else gpt2_vocabulary(j, p, v);

  if (config_json.empty()) return v;
  const TokenizerConfig c = read_tokenizer_config(config_json);
  auto id_of = [&](const char* name, const std::string& t) -> int32_t {
    if (t.empty()) return -1;
    for (const auto& [id, a] : p.added)
      if (a.content == t) return int32_t(id);
    fail("{}: '{}' is '{}', which is not one of {}'s added_tokens", config_json, name, t, tokenizer_json);
  };
  v.bos = id_of("bos_token", c.bos);
  v.eos = id_of("eos_token", c.eos);
  v.pad = id_of("pad_token", c.pad);
  v.unk = id_of("unk_token", c.unk);
  v.add_bos = c.add_bos ? *c.add_bos : v.bos >= 0 && post_processor_adds(j, c.bos);
  v.add_eos = c.add_eos;
  v.chat_template = c.chat_template;
  return v;
}

void add_hf_vocabulary(gguf::GgufWriter& w, const HfVocabulary& v) {
  using gguf::Value;
  w.set("tokenizer.ggml.model", Value::str(v.model));
  w.set("tokenizer.ggml.pre", Value::str(v.pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  if (!v.scores.empty()) w.set("tokenizer.ggml.scores", Value::f32_array(v.scores));
  w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
  if (!v.merges.empty()) w.set("tokenizer.ggml.merges", Value::string_array(v.merges));
  if (v.add_space_prefix) w.set("tokenizer.ggml.add_space_prefix", Value::boolean(*v.add_space_prefix));
  if (v.bos >= 0) w.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(v.bos)));
  if (v.eos >= 0) w.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(v.eos)));
  if (v.unk >= 0) w.set("tokenizer.ggml.unknown_token_id", Value::u32(uint32_t(v.unk)));
  if (v.pad >= 0) w.set("tokenizer.ggml.padding_token_id", Value::u32(uint32_t(v.pad)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(v.add_bos));
  if (v.add_eos) w.set("tokenizer.ggml.add_eos_token", Value::boolean(*v.add_eos));
  if (!v.chat_template.empty()) w.set("tokenizer.chat_template", Value::str(v.chat_template));
}

}  // namespace ggtrain::tokenizer
