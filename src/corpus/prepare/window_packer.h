#pragma once
// Examples packed whole into windows of the training length (chat and
// preference data): every window starts at an example (or padding) and no
// example straddles two, so each of the loader's windows (token w * seq_len
// on, corpus/batch_loader.h) holds whole examples. Beside the tokens goes a
// flags stream of the same length (kFlagTrained, kFlagExampleStart).
#include <cstdint>
#include <vector>

#include "corpus/token_file.h"

namespace ggtrain::corpus {

// An example longer than the window (data.overflow).
enum class Overflow { kTruncate, kSplit, kSkip };

struct WindowPacking {
  int64_t seq_len = 0;  // tokens per window (train.seq_len)
  Overflow overflow = Overflow::kTruncate;
};

// One encoded example: its ids and, per id, whether predicting it carries
// loss.
struct Example {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
};

// What packing did (examples, windows and tokens of both splits unless a
// name says which).
struct PackCounts {
  int64_t examples = 0, val_examples = 0;
  int64_t bad_skipped = 0, too_long_skipped = 0, truncated = 0, split = 0;
  int64_t train_windows = 0, val_windows = 0;
  int64_t tokens = 0, trained_tokens = 0, padding = 0;

  PackCounts& operator+=(const PackCounts& o);
};

// Best fit: each example goes into the open window with the least room that
// still holds it; when none does, a new window opens, and beyond a fixed
// number of open windows the fullest is written out first (its rest padded:
// `pad`, no loss, its own "document"). Bounded memory, deterministic, and
// little padding for short examples. Writes into the token and flag files
// it is given; flush() ends with no window open (a shard can close there).
class WindowPacker {
 public:
  WindowPacker(TokenFileWriter& tokens, TokenFileWriter& flags, WindowPacking packing, int32_t pad);

  // One document's examples: one alone, cut to the window as the overflow
  // rule says (each piece must hold a trained target), or several side by
  // side in one window (a preference pair's two answers; counted too long
  // when they do not fit one window together). False when nothing of it was
  // kept.
  bool add(const std::vector<Example>& examples, PackCounts& c);
  // Writes every open window; returns how many windows this packer wrote.
  int64_t flush(PackCounts& c);

 private:
  struct Window {
    std::vector<int32_t> ids, flags;
  };
  void add_together(const std::vector<const Example*>& examples, size_t n, PackCounts& c);
  Window& window_with_room(size_t n, PackCounts& c);
  size_t room(const Window& w) const { return size_t(packing_.seq_len) - w.ids.size(); }
  void write(Window& w, PackCounts& c);

  TokenFileWriter &tokens_, &flags_;
  WindowPacking packing_;
  int32_t pad_;
  int64_t windows_ = 0;
  std::vector<Window> open_;
};

// The token one window's last target reads after the last window: a
// packed stream ends with it (one padding token starting an example).
void end_packed_stream(TokenFileWriter& tokens, TokenFileWriter& flags, int32_t pad);

}  // namespace ggtrain::corpus
