#include "chat/chat_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "chat/chat_tokens.h"
#include "chat/preference_record.h"
#include "corpus/batch_loader.h"
#include "corpus/input/documents.h"
#include "corpus/prepare/prepare.h"
#include "corpus/token_file.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::chat {

namespace fs = std::filesystem;

namespace {

// Examples packed into windows of `seq_len` tokens, best fit: each goes
// into the open window with the least room that still holds it; when none
// does, a new window opens, and beyond kOpenWindows the fullest one is
// written out first (its rest padded: EOS, no loss, its own "document").
// Bounded memory, deterministic, and little padding for short examples. The
// file ends with one more padding token, the last window's last target.
class WindowPacker {
 public:
  WindowPacker(const std::string& tokens, const std::string& flags, int64_t vocab, int64_t seq_len, int32_t pad)
      : tokens_(tokens, vocab), flags_(flags, 4), seq_len_(seq_len), pad_(pad) {}

  // ids.size() <= seq_len.
  void add(const std::vector<int32_t>& ids, const std::vector<uint8_t>& trained, ChatDataStats& st) {
    add_together({{ids, trained}}, st);
  }

  // Examples that must share a window (a preference pair's two answers),
  // side by side in this order; their sizes sum to at most seq_len.
  void add_together(const std::vector<EncodedExample>& examples, ChatDataStats& st) {
    size_t n = 0;
    for (const auto& e : examples) n += e.ids.size();
    Window& w = window_with_room(n, st);
    for (const auto& e : examples) {
      for (size_t i = 0; i < e.ids.size(); ++i) {
        w.ids.push_back(e.ids[i]);
        w.flags.push_back((i == 0 ? corpus::kFlagExampleStart : 0) | (e.trained[i] ? corpus::kFlagTrained : 0));
        st.trained_tokens += e.trained[i];
      }
    }
    st.tokens += int64_t(n);
  }

  // Writes every open window and commits both files; returns the windows.
  int64_t finish(ChatDataStats& st) {
    for (Window& w : open_) write(w, st);
    open_.clear();
    const int32_t start = corpus::kFlagExampleStart;
    tokens_.append(&pad_, 1);
    flags_.append(&start, 1);
    tokens_.commit();
    flags_.commit();
    return windows_;
  }

 private:
  static constexpr size_t kOpenWindows = 64;
  struct Window {
    std::vector<int32_t> ids, flags;
  };

  // The open window with the least room that still holds n tokens (a new
  // one when none does; beyond kOpenWindows the fullest is written first).
  Window& window_with_room(size_t n, ChatDataStats& st) {
    Window* best = nullptr;
    for (Window& w : open_)
      if (room(w) >= n && (!best || room(w) < room(*best))) best = &w;
    if (!best) {
      if (open_.size() == kOpenWindows) {
        auto fullest = std::min_element(open_.begin(), open_.end(),
                                        [&](const Window& a, const Window& b) { return room(a) < room(b); });
        write(*fullest, st);
        open_.erase(fullest);
      }
      open_.emplace_back();
      best = &open_.back();
    }
    return *best;
  }
  size_t room(const Window& w) const { return size_t(seq_len_) - w.ids.size(); }
  void write(Window& w, ChatDataStats& st) {
    for (bool first = true; w.ids.size() < size_t(seq_len_); first = false) {
      w.ids.push_back(pad_);
      w.flags.push_back(first ? corpus::kFlagExampleStart : 0);
      ++st.padding;
    }
    tokens_.append(w.ids.data(), w.ids.size());
    flags_.append(w.flags.data(), w.flags.size());
    ++windows_;
  }

