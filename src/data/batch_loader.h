#pragma once
// Training batches in a seeded, reproducible order: the token stream is cut
// into non-overlapping windows of seq_len+1 tokens, each epoch visits them in
// a permutation drawn from (seed, epoch). (epoch, cursor) is the whole state,
// saved with every checkpoint so a resumed run draws the same batches.
#include <cstdint>
#include <vector>

#include "data/token_file.h"

namespace ggtrain::data {

struct LoaderState {
  uint64_t epoch = 0;
  uint64_t cursor = 0;  // windows consumed in this epoch
};

class BatchLoader {
 public:
  BatchLoader(const TokenStream& tokens, int64_t seq_len, uint64_t seed);
  // inputs, targets: [B, seq_len]; advances the state by B windows.
  void next(int64_t B, int32_t* inputs, int32_t* targets);
  // Window w in stream order (no shuffling): for evaluation.
  void window(int64_t w, int32_t* inputs, int32_t* targets) const;
  int64_t n_windows() const { return n_windows_; }
  LoaderState state() const { return state_; }
  void set_state(const LoaderState& s);

 private:
  void shuffle_for_epoch();
  const TokenStream& tokens_;
  int64_t T_, n_windows_;
  uint64_t seed_;
  LoaderState state_;
  std::vector<uint32_t> order_;
};

}  // namespace ggtrain::data
