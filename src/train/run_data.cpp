#include "train/run_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "chat/chat_data.h"
#include "chat/chat_tokens.h"
#include "chat/template.h"
#include "corpus/prepare/progress.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_train.h"
#include "train/run_checkpoint.h"
#include "util/error.h"

namespace ggtrain::train {

namespace fs = std::filesystem;

corpus::PrepareOptions prepare_options(const RunConfig& c, bool quiet) {
  corpus::PrepareOptions o;
  o.corpus = c.data.corpus;
  for (const auto& s : c.data.sources) o.corpus.push_back(s.path);  // the tokenizer's sample: all of them
  o.val_corpus = c.data.val_corpus;
  o.file_type = c.data.file_type;
  o.documents.separator = c.data.doc_separator;
  o.documents.text_key = c.data.text_key;
  o.documents.on_bad = c.data.on_bad_document;
  o.add_bos = c.data.add_bos;
  o.add_eos = c.data.add_eos;
  o.val_fraction = c.data.val_fraction;
  o.seed = c.train.seed;
  o.shard_tokens = c.data.shard_tokens;
  o.quiet = quiet;
  return o;
}

void train_tokenizer_on_corpus(const RunConfig& c, const std::string& out_model, bool quiet) {
  const std::string sample = out_model + ".sample.txt";
  const auto o = prepare_options(c, true);
  const int64_t lines = corpus::write_text_sample(o, sample, c.data.tokenizer_sample_lines);
  if (lines == 0) {
    fs::remove(sample);
    fail("data.corpus ({}): no text to train a tokenizer on (empty files or blank lines only)",
         fmt::join(c.data.corpus, ", "));
  }
  // A text with more distinct characters than data.vocab_size leaves room
  // for gets the vocabulary it needs, with room for merges: a user's first
  // run on their own text should not fail on a preset's small vocabulary.
  int64_t vocab = c.data.vocab_size;
  const int64_t need = tokenizer::minimum_bpe_vocab(sample);
  if (vocab < need) {
    vocab = (need + 32 + 63) / 64 * 64;
    if (!quiet)
      fmt::print(stderr,
                 "tokenizer: the text has {} distinct characters, more than a vocabulary of {} holds "
                 "(data.vocab_size); training {} pieces instead\n",
                 need - tokenizer::kReservedBpePieces, c.data.vocab_size, vocab);
  }
  if (!quiet)
    fmt::print(stderr, "training a {}-token BPE tokenizer on {} lines sampled from the corpus\n", vocab,
               corpus::human_count(double(lines)));
  try {
    const auto report = tokenizer::train_sentencepiece_bpe(sample, int(vocab), out_model);
    if (report.long_lines > 0 && !quiet)
      fmt::print(stderr, "tokenizer: {} of the sampled lines are longer than {} bytes and were not used for it\n",
                 report.long_lines, report.max_line_bytes);
  } catch (const Error& e) {
    fs::remove(sample);
    // Name what the user gave, not the sample file made from it.
    std::string what = e.what();
    if (what.rfind(sample, 0) == 0)
      what = fmt::format("data.corpus ({})", fmt::join(c.data.corpus, ", ")) + what.substr(sample.size());
    fail("{} (data.vocab_size = {})", what, vocab);
  }
  fs::remove(sample);
}

namespace {

// A Hugging Face tokenizer.json (with the tokenizer_config.json beside it,
// when there is one) as `ggtrain tokenizer import` reads it, kept in
// RUN_DIR/tokenizer.gguf: what the run tokenizes with is a file llama.cpp
// reads too.
tokenizer::Tokenizer tokenizer_from_hf_json(const std::string& json, const std::string& run_dir) {
  const fs::path config = fs::path(json).parent_path() / "tokenizer_config.json";
  const tokenizer::HfVocabulary v = tokenizer::read_hf_tokenizer(json, fs::exists(config) ? config.string() : "");
  gguf::GgufWriter w;
  w.set("general.name", gguf::Value::str("vocabulary of " + json));
  tokenizer::add_hf_vocabulary(w, v);
  const std::string out = run_dir + "/tokenizer.gguf";
  w.write(out);
  return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(out));
}

}  // namespace

