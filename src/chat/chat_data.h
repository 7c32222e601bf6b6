#pragma once
// Instruction-tuning data: JSONL records (chat, alpaca, completion; also
// .gz/.zst) rendered with a chat template, tokenized with the loss on the
// answers, and packed into windows of the training length, so that every
// window starts at an example (or padding) and no example straddles two.
// Prepared by the one preparation pipeline (corpus/prepare/prepare.h) with
// a record encoder: shards, flags files beside them (corpus/batch_loader.h:
// kFlagTrained, kFlagExampleStart) and a manifest, so the data is reused
// while its sources are unchanged (by size and sampled content) and an
// interrupted preparation continues after its last finished shard.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/template.h"
#include "corpus/prepare/prepare.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::chat {

struct ChatDataOptions {
  std::vector<std::string> corpus, val_corpus;  // files, folders, globs
  std::optional<RecordFormat> format;  // nullopt: from each file's first record
  // Preference records (chat/preference_record.h) instead: each pair's
  // chosen then rejected conversation side by side in one window, two
  // documents; a pair too long for one window is skipped (counted).
  bool preference = false;
  Template chat_template = Template::kChatml;
  int64_t seq_len = 0;  // tokens per window (train.seq_len)
  corpus::Overflow overflow = corpus::Overflow::kTruncate;
  bool skip_bad = false;  // bad records skipped and counted, instead of failing
  double val_fraction = 0.01;
  uint64_t seed = 1337;
  int64_t shard_tokens = 100'000'000;
  bool quiet = true;
};

// Prepares DIR (shards, flags, manifest.json), reusing what an earlier call
// with the same options, files and tokenizer left there; `refuse_change`: a
// difference is an error instead. Bad input fails with one line naming
// file:line and what is wrong. What packing did is in manifest.packed.
corpus::PreparedData prepare_chat_data(const ChatDataOptions& o, const tokenizer::Tokenizer& tok,
                                       const std::string& dir, bool refuse_change);

}  // namespace ggtrain::chat
