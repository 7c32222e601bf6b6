#include "data/hf_tokenizer.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <array>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace ggtrain::data {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// The Split regexes of the byte-level BPE tokenizers whose llama.cpp
// pre-tokenizer ggtrain implements (data/pre_tokenizer.h), as tokenizer.json
// spells them; convert_hf_to_gguf.py tells them apart by a hash of their
// output, which names the same pre-tokenizers.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kPreByRegex = {{
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama-bpe"},
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2"},
    {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "gpt-2"},
}};

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

struct Json {
  simdjson::dom::parser parser;
  element root;
  std::string path;
  explicit Json(const std::string& p) : path(p) {
    if (auto err = parser.load(p).get(root))
      fail("{}: cannot read it as JSON ({})", p, simdjson::error_message(err));
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

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

// A merge as GGUF stores it, "a b", from "a b" or ["a", "b"] (a space inside
// a part spelled as GPT-2's byte alphabet spells it, U+0120, as gguf-py does).
std::string merge_of(const Json& j, element m, size_t i) {
  const std::string member = fmt::format("model.merges[{}]", i);
  if (m.is_string()) return string_of(j, m, member);
  array pair;
  if (m.get_array().get(pair) || pair.size() != 2) j.bad(member, "is neither \"a b\" nor [\"a\", \"b\"]");
  std::string out;
  for (element part : pair) {
    if (!out.empty()) out += ' ';
    for (char c : string_of(j, part, member)) out += c == ' ' ? std::string("\xc4\xa0") : std::string(1, c);
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
  std::string bos, eos, pad, chat_template;  // token texts; "" when absent or null
  std::optional<bool> add_bos;
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
      std::string* token = key == "bos_token" ? &c.bos : key == "eos_token" ? &c.eos : key == "pad_token" ? &c.pad
                                                                                                         : nullptr;
      if (token) {  // a string, {"content": ...} or null
        if (value.is_null()) continue;
        if (value.type() == simdjson::ondemand::json_type::string) *token = std::string(std::string_view(value));
        else if (value.type() == simdjson::ondemand::json_type::object)
          *token = std::string(std::string_view(value["content"]));
        else bad(key, "is neither a string nor {\"content\": ...}");
      } else if (key == "add_bos_token") {
        if (value.type() != simdjson::ondemand::json_type::boolean) bad(key, "is not true or false");
        c.add_bos = bool(value);
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

HfVocabulary read_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json) {
  const Json j(tokenizer_json);
  HfVocabulary v;
  std::string_view type;
  if (j.root["model"]["type"].get_string().get(type) || type != "BPE")
    j.bad("model.type", "is not \"BPE\": only byte-level BPE tokenizers (tokenizer.ggml.model gpt2) can be read");
  v.pre = pre_of(j);

  std::map<int64_t, std::string> by_id;
  object vocab;
  if (j.root["model"]["vocab"].get_object().get(vocab)) j.bad("model.vocab", "is not an object");
  for (auto field : vocab) {
    int64_t id;
    if (field.value.get_int64().get(id) || id < 0 || id > (1 << 24))
      j.bad("model.vocab", fmt::format("gives '{}' an id that is not an integer in 0..16777216", field.key));
    if (!by_id.emplace(id, std::string(field.key)).second)
      j.bad("model.vocab", fmt::format("gives the id {} twice", id));
  }
  std::map<int64_t, AddedToken> added;
  array added_tokens;
  if (!j.root["added_tokens"].get_array().get(added_tokens))
    for (element a : added_tokens) {
      int64_t id;
      std::string_view content;
      if (a["id"].get_int64().get(id) || id < 0 || id > (1 << 24) || a["content"].get_string().get(content))
        j.bad("added_tokens", "has an entry without a valid id and content");
      bool special = false;
      if (a["special"].get_bool().get(special)) special = false;
      added[id] = {std::string(content), special};
      by_id[id] = std::string(content);
    }
  if (by_id.empty()) j.bad("model.vocab", "is empty");

  const int64_t n = by_id.rbegin()->first + 1;
  v.tokens.resize(size_t(n));
  v.types.assign(size_t(n), kUnused);
  for (int64_t id = 0; id < n; ++id) v.tokens[size_t(id)] = fmt::format("[PAD{}]", id);
  for (const auto& [id, text] : by_id) {
    v.tokens[size_t(id)] = text;
    const auto a = added.find(id);
    v.types[size_t(id)] = a == added.end()                                ? kNormal
                          : a->second.special || looks_special(text)      ? kControl
                                                                          : kUserDefined;
  }
  array merges;
  if (j.root["model"]["merges"].get_array().get(merges)) j.bad("model.merges", "is not an array");
  size_t i = 0;
  for (element m : merges) v.merges.push_back(merge_of(j, m, i++));

  if (config_json.empty()) return v;
  const TokenizerConfig c = read_tokenizer_config(config_json);
  auto id_of = [&](const char* name, const std::string& t) -> int32_t {
    if (t.empty()) return -1;
    for (const auto& [id, a] : added)
      if (a.content == t) return int32_t(id);
    fail("{}: '{}' is '{}', which is not one of {}'s added_tokens", config_json, name, t, tokenizer_json);
  };
  v.bos = id_of("bos_token", c.bos);
  v.eos = id_of("eos_token", c.eos);
  v.pad = id_of("pad_token", c.pad);
  v.add_bos = c.add_bos ? *c.add_bos : v.bos >= 0 && post_processor_adds(j, c.bos);
  v.chat_template = c.chat_template;
  return v;
}

void add_hf_vocabulary(gguf::GgufWriter& w, const HfVocabulary& v) {
  using gguf::Value;
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(v.pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
  w.set("tokenizer.ggml.merges", Value::string_array(v.merges));
  if (v.bos >= 0) w.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(v.bos)));
  if (v.eos >= 0) w.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(v.eos)));
  if (v.pad >= 0) w.set("tokenizer.ggml.padding_token_id", Value::u32(uint32_t(v.pad)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(v.add_bos));
  if (!v.chat_template.empty()) w.set("tokenizer.chat_template", Value::str(v.chat_template));
}

}  // namespace ggtrain::data