  corpus::TokenFileWriter tokens_, flags_;
  int64_t seq_len_, windows_ = 0;
  int32_t pad_;
  std::vector<Window> open_;
};

bool any_trained(const std::vector<uint8_t>& t, size_t from, size_t to) {
  for (size_t i = from + 1; i < to; ++i)  // the first token of a piece is never a target within it
    if (t[i]) return true;
  return false;
}

// The example in pieces of at most seq_len tokens as data.overflow says
// (none: skipped); each piece must hold a trained target.
std::vector<std::pair<size_t, size_t>> pieces_of(const EncodedExample& e, const ChatDataOptions& o, ChatDataStats& st) {
  const size_t n = e.ids.size(), w = size_t(o.seq_len);
  std::vector<std::pair<size_t, size_t>> out;
  if (n <= w) {
    out.emplace_back(0, n);
  } else if (o.overflow == Overflow::kTruncate) {
    out.emplace_back(0, w);
    ++st.truncated;
  } else if (o.overflow == Overflow::kSplit) {
    for (size_t b = 0; b < n; b += w) out.emplace_back(b, std::min(n, b + w));
    ++st.split;
  } else {
    ++st.too_long_skipped;
    return {};
  }
  std::erase_if(out, [&](const auto& p) { return !any_trained(e.trained, p.first, p.second); });
  if (out.empty()) ++st.too_long_skipped;
  return out;
}

// The spans of one record: templated, or for completion records the prompt
// and then the completion and EOS, as text.
std::vector<Span> spans_of(const Conversation& c, RecordFormat f, Template t, const tokenizer::Tokenizer& tok) {
  if (f != RecordFormat::kCompletion) return render_spans(t, c, false);
  return {{c[0].content, false}, {c[1].content + tok.piece(tok.eos_id()), true}};
}

// A preference record's two conversations (chosen, rejected) into one
// window, side by side; false (counted as too long) when they do not fit
// one window together.
bool pack_pair(const nlohmann::json& record, const std::string& where, const ChatDataOptions& o,
               const tokenizer::Tokenizer& tok, WindowPacker& packer, ChatDataStats& st) {
  const PreferencePair pair = preference_pair_of(record, where);
  std::vector<EncodedExample> answers;
  for (const Conversation* c : {&pair.chosen, &pair.rejected})
    answers.push_back(encode_spans(tok, render_spans(o.chat_template, *c, false)));
  if (answers[0].ids.size() + answers[1].ids.size() > size_t(o.seq_len)) {
    ++st.too_long_skipped;
    return false;
  }
  packer.add_together(answers, st);
  return true;
}

struct Split {
  WindowPacker* train;
  WindowPacker* val;  // null: no validation data
  bool val_by_hash;  // corpus examples go to val by goes_to_validation (no data.val_corpus)
};

// Every record of `files` into the packers.
void pack_files(const std::vector<corpus::InputFile>& files, const ChatDataOptions& o, const tokenizer::Tokenizer& tok,
                const Split& split, bool to_val, ChatDataStats& st, int64_t& index) {
  corpus::DocumentOptions dopt;
  dopt.separator = corpus::DocSeparator::kLine;
  dopt.on_bad = o.skip_bad ? corpus::OnBadDocument::kSkip : corpus::OnBadDocument::kError;
  for (const corpus::InputFile& f : files) {
    corpus::DocumentReader reader(f, dopt);
    std::optional<RecordFormat> format = o.format;
    std::string line;
    while (reader.next(&line)) {
      const std::string where = fmt::format("{}:{}", f.path, reader.line_number());
      try {
        const nlohmann::json record = nlohmann::json::parse(line, nullptr, true);
        if (o.preference) {
          const bool val = to_val || (split.val_by_hash && corpus::goes_to_validation(o.seed, index, o.val_fraction));
          ++index;
          WindowPacker& packer = *(val ? split.val : split.train);
          if (pack_pair(record, where, o, tok, packer, st)) ++(val ? st.val_examples : st.examples);
          continue;
        }
        if (!format) format = detect_record_format(record, where);
        const Conversation c = conversation_of(record, *format, where);
        const EncodedExample e = encode_spans(tok, spans_of(c, *format, o.chat_template, tok));
        const bool val = to_val || (split.val_by_hash && corpus::goes_to_validation(o.seed, index, o.val_fraction));
        ++index;
        const auto pieces = pieces_of(e, o, st);
        for (const auto& [b, end] : pieces) {
          const std::vector<int32_t> ids(e.ids.begin() + long(b), e.ids.begin() + long(end));
          const std::vector<uint8_t> tr(e.trained.begin() + long(b), e.trained.begin() + long(end));
          (val ? split.val : split.train)->add(ids, tr, st);
        }
        if (!pieces.empty()) ++(val ? st.val_examples : st.examples);
      } catch (const nlohmann::json::parse_error& err) {
        if (!o.skip_bad) fail("{}: not valid JSON (at byte {})", where, err.byte);
        ++st.bad_skipped;
      } catch (const Error&) {
        if (!o.skip_bad) throw;
        ++st.bad_skipped;
      }
    }
    st.bad_skipped += reader.skipped();
  }
}

nlohmann::json files_json(const std::vector<corpus::InputFile>& files) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : files) a.push_back({{"path", f.path}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
  return a;
}

// What decides the prepared bytes: compared with chat.json to reuse them.
nlohmann::json source_json(const ChatDataOptions& o, const std::vector<corpus::InputFile>& train,
                           const std::vector<corpus::InputFile>& val, const tokenizer::Tokenizer& tok) {
  return {{"format", o.preference ? "preference"
                     : o.format   ? std::string(record_format_name(*o.format))
                                  : "auto"},
          {"chat_template", template_info(o.chat_template).name},
          {"seq_len", o.seq_len},
          {"overflow", int(o.overflow)},
          {"skip_bad", o.skip_bad},
          {"val_fraction", o.val_corpus.empty() ? o.val_fraction : 0.0},
          {"seed", o.seed},
          {"corpus", files_json(train)},
          {"val_corpus", files_json(val)},
          {"tokenizer", corpus::tokenizer_fingerprint(tok)}};
}

nlohmann::json stats_json(const ChatDataStats& s) {
  return {{"examples", s.examples},
          {"val_examples", s.val_examples},
          {"bad_skipped", s.bad_skipped},
          {"too_long_skipped", s.too_long_skipped},
          {"truncated", s.truncated},
          {"split", s.split},
          {"train_windows", s.train_windows},
          {"val_windows", s.val_windows},
          {"tokens", s.tokens},
          {"trained_tokens", s.trained_tokens},
          {"padding", s.padding}};
}

ChatDataStats stats_of(const nlohmann::json& j) {
  ChatDataStats s;
  s.examples = j.at("examples");
  s.val_examples = j.at("val_examples");
  s.bad_skipped = j.at("bad_skipped");
  s.too_long_skipped = j.at("too_long_skipped");
  s.truncated = j.at("truncated");
  s.split = j.at("split");
  s.train_windows = j.at("train_windows");
  s.val_windows = j.at("val_windows");
  s.tokens = j.at("tokens");
  s.trained_tokens = j.at("trained_tokens");
  s.padding = j.at("padding");
  return s;
}

// The record of an earlier preparation, or null when there is none (or it
// cannot be read: then it is prepared again).
nlohmann::json read_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, false);
}

}  // namespace

