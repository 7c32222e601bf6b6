#include "support/bpe_vocab.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ggtrain::test_support {

namespace {

using gguf::Value;

struct Special {
  std::string text;
  int32_t type;  // llama_token_type: 2 unknown, 3 control, 4 user-defined
};

struct KindSpec {
  std::string name;  // general.name
  std::vector<uint8_t> missing;  // bytes without a token
  std::vector<Special> specials;  // appended after the merges
  std::string bos, eos;
  bool add_bos = false;
  std::vector<std::string> whole_words;  // normal tokens no merge builds
  std::vector<std::string> extra_lines;  // learned from besides the corpus
};

KindSpec kind_spec(const std::string& kind) {
  KindSpec k;
  if (kind == "default") {
    k.name = "tiny-modern-bert-bpe";
    k.missing = {0xF0};
    k.specials = {{"<|endoftext|>", 3}, {"<|user|>", 4}, {"[MASK]", 4}};
    k.bos = k.eos = "<|endoftext|>";
  } else if (kind == "gpt-2") {
    k.name = "tiny-phi3-bpe";
    k.specials = {{"<unk>", 2}, {"<s>", 3}, {"</s>", 3}, {"<|endoftext|>", 3}, {"[[USER]]", 4}, {"<|user|>", 4}};
    k.bos = "<s>", k.eos = "</s>";
  } else if (kind == "llama-bpe") {
    k.name = "tiny-llama3-bpe";
    k.specials = {{"<|begin_of_text|>", 3}, {"<|end_of_text|>", 3}, {"<|eot_id|>", 3}};
    // User-defined tokens amid reserved control tokens: libstdc++'s
    // std::sort then puts the equal-length ones in reverse id order (an
    // insertion or stable sort would not), and "ab@@c" shows which is cut.
    auto reserved = [&](int from, int to) {
      for (int i = from; i < to; ++i) k.specials.push_back({"<|reserved_special_token_" + std::to_string(i) + "|>", 3});
    };
    reserved(0, 20);
    for (const char* u : {"[[USER]]", "ab@@", "b@@c", "@@cd", "x@@y", "<|im_end|>"}) k.specials.push_back({u, 4});
    reserved(20, 40);
    k.bos = "<|begin_of_text|>", k.eos = "<|end_of_text|>";
    k.add_bos = true;
    k.whole_words = {"\xc4\xa0xylophone", "\xc4\xa0quizzical", "Tokenization", "\xc4\xa0Tokenization"};
  } else if (kind == "smollm") {
    k.name = "tiny-smollm-bpe";
    k.specials = {{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {" @@ ", 4}, {"<|channel|>", 3}};
    k.bos = "<|im_start|>", k.eos = "<|im_end|>";
  } else if (kind == "lfm2") {  // LFM2's files: llama3's split and ignore_merges under their own name
    k.name = "tiny-lfm2-bpe";
    k.specials = {{"<|pad|>", 3},    {"<|startoftext|>", 3},     {"<|endoftext|>", 3},    {"<|im_start|>", 3},
                  {"<|im_end|>", 3}, {"<|tool_call_start|>", 3}, {"<|tool_call_end|>", 3}};
    k.bos = "<|startoftext|>", k.eos = "<|im_end|>";
    k.add_bos = true;
    k.whole_words = {"\xc4\xa0xylophone", "Tokenization"};
  } else if (kind == "qwen2") {  // Qwen2.5 and Qwen3 files: no BOS added, digits split one by one
    k.name = "tiny-qwen3-bpe";
    k.specials = {{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<think>", 4}, {"</think>", 4}};
    k.bos = "<|endoftext|>", k.eos = "<|im_end|>";
  } else if (kind == "qwen35") {  // Qwen3.5 files: qwen2's, with combining marks in letter runs
    k.name = "tiny-qwen35-bpe";
    k.specials = {{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3},
                  {"<think>", 4},       {"</think>", 4},     {"<tool_call>", 4}};
    k.bos = "<|endoftext|>", k.eos = "<|im_end|>";
    // Letters followed by combining marks, often enough that merges join
    // them: a split that cut the mark off (qwen2's) would give other ids.
    for (int i = 0; i < 40; ++i)
      k.extra_lines.push_back("e\u0301te\u0301 cafe\u0301 nai\u0308ve Ame\u0301lie nin\u0303o");
  } else if (kind == "olmo") {  // OLMo and OLMoE files: GPT-NeoX's specials, GPT-2's split
    k.name = "tiny-olmoe-bpe";
    k.specials = {{"|||IP_ADDRESS|||", 4}, {"<|padding|>", 3}, {"<|endoftext|>", 3}, {"|||EMAIL_ADDRESS|||", 4}};
    k.bos = k.eos = "<|endoftext|>";
  } else {
    fail("unknown test vocabulary kind '{}' (default, gpt-2, llama-bpe, smollm, qwen2, lfm2, qwen35, olmo)", kind);
  }
  return k;
}

// Merges learned on the words of `lines`: symbols start as the characters
// of each word (in the byte alphabet); each round merges the most frequent
// adjacent pair (ties: the smaller pair of texts), never one with a symbol
// built on a missing byte.
class MergeLearner {
 public:
  explicit MergeLearner(const std::vector<uint8_t>& missing) {
    for (int b = 0; b < 256; ++b) id_of(tokenizer::unicode::byte_to_unicode(uint8_t(b)));
    for (uint8_t b : missing) blocked_.push_back(id_of(tokenizer::unicode::byte_to_unicode(b)));
  }

  void add_words(const std::vector<std::string>& lines, tokenizer::PreSplit split) {
    std::map<std::string, int64_t> counts;
    for (const auto& line : lines)
      for (const auto& w : tokenizer::pre_tokenize(line, split)) ++counts[w];
    for (const auto& [w, c] : counts) {
      Word word{{}, c};
      for (size_t i = 0; i < w.size();) {
        size_t n = 1;
        while (i + n < w.size() && (uint8_t(w[i + n]) & 0xC0) == 0x80) ++n;
        word.symbols.push_back(id_of(w.substr(i, n)));
        i += n;
      }
      words_.push_back(std::move(word));
    }
  }

  // Returns false when no pair occurs twice.
  bool merge_once(std::vector<std::string>& merges) {
    std::unordered_map<uint64_t, int64_t> pairs;
    for (const Word& w : words_)
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
        if (!is_blocked(w.symbols[i]) && !is_blocked(w.symbols[i + 1]))
          pairs[key(w.symbols[i], w.symbols[i + 1])] += w.count;
    uint64_t best = 0;
    int64_t best_count = 1;
    for (const auto& [k, c] : pairs)
      if (c > best_count || (c == best_count && best_count > 1 && text_of(k) < text_of(best))) best = k, best_count = c;
    if (best_count < 2) return false;
    const int a = int(best >> 32), b = int(best & 0xFFFFFFFF);
    merges.push_back(names_[a] + " " + names_[b]);
    const int ab = id_of(names_[a] + names_[b]);
    for (Word& w : words_) {
      std::vector<int> out;
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == a && w.symbols[i + 1] == b) {
          out.push_back(ab);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
    return true;
  }

  // Every symbol but the blocked ones, in order of creation.
  std::vector<std::string> tokens() const {
    std::vector<std::string> out;
    for (int i = 0; i < int(names_.size()); ++i)
      if (!is_blocked(i)) out.push_back(names_[i]);
    return out;
  }

 private:
  struct Word {
    std::vector<int> symbols;
    int64_t count;
  };
  static uint64_t key(int a, int b) { return uint64_t(a) << 32 | uint32_t(b); }
  std::pair<std::string, std::string> text_of(uint64_t k) const { return {names_[k >> 32], names_[k & 0xFFFFFFFF]}; }
  bool is_blocked(int id) const {
    for (int b : blocked_)
      if (id == b) return true;
    return false;
  }
  int id_of(const std::string& s) {
    auto [it, fresh] = ids_.try_emplace(s, int(names_.size()));
    if (fresh) names_.push_back(s);
    return it->second;
  }

  std::vector<std::string> names_;
  std::unordered_map<std::string, int> ids_;
  std::vector<int> blocked_;
  std::vector<Word> words_;
};

}  // namespace

BpeVocabFile build_bpe_vocab(const std::string& kind, const std::vector<std::string>& lines, int n_merges) {
  const KindSpec spec = kind_spec(kind);
  const tokenizer::PreTokenizer* pre = tokenizer::find_pre_tokenizer(kind);
  MergeLearner learner(spec.missing);
  learner.add_words(lines, pre->split);
  learner.add_words(spec.extra_lines, pre->split);
  BpeVocabFile v;
  for (int i = 0; i < n_merges && learner.merge_once(v.merges); ++i) {
  }
  v.tokens = learner.tokens();
  v.types.assign(v.tokens.size(), 1);
  auto has = [&](const std::string& t) {
    for (const auto& x : v.tokens)
      if (x == t) return true;
    return false;
  };
  for (const auto& w : spec.whole_words)
    if (!has(w)) v.tokens.push_back(w), v.types.push_back(1);
  for (const auto& s : spec.specials) {
    if (s.text == spec.bos) v.bos = int32_t(v.tokens.size());
    if (s.text == spec.eos) v.eos = int32_t(v.tokens.size());
    v.tokens.push_back(s.text);
    v.types.push_back(s.type);
  }
  return v;
}

namespace {

// A 1-layer llama of `vocab` tokens with random weights, for llama.cpp to load.
void add_tiny_model(gguf::GgufWriter& w, int64_t vocab) {
  model::Config c;
  c.vocab = vocab;
  c.d_model = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.d_ff = 64, c.ctx = 64;
  c.tied = true;
  static std::vector<float> params;  // the writer keeps a pointer until write()
  model::ParamLayout layout(c);
  params.assign(size_t(layout.total()), 0.0f);
  model::init_params(c, layout, params.data(), 7);
  model::add_model_tensors(w, c, layout, params.data());
}

}  // namespace

void write_model_with_vocabulary(const std::string& path, const gguf::GgufFile& vocab) {
  gguf::GgufWriter w;
  add_tiny_model(w, int64_t(vocab.find("tokenizer.ggml.tokens")->items.size()));
  for (const auto& [k, v] : vocab.metadata())
    if (k.rfind("tokenizer.", 0) == 0 || k == "general.name") w.set(k, v);
  w.write(path);
}

void write_bpe_vocab_gguf(const std::string& path, const std::string& kind, const BpeVocabFile& v) {
  const KindSpec spec = kind_spec(kind);
  model::Config c;
  c.vocab = int64_t(v.tokens.size());
  c.d_model = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.d_ff = 64, c.ctx = 64;
  c.tied = true;
  model::ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  model::init_params(c, layout, params.data(), 7);
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, params.data());
  w.set("general.name", Value::str(spec.name));
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(kind));
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
  w.set("tokenizer.ggml.merges", Value::string_array(v.merges));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(v.bos)));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(v.eos)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(spec.add_bos));
  w.write(path);
}

}  // namespace ggtrain::test_support