tokenizer::Tokenizer run_tokenizer(const std::string& run_dir, const RunConfig& c, bool quiet, int64_t resume_step) {
  for (const auto& [key, path] : {std::pair{"init.donor", c.init.donor}, std::pair{"init.from", c.init.from}}) {
    if (path.empty()) continue;
    try {
      return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(path));
    } catch (const Error& e) {
      fail("{} ({} must be a model GGUF with a vocabulary)", e.what(), key);
    }
  }
  const std::string& t = c.data.tokenizer;
  if (!t.empty()) {
    try {
      if (t.ends_with(".gguf")) return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(t));
      if (t.ends_with(".json")) return tokenizer_from_hf_json(t, run_dir);
      return tokenizer::Tokenizer::from_sentencepiece(t);
    } catch (const Error& e) {
      fail("{} (data.tokenizer must be a sentencepiece .model, a .gguf with a llama or gpt2 vocabulary, or a "
           "Hugging Face tokenizer.json)",
           e.what());
    }
  }
  const std::string own = run_dir + "/tokenizer.model";
  if (c.data.format != DataFormat::kText && !fs::exists(own) && resume_step < 0)
    fail("data.format = \"{}\" needs a vocabulary that knows the model: init.from (a finetune) or data.tokenizer",
         option_name(c.data.format));
  if (resume_step >= 0 && !fs::exists(own)) {
    // Every checkpoint carries its vocabulary: resume with that one rather
    // than train a new tokenizer that might split the text differently.
    const std::string w = weights_path(run_dir, resume_step);
    if (!quiet) fmt::print(stderr, "{} is missing; using the vocabulary stored in {}\n", own, w);
    return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(w));
  }
  if (!fs::exists(own)) train_tokenizer_on_corpus(c, own, quiet);
  return tokenizer::Tokenizer::from_sentencepiece(own);
}

int64_t add_chat_vocabulary(tokenizer::Tokenizer& tok, const RunConfig& c, bool quiet) {
  if (c.data.format == DataFormat::kText) return 0;
  std::string warning;
  const chat::Template t = chat::resolve_template(c.data.chat_template, tok.chat_template(), &warning);
  if (!warning.empty() && !quiet) fmt::print(stderr, "warning: {}\n", warning);
  const chat::TemplateInfo& info = chat::template_info(t);
  const std::vector<std::string> missing = chat::missing_markers(tok, t);
  if (!missing.empty()) {
    if (c.train.lora.rank > 0)
      fail("chat template {}: the vocabulary lacks {} ({}), and a LoRA run cannot train new token rows; finetune "
           "fully (train.lora.rank = 0) or choose a template whose markers the model has (data.chat_template)",
           info.name, fmt::join(missing, " "),
           missing.size() == 1 ? "1 token" : fmt::format("{} tokens", missing.size()));
    tok = tok.with_control_tokens(missing);
    if (!quiet)
      fmt::print(stderr,
                 "chat: template {}; added {} as control tokens {}..{} (their token_embd/output rows start "
                 "as the mean of the others)\n",
                 info.name, fmt::join(missing, " "), tok.vocab_size() - int64_t(missing.size()), tok.vocab_size() - 1);
  } else if (!quiet) {
    fmt::print(stderr, "chat: template {} (its markers are tokens of the vocabulary)\n", info.name);
  }
  // A model's own Qwen3 or Gemma 3 template stays (tools and all) since the
  // run renders as it does; any other becomes the rendered template's Jinja.
  const bool keeps_model_template = chat::family_template(tok.chat_template()) == t;
  tok.set_chat_template(keeps_model_template ? std::string(tok.chat_template()) : std::string(info.jinja),
                        chat::end_of_turn_id(tok, t));
  return int64_t(missing.size());
}