ChatData prepare_chat_data(const ChatDataOptions& o, const tokenizer::Tokenizer& tok, const std::string& dir,
                           bool refuse_change) {
  if (o.seq_len < 2) fail("chat data: windows of {} tokens are too short", o.seq_len);
  const auto train_files = corpus::expand_inputs(o.corpus, corpus::FileType::kText, "data.corpus");
  const auto val_files = o.val_corpus.empty()
                             ? std::vector<corpus::InputFile>{}
                             : corpus::expand_inputs(o.val_corpus, corpus::FileType::kText, "data.val_corpus");
  fs::create_directories(dir);
  ChatData d{dir + "/chat-train.tok",
             dir + "/chat-train.flags.tok",
             dir + "/chat-val.tok",
             dir + "/chat-val.flags.tok",
             {},
             false};
  const std::string record_path = dir + "/chat.json";
  const nlohmann::json source = source_json(o, train_files, val_files, tok);
  const nlohmann::json old = read_record(record_path);
  if (old.is_object() && old.value("source", nlohmann::json()) == source && fs::exists(d.train) &&
      fs::exists(d.train_flags)) {
    d.stats = stats_of(old.at("stats"));
    d.reused = true;
  } else {
    if (old.is_object() && refuse_change)
      fail("{}: the chat data was prepared from other files, options or tokenizer than this run names; a resumed "
           "run trains on the data it started with (restore them, or start a new run)",
           record_path);
    const bool has_val = !val_files.empty() || o.val_fraction > 0;
    const int32_t pad = tok.eos_id() >= 0 ? tok.eos_id() : tok.bos_id();
    ChatDataStats st;
    WindowPacker train(d.train, d.train_flags, tok.vocab_size(), o.seq_len, pad);
    std::optional<WindowPacker> val;
    if (has_val) val.emplace(d.val, d.val_flags, tok.vocab_size(), o.seq_len, pad);
    const Split split{&train, val ? &*val : nullptr, val_files.empty() && val.has_value()};
    int64_t index = 0;
    pack_files(train_files, o, tok, split, false, st, index);
    if (!val_files.empty()) pack_files(val_files, o, tok, split, true, st, index);
    if (st.examples == 0)
      fail("data.corpus ({}): no training examples ({} longer than train.seq_len = {} and skipped, see data.overflow; "
           "{} bad records skipped)",
           fmt::join(o.corpus, ", "), st.too_long_skipped, o.seq_len, st.bad_skipped);
    st.train_windows = train.finish(st);
    if (val) st.val_windows = val->finish(st);
    const std::string text = nlohmann::json{{"source", source}, {"stats", stats_json(st)}}.dump(2) + "\n";
    write_file_atomic(record_path, text.data(), text.size());
    d.stats = st;
  }
  if (d.stats.val_windows == 0) d.val = d.val_flags = "";
  return d;
}

}  // namespace ggtrain::chat
