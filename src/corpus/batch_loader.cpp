#include "corpus/batch_loader.h"

#include <vector>

#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::corpus {

BatchLoader::BatchLoader(const TokenStream& tokens, int64_t seq_len, uint64_t seed, const WindowLabels& labels)
    : tokens_(tokens), labels_(labels), T_(seq_len), n_windows_((tokens.size() - 1) / seq_len), seed_(seed) {
  if (tokens.size() < 2 || n_windows_ < 1)
    fail("{}: {} tokens are too few for one sequence of {}", tokens.describe(), tokens.size(), seq_len);
  if (labels.flags && (labels.flags->size() != tokens.size() || labels.flags->vocab() > 4))
    fail("{}: {} flags for {} tokens (or flags beyond 3): not the flags of these tokens", labels.flags->describe(),
         labels.flags->size(), tokens.size());
  if (labels.flags) flags_.resize(size_t(seq_len + 1));
  shuffle_for_epoch();
}

void BatchLoader::shuffle_for_epoch() {
  order_.resize(size_t(n_windows_));
  for (int64_t i = 0; i < n_windows_; ++i) order_[size_t(i)] = uint32_t(i);
  Rng rng(seed_ ^ (0x9e3779b97f4a7c15ULL * (state_.epoch + 1)));
  for (int64_t i = n_windows_ - 1; i > 0; --i) {  // Fisher-Yates
    int64_t j = int64_t(rng.next_u64() % uint64_t(i + 1));
    std::swap(order_[size_t(i)], order_[size_t(j)]);
  }
}

void BatchLoader::window(int64_t w, int32_t* inputs, int32_t* targets, int32_t* doc_start) const {
  tokens_.read(w * T_, T_, inputs);
  tokens_.read(w * T_ + 1, T_, targets);
  apply_labels(w, inputs, targets, doc_start);
}

void BatchLoader::apply_labels(int64_t w, const int32_t* inputs, int32_t* targets, int32_t* doc_start) const {
  if (labels_.flags) {
    labels_.flags->read(w * T_, T_ + 1, flags_.data());
    for (int64_t t = 0; t < T_; ++t)
      if (!(flags_[size_t(t + 1)] & kFlagTrained)) targets[t] = kNoTarget;
  }
  if (!doc_start) return;
  int32_t start = 0;
  for (int64_t t = 0; t < T_; ++t) {
    const bool starts = labels_.flags ? (flags_[size_t(t)] & kFlagExampleStart) != 0
                                      : labels_.document_token >= 0 && inputs[t] == labels_.document_token;
    if (starts) start = int32_t(t);
    doc_start[t] = start;
  }
}

void BatchLoader::next(int64_t B, int32_t* inputs, int32_t* targets, int32_t* doc_start, int64_t* window_ids) {
  for (int64_t b = 0; b < B; ++b) {
    if (state_.cursor >= uint64_t(n_windows_)) {
      state_.epoch++;
      state_.cursor = 0;
      shuffle_for_epoch();
    }
    const uint32_t w = order_[state_.cursor++];
    if (window_ids) window_ids[b] = int64_t(w);
    window(w, inputs + b * T_, targets + b * T_, doc_start ? doc_start + b * T_ : nullptr);
  }
}

void BatchLoader::set_state(const LoaderState& s) {
  if (s.cursor > uint64_t(n_windows_))
    fail("{}: saved data position {} is past the {} windows of the corpus", tokens_.describe(), s.cursor, n_windows_);
  state_ = s;
  shuffle_for_epoch();
}

}  // namespace ggtrain::corpus