namespace {

chat::ChatDataOptions chat_data_options(const RunConfig& c, const tokenizer::Tokenizer& tok, bool quiet) {
  chat::ChatDataOptions o;
  o.corpus = c.data.corpus;
  o.val_corpus = c.data.val_corpus;
  o.preference = c.data.format == DataFormat::kPreference;
  o.format = record_format_of(c.data.format);
  const auto t = chat::detect_template(tok.chat_template());
  if (!t) fail("chat data: the run's vocabulary carries no template ggtrain renders");
  o.chat_template = *t;
  o.seq_len = c.train.seq_len;
  o.overflow = c.data.overflow;
  o.skip_bad = c.data.on_bad_document == corpus::OnBadDocument::kSkip;
  o.val_fraction = c.data.val_fraction;
  o.seed = c.train.seed;
  o.shard_tokens = c.data.shard_tokens;
  o.quiet = quiet;
  return o;
}

// data.on_bad_document = "skip": what the first skipped document and record
// were, so that nothing is left out without a word.
std::string first_skipped_text(const corpus::Manifest& m) {
  std::string out;
  if (!m.first_skipped.empty()) out += "; the first: " + m.first_skipped;
  if (!m.first_bad_record.empty()) out += "; the first bad record: " + m.first_bad_record;
  return out;
}

// Instruction or preference records rendered, tokenized and packed into
// windows (chat/chat_data.h).
corpus::PreparedData prepare_records(const RunConfig& c, const std::string& dir, const tokenizer::Tokenizer& tok,
                                     bool resume, bool quiet) {
  const chat::ChatDataOptions o = chat_data_options(c, tok, quiet);
  corpus::PreparedData d = chat::prepare_chat_data(o, tok, dir, resume);
  const corpus::PackCounts s = d.manifest.packed.value_or(corpus::PackCounts{});
  const int64_t bad = s.bad_skipped + d.manifest.skipped;
  if (!quiet)
    fmt::print(stderr,
               "data: {} training / {} validation {}{}{}{}{} -> {} + {} windows of {} tokens ({:.1f}% of "
               "tokens trained, {:.1f}% padding) in {} shard(s){}\n",
               s.examples, s.val_examples, o.preference ? "pairs" : "examples",
               bad ? fmt::format(", {} bad records skipped{}", bad, first_skipped_text(d.manifest)) : "",
               s.truncated ? fmt::format(", {} truncated", s.truncated) : "",
               s.split ? fmt::format(", {} split", s.split) : "",
               s.too_long_skipped ? fmt::format(", {} too long, skipped", s.too_long_skipped) : "", s.train_windows,
               s.val_windows, c.train.seq_len,
               100.0 * double(s.trained_tokens) / double(std::max<int64_t>(1, s.tokens)),
               100.0 * double(s.padding) / double(std::max<int64_t>(1, s.tokens + s.padding)), d.manifest.shards.size(),
               d.reused ? " (prepared before, reused)" : "");
  return d;
}

// One corpus (data.corpus, or one entry of data.sources) prepared into dir.
corpus::PreparedData prepare_one(const corpus::PrepareOptions& o, const std::string& dir,
                                 const tokenizer::Tokenizer& tok, bool resume) {
  auto p = corpus::prepare_data(o, tok, dir, resume ? corpus::OnMismatch::kRefuse : corpus::OnMismatch::kPrepareAgain);
  const auto& m = p.manifest;
  if (m.documents == 0)
    fail("data.corpus ({}): no documents (empty files or blank lines only)", fmt::join(o.corpus, ", "));
  if (!o.quiet)
    fmt::print(stderr, "data: {} documents{} -> {} train / {} validation tokens in {} shard(s){}\n", m.documents,
               m.skipped ? fmt::format(" ({} bad ones skipped{})", m.skipped, first_skipped_text(m)) : "",
               m.train_tokens, m.val_tokens, m.shards.size(), p.reused ? " (prepared before, reused)" : "");
  return p;
}

}  // namespace

std::vector<corpus::PreparedData> prepare_run_data(const RunConfig& c, const std::string& dir,
                                                   const tokenizer::Tokenizer& tok, bool resume, bool quiet) {
  if (c.data.format != DataFormat::kText) return {prepare_records(c, dir, tok, resume, quiet)};
  auto o = prepare_options(c, quiet);
  if (c.data.sources.empty()) return {prepare_one(o, dir, tok, resume)};
  std::vector<corpus::PreparedData> out;
  for (size_t k = 0; k < c.data.sources.size(); ++k) {
    o.corpus = {c.data.sources[k].path};
    out.push_back(prepare_one(o, fmt::format("{}/source-{}", dir, k), tok, resume));
  }
  return out;
}

