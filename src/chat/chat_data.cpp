#include "chat/chat_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "chat/chat_tokens.h"
#include "chat/preference_record.h"
#include "util/error.h"

namespace ggtrain::chat {

namespace {

corpus::Example example_of(EncodedExample e) { return {std::move(e.ids), std::move(e.trained)}; }

// A JSONL line as the examples it trains: a conversation rendered with the
// template (or a completion record's prompt and completion as text), or a
// preference pair's two conversations, to share one window.
class ChatRecordEncoder : public corpus::RecordEncoder {
 public:
  ChatRecordEncoder(const ChatDataOptions& o, const tokenizer::Tokenizer& tok) : o_(o), tok_(tok) {}

  std::string options_json() const override {
    return nlohmann::json{{"format", o_.preference ? "preference"
                                     : o_.format   ? std::string(record_format_name(*o_.format))
                                                   : "auto"},
                          {"chat_template", template_info(o_.chat_template).name}}
        .dump();
  }

  // A file's record format is that of its first JSON record; when that one
  // has no known shape it fails alone and the others are taken one by one.
  void look(int64_t source, const std::string& record) override {
    if (o_.preference || o_.format) return;
    if (size_t(source) >= decided_.size()) {
      decided_.resize(size_t(source) + 1, false);
      formats_.resize(size_t(source) + 1);
    }
    if (decided_[size_t(source)]) return;
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(record, nullptr, false);
    if (j.is_discarded()) return;
    decided_[size_t(source)] = true;
    try {
      formats_[size_t(source)] = detect_record_format(j, "");
    } catch (const Error&) {
    }
  }

  std::vector<corpus::Example> encode(int64_t source, const std::string& line,
                                      const std::string& where) const override {
    nlohmann::ordered_json record;
    try {
      record = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::ordered_json::parse_error& e) {
      fail("{}: not valid JSON (at byte {})", where, e.byte);
    }
    if (o_.preference) {
      const PreferencePair pair = preference_pair_of(record, where);
      std::vector<corpus::Example> answers;
      for (const Conversation* c : {&pair.chosen, &pair.rejected}) {
        check_renders(o_.chat_template, *c, where);
        answers.push_back(example_of(encode_spans(tok_, render_spans(o_.chat_template, *c, false))));
      }
      tally_ignored(record, std::nullopt, source, where);
      return answers;
    }
    const RecordFormat f = format_of(source, record, where);
    const Conversation c = conversation_of(record, f, where);
    check_renders(o_.chat_template, c, where);
    std::vector<corpus::Example> out;
    out.push_back(example_of(encode_spans(tok_, spans_of(c, f))));
    tally_ignored(record, f, source, where);
    return out;
  }

  // Each member no example takes in: how many records had it, and the first
  // of them in reading order (source, line).
  struct Ignored {
    int64_t records = 0;
    std::pair<int64_t, int64_t> first{INT64_MAX, INT64_MAX};
    std::string first_where;
  };
  std::map<std::string, Ignored> ignored() const {
    std::lock_guard<std::mutex> lock(ignored_mutex_);
    return ignored_;
  }

 private:
  RecordFormat format_of(int64_t source, const nlohmann::ordered_json& record, const std::string& where) const {
    if (o_.format) return *o_.format;
    if (size_t(source) < formats_.size() && formats_[size_t(source)]) return *formats_[size_t(source)];
    return detect_record_format(record, where);  // the file's first record had none: each its own
  }

  // The spans of one record: templated, or for completion records the
  // prompt and then the completion and EOS, as text.
  std::vector<Span> spans_of(const Conversation& c, RecordFormat f) const {
    if (f != RecordFormat::kCompletion) return render_spans(o_.chat_template, c, false);
    return {{c[0].content, false}, {c[1].content + tok_.piece(tok_.eos_id()), true}};
  }

  // encode() runs on several threads: the tally is guarded.
  void tally_ignored(const nlohmann::ordered_json& record, std::optional<RecordFormat> f, int64_t source,
                     const std::string& where) const {
    const std::vector<std::string> names = ignored_members(record, f);
    if (names.empty()) return;
    const size_t colon = where.rfind(':');
    const int64_t line = colon == std::string::npos ? 0 : std::atoll(where.c_str() + colon + 1);
    std::lock_guard<std::mutex> lock(ignored_mutex_);
    for (const auto& name : names) {
      Ignored& i = ignored_[name];
      ++i.records;
      if (std::pair{source, line} < i.first) i.first = {source, line}, i.first_where = where;
    }
  }

  const ChatDataOptions& o_;
  const tokenizer::Tokenizer& tok_;
  mutable std::mutex ignored_mutex_;
  mutable std::map<std::string, Ignored> ignored_;
  std::vector<bool> decided_;  // per source: look() saw its first JSON record
  std::vector<std::optional<RecordFormat>> formats_;  // and the format it has
};

}  // namespace

corpus::PreparedData prepare_chat_data(const ChatDataOptions& o, const tokenizer::Tokenizer& tok,
                                       const std::string& dir, bool refuse_change) {
  corpus::PrepareOptions p;
  p.corpus = o.corpus;
  p.val_corpus = o.val_corpus;
  p.file_type = corpus::FileType::kText;  // a record is a line, parsed by the encoder
  p.documents.separator = corpus::DocSeparator::kLine;
  p.documents.on_bad = o.skip_bad ? corpus::OnBadDocument::kSkip : corpus::OnBadDocument::kError;
  p.val_fraction = o.val_fraction;
  p.seed = o.seed;
  p.shard_tokens = o.shard_tokens;
  // A record takes about ten times its bytes while it is encoded (rendered
  // text, ids and flags): 1 MiB batches keep a preparation's memory near
  // that of text (measured: 65 MB peak with these, 130 MB with 8 MiB, at
  // the same speed).
  p.batch_bytes = 1 << 20;
  p.quiet = o.quiet;
  const auto encoder = std::make_shared<ChatRecordEncoder>(o, tok);
  p.records = encoder;
  p.packing = {o.seq_len, o.overflow};
  corpus::PreparedData d = corpus::prepare_data(
      p, tok, dir, refuse_change ? corpus::OnMismatch::kRefuse : corpus::OnMismatch::kPrepareAgain);
  // Nothing dropped without a word: each member no example took in.
  if (!o.quiet)
    for (const auto& [name, i] : encoder->ignored())
      fmt::print(stderr, "note: {} record(s) have \"{}\", which training does not use (the first: {})\n", i.records,
                 name, i.first_where);
  const corpus::PackCounts c = d.manifest.packed.value_or(corpus::PackCounts{});
  if (c.examples == 0) {
    // Under truncate an example is skipped only when its prompt alone fills
    // the window: nothing of its answer would be left to learn.
    const std::string why = o.overflow == corpus::Overflow::kTruncate
                                ? "their prompts alone fill the window, leaving no answer to learn; set "
                                  "data.overflow = \"split\" or raise train.seq_len"
                            : o.overflow == corpus::Overflow::kSkip
                                ? "data.overflow = \"skip\"; set it to \"split\" or raise train.seq_len"
                                : "raise train.seq_len";
    fail("data.corpus ({}): no training examples ({} longer than train.seq_len = {} and skipped: {}; {} bad records "
         "skipped)",
         fmt::join(o.corpus, ", "), c.too_long_skipped, o.seq_len, why, c.bad_skipped + d.manifest.skipped);
  }
  return d;
}

}  // namespace ggtrain::chat
