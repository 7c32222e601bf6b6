#pragma once
// Windows drawn from several prepared sources in proportion to their
// weights (data.sources): window n comes from the source a hash of (seed, n)
// picks, and from there in that source's own seeded order (BatchLoader).
// The whole state is the number of windows drawn and each source's (epoch,
// cursor), so a resumed run draws the same windows. One source is the plain
// BatchLoader: no draw, the same windows in the same order.
#include <cstdint>
#include <memory>
#include <vector>

#include "corpus/batch_loader.h"

namespace ggtrain::corpus {

struct MixtureState {
  uint64_t drawn = 0;  // windows drawn so far (over all sources)
  std::vector<LoaderState> sources;  // each source's position
};

class MixtureLoader {
 public:
  // weights: positive, one per source (normalised here); labels: none, or
  // one per source.
  MixtureLoader(const std::vector<const TokenStream*>& sources, const std::vector<double>& weights, int64_t seq_len,
                uint64_t seed, const std::vector<WindowLabels>& labels = {});
  // inputs, targets (and doc_start, when not null): [B, seq_len];
  // window_ids (when not null): [B], each row's window in its source.
  void next(int64_t B, int32_t* inputs, int32_t* targets, int32_t* doc_start = nullptr, int64_t* window_ids = nullptr);
  MixtureState state() const;
  void set_state(const MixtureState& s);
  size_t n_sources() const { return loaders_.size(); }

 private:
  size_t source_of_next_window() const;
  std::vector<std::unique_ptr<BatchLoader>> loaders_;
  std::vector<double> cumulative_;  // cumulative normalised weights
  int64_t T_;
  uint64_t seed_, drawn_ = 0;
};

}  // namespace ggtrain::corpus
