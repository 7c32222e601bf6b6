#pragma once
// Instruction-tuning data: JSONL records (chat, alpaca, completion; also
// .gz/.zst) rendered with a chat template, tokenized with the loss on the
// answers, and packed into windows of the training length, so that every
// window starts at an example (or padding) and no example straddles two.
// Written as token files the training loader reads as it reads pretraining
// data, plus one flags file per token file (corpus/batch_loader.h: kFlagTrained,
// kFlagExampleStart).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/template.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::chat {

// An example longer than the window (data.overflow).
enum class Overflow { kTruncate, kSplit, kSkip };

struct ChatDataOptions {
  std::vector<std::string> corpus, val_corpus;  // files, folders, globs
  std::optional<RecordFormat> format;  // nullopt: from each file's first record
  // Preference records (chat/preference_record.h) instead: each pair's
  // chosen then rejected conversation side by side in one window, two
  // documents; a pair too long for one window is skipped (counted).
  bool preference = false;
  Template chat_template = Template::kChatml;
  int64_t seq_len = 0;  // tokens per window (train.seq_len)
  Overflow overflow = Overflow::kTruncate;
  bool skip_bad = false;  // bad records skipped and counted, instead of failing
  double val_fraction = 0.01;
  uint64_t seed = 1337;
};

struct ChatDataStats {
  int64_t examples = 0, val_examples = 0;
  int64_t bad_skipped = 0, too_long_skipped = 0, truncated = 0, split = 0;
  int64_t train_windows = 0, val_windows = 0;
  int64_t tokens = 0, trained_tokens = 0, padding = 0;  // over both splits
};

struct ChatData {
  std::string train, train_flags, val, val_flags;  // token files; val ones empty without validation
  ChatDataStats stats;
  bool reused = false;
};

// Prepares DIR/chat-{train,val}.tok and their .flags.tok (reusing them when
// DIR/chat.json says they were made from the same options, files and
// tokenizer; `refuse_change`: a difference is an error instead). Bad input
// fails with one line naming file:line and what is wrong.
ChatData prepare_chat_data(const ChatDataOptions& o, const tokenizer::Tokenizer& tok, const std::string& dir,
                           bool refuse_change);

}  // namespace ggtrain::chat
