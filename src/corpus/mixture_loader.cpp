#include "corpus/mixture_loader.h"

#include <algorithm>

#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::corpus {

MixtureLoader::MixtureLoader(const std::vector<const TokenStream*>& sources, const std::vector<double>& weights,
                             int64_t seq_len, uint64_t seed, const std::vector<WindowLabels>& labels)
    : T_(seq_len), seed_(seed) {
  if (!labels.empty() && labels.size() != sources.size())
    fail("data: {} sources with {} sets of labels", sources.size(), labels.size());
  if (sources.empty() || sources.size() != weights.size())
    fail("data: {} sources with {} weights", sources.size(), weights.size());
  double total = 0;
  for (double w : weights) {
    if (!(w > 0)) fail("data.sources: every weight must be positive, got {}", w);
    total += w;
  }
  double sum = 0;
  for (size_t k = 0; k < sources.size(); ++k) {
    // Source k's order is drawn from seed + k: source 0 keeps the seed of a
    // single-source run.
    loaders_.push_back(
        std::make_unique<BatchLoader>(*sources[k], seq_len, seed + k, labels.empty() ? WindowLabels{} : labels[k]));
    sum += weights[k] / total;
    cumulative_.push_back(sum);
  }
  cumulative_.back() = 1.0;
}

size_t MixtureLoader::source_of_next_window() const {
  if (loaders_.size() == 1) return 0;
  Rng h(seed_ ^ (0xa0761d6478bd642fULL * (drawn_ + 1)));
  const double u = h.uniform();
  return size_t(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
}

void MixtureLoader::next(int64_t B, int32_t* inputs, int32_t* targets, int32_t* doc_start, int64_t* window_ids) {
  for (int64_t b = 0; b < B; ++b) {
    const size_t k = std::min(source_of_next_window(), loaders_.size() - 1);
    loaders_[k]->next(1, inputs + b * T_, targets + b * T_, doc_start ? doc_start + b * T_ : nullptr,
                      window_ids ? window_ids + b : nullptr);
    ++drawn_;
  }
}

MixtureState MixtureLoader::state() const {
  MixtureState s;
  s.drawn = drawn_;
  for (const auto& l : loaders_) s.sources.push_back(l->state());
  return s;
}

void MixtureLoader::set_state(const MixtureState& s) {
  if (s.sources.size() != loaders_.size())
    fail("the saved data position holds {} sources, the run has {} (data.sources changed?)", s.sources.size(),
         loaders_.size());
  for (size_t k = 0; k < loaders_.size(); ++k) loaders_[k]->set_state(s.sources[k]);
  drawn_ = s.drawn;
}

}  // namespace ggtrain::corpus