namespace {

RunTokens open_streams(const std::vector<std::vector<std::string>>& train, const std::vector<double>& weights,
                       const std::vector<std::string>& val) {
  RunTokens t;
  for (const auto& shards : train) t.train.push_back(std::make_unique<corpus::TokenStream>(shards));
  t.weights = weights;
  if (!val.empty()) t.val = std::make_unique<corpus::TokenStream>(val);
  return t;
}

}  // namespace

namespace {

// Chat data prepared before it had shards and a manifest (data/chat.json,
// chat-train.tok and chat-val.tok with their flags): the run resumes on
// exactly the windows it started with.
RunTokens open_unsharded_chat(const std::string& dir, bool quiet) {
  if (!quiet) fmt::print(stderr, "data: {}/chat-train.tok (prepared by an earlier ggtrain): used as it is\n", dir);
  RunTokens r;
  r.train.push_back(std::make_unique<corpus::TokenStream>(std::vector<std::string>{dir + "/chat-train.tok"}));
  r.train_flags = std::make_unique<corpus::TokenStream>(std::vector<std::string>{dir + "/chat-train.flags.tok"});
  r.weights = {1.0};
  const std::string val = dir + "/chat-val.tok";
  if (fs::exists(val) && corpus::TokenFile(val).size() > 1) {  // one token: no validation window
    r.val = std::make_unique<corpus::TokenStream>(std::vector<std::string>{val});
    r.val_flags = std::make_unique<corpus::TokenStream>(std::vector<std::string>{dir + "/chat-val.flags.tok"});
  }
  return r;
}

}  // namespace

RunTokens open_run_tokens(const RunConfig& c, const std::string& run_dir, const tokenizer::Tokenizer& tok, bool resume,
                          bool quiet) {
  const std::string dir = run_dir + "/data";
  if (resume && c.data.format != DataFormat::kText && !fs::exists(corpus::manifest_path(dir)) &&
      fs::exists(dir + "/chat.json"))
    return open_unsharded_chat(dir, quiet);
  const std::string legacy_train = dir + "/train.tok", legacy_val = dir + "/val.tok";
  if (resume && !fs::exists(corpus::manifest_path(dir)) && fs::exists(legacy_train)) {
    // Prepared before document ends and shards existed: the run resumes on
    // exactly the tokens it started with.
    if (!quiet)
      fmt::print(stderr, "data: {} (prepared by an earlier ggtrain, without EOS): used as it is\n", legacy_train);
    corpus::TokenFile val(legacy_val);
    return open_streams({{legacy_train}}, {1.0},
                        val.size() > 0 ? std::vector<std::string>{legacy_val} : std::vector<std::string>{});
  }
  const std::vector<corpus::PreparedData> prepared = prepare_run_data(c, dir, tok, resume, quiet);
  std::vector<std::vector<std::string>> train;
  std::vector<double> weights;
  std::vector<std::string> val;  // validation: every source's, one after the other
  for (size_t k = 0; k < prepared.size(); ++k) {
    train.push_back(prepared[k].train_shards);
    weights.push_back(c.data.sources.empty() ? 1.0 : c.data.sources[k].weight);
    val.insert(val.end(), prepared[k].val_shards.begin(), prepared[k].val_shards.end());
  }
  RunTokens r = open_streams(train, weights, val);
  if (!prepared[0].train_flags.empty()) {  // records: one corpus, its flags beside it
    r.train_flags = std::make_unique<corpus::TokenStream>(prepared[0].train_flags);
    if (r.val) r.val_flags = std::make_unique<corpus::TokenStream>(prepared[0].val_flags);
  } else if (c.data.attention == AttentionSpan::kDocument) r.document_token = tok.bos_id();
  return r;
}

}  // namespace ggtrain::train
