#pragma once
// Training batches in a seeded, reproducible order: the token stream is cut
// into windows of seq_len+1 tokens (window w starts at token w * seq_len, so
// neighbours share one token: the last target of one is the first input of
// the next), each epoch visits them in
// a permutation drawn from (seed, epoch). (epoch, cursor) is the whole state,
// saved with every checkpoint so a resumed run draws the same batches.
#include <cstdint>
#include <vector>

#include "corpus/token_file.h"
#include "kernels/cross_entropy.h"

namespace ggtrain::corpus {

// A target that carries no loss (a prompt token of an instruction example,
// padding): the model counts no loss there and the loss kernels skip it
// (they take any negative target so).
constexpr int32_t kNoTarget = kernels::kNoTarget;

// Per-token flags of packed examples (chat data), a token file of the same
// length as the tokens with ids in [0, 4).
constexpr int32_t kFlagTrained = 1;  // predicting this token carries loss
constexpr int32_t kFlagExampleStart = 2;  // an example (or padding) starts here: attention stops at it

// What a window's tokens say beyond their ids. Both off: every target
// counts and each row is one sequence.
struct WindowLabels {
  const TokenStream* flags = nullptr;  // chat data: targets without kFlagTrained get kNoTarget
  int32_t document_token = -1;  // data.attention = "document": a position holding it starts a document
};

struct LoaderState {
  uint64_t epoch = 0;
  uint64_t cursor = 0;  // windows consumed in this epoch
};

class BatchLoader {
 public:
  BatchLoader(const TokenStream& tokens, int64_t seq_len, uint64_t seed, const WindowLabels& labels = {});
  // inputs, targets: [B, seq_len]; advances the state by B windows.
  // doc_start (optional, [B, seq_len]): each position's document start,
  // from the labels (0 everywhere without them); window_ids (optional, [B]):
  // which window each row is (what window() takes).
  void next(int64_t B, int32_t* inputs, int32_t* targets, int32_t* doc_start = nullptr, int64_t* window_ids = nullptr);
  // Window w in stream order (no shuffling): for evaluation.
  void window(int64_t w, int32_t* inputs, int32_t* targets, int32_t* doc_start = nullptr) const;
  int64_t n_windows() const { return n_windows_; }
  LoaderState state() const { return state_; }
  void set_state(const LoaderState& s);

 private:
  void shuffle_for_epoch();
  void apply_labels(int64_t w, const int32_t* inputs, int32_t* targets, int32_t* doc_start) const;
  mutable std::vector<int32_t> flags_;  // a window's flags (T + 1), read anew for each window
  const TokenStream& tokens_;
  WindowLabels labels_;
  int64_t T_, n_windows_;
  uint64_t seed_;
  LoaderState state_;
  std::vector<uint32_t> order_;
};

}  // namespace ggtrain::corpus
