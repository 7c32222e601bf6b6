#include "train/objective.h"

#include <algorithm>

namespace ggtrain::train {

int64_t counted_targets(const StepBatches& b, const TrainSection& t) {
  const int64_t n = t.tokens_per_step();
  return n - std::count(b.targets, b.targets + n, corpus::kNoTarget);
}

ValidationBatches::ValidationBatches(const ObjectiveContext& ctx) : ctx_(ctx) {
  if (!ctx.val_loader) return;
  const int64_t B = ctx.config.train.batch, T = ctx.config.train.seq_len;
  count_ = std::min(ctx.config.train.eval_batches, ctx.val_loader->n_windows() / B);
  inputs_.resize(size_t(B * T));
  targets_.resize(inputs_.size());
  doc_start_.resize(inputs_.size());
  window_ids_.resize(size_t(B));
}

void ValidationBatches::load(int64_t i) {
  const int64_t B = ctx_.config.train.batch, T = ctx_.config.train.seq_len;
  for (int64_t b = 0; b < B; ++b) {
    window_ids_[size_t(b)] = i * B + b;
    ctx_.val_loader->window(i * B + b, inputs_.data() + b * T, targets_.data() + b * T, doc_start_.data() + b * T);
  }
}

std::unique_ptr<TrainingObjective> make_objective(const ObjectiveContext& ctx) {
  switch (ctx.config.train.objective) {
    case Objective::kSft: return make_sft_objective(ctx);
    case Objective::kDistill: return make_distill_objective(ctx);
    case Objective::kGrpo: return make_grpo_objective(ctx);
    default: return make_preference_objective(ctx);
  }
}

}  // namespace ggtrain::train
