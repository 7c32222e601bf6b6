// train.objective = "sft" (every run that is not preference tuning): the
// mean next-token cross-entropy over the step's counted targets, on every
// rank and micro-batch split; validation reports it with perplexity and
// bits per byte.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "train/objective.h"

namespace ggtrain::train {

namespace {

class SftObjective : public TrainingObjective {
 public:
  explicit SftObjective(const ObjectiveContext& ctx) : ctx_(ctx) {}

  // Micro-batch k of this rank weighs in with its counted targets over the
  // step's (all ranks', all micro-batches').
  StepTerms step(const StepBatches& b) override {
    const auto& t = ctx_.config.train;
    const int64_t micro = t.batch * t.seq_len;
    const int64_t counted =
        t.grad_accum * micro - std::count(b.targets, b.targets + t.grad_accum * micro, corpus::kNoTarget);
    auto& dp = ctx_.dp;
    StepTerms r;
    double router_aux = 0;  // the load-balancing loss, unweighted: the mean over this rank's micro-batches
    for (int64_t k = 0; k < t.grad_accum; ++k) {
      dp.begin_micro_batch(k + 1 == t.grad_accum);
      const float mean = ctx_.model.forward(dp.local(b.inputs + k * micro), dp.local(b.targets + k * micro),
                                            ctx_.documents ? dp.local(b.doc_start + k * micro) : nullptr);
      const float weight = counted > 0 ? float(ctx_.model.counted_targets()) / float(counted) : 0.f;
      r.loss += double(mean) * double(weight);
      router_aux += double(ctx_.model.aux_loss()) / double(t.grad_accum);
      ctx_.model.backward(weight);
    }
    if (ctx_.model.config().has_experts()) {
      r.metrics["router_aux"] = router_aux;
      r.progress = fmt::format(" | router aux {:.4f}", router_aux);
    }
    return r;
  }

  // The mean loss over the counted targets, and that total in bits over
  // their bytes.
  std::optional<ValidationResult> validate() override {
    const auto* windows = ctx_.val_loader;
    if (!windows) return std::nullopt;
    const int64_t B = ctx_.config.train.batch, T = ctx_.config.train.seq_len;
    const int64_t n_batches = std::min(ctx_.config.train.eval_batches, windows->n_windows() / B);
    if (n_batches == 0) return std::nullopt;
    inputs_.resize(size_t(B * T));
    targets_.resize(size_t(B * T));
    doc_start_.resize(size_t(B * T));
    auto& dp = ctx_.dp;
    double sum = 0, counted = 0, bytes = 0;  // over every counted target of the batches
    for (int64_t i = 0; i < n_batches; ++i) {
      for (int64_t b = 0; b < B; ++b)
        windows->window(i * B + b, inputs_.data() + b * T, targets_.data() + b * T, doc_start_.data() + b * T);
      const int32_t* targets = dp.local(targets_.data());
      const double mean = ctx_.model.evaluate(dp.local(inputs_.data()), targets,
                                              ctx_.documents ? dp.local(doc_start_.data()) : nullptr);
      sum += mean * double(ctx_.model.counted_targets());
      counted += double(ctx_.model.counted_targets());
      for (int64_t k = 0; k < ctx_.model.batch() * T; ++k)
        if (targets[k] != corpus::kNoTarget) bytes += ctx_.token_bytes[size_t(targets[k])];
    }
    // Means over the ranks of each total: their ratios are the ratios of the sums.
    const double all = dp.mean_over_ranks(counted), nats = dp.mean_over_ranks(sum);
    const double all_bytes = dp.mean_over_ranks(bytes);
    if (all <= 0) return std::nullopt;
    const double loss = nats / all, bpb = all_bytes > 0 ? nats / std::log(2.0) / all_bytes : NAN;
    if (!std::isfinite(loss)) return std::nullopt;
    ValidationResult v;
    v.loss = loss;
    v.metrics = {{"val_loss", loss}, {"val_ppl", std::exp(loss)}, {"val_bpb", bpb}};
    v.best_candidates = {{"val_loss", loss}, {"bpb", bpb}};
    v.line = fmt::format("loss {:.4f}, perplexity {:.2f}, {:.4f} bits per byte", loss, std::exp(loss), bpb);
    return v;
  }

 private:
  const ObjectiveContext ctx_;
  std::vector<int32_t> inputs_, targets_, doc_start_;  // a validation batch
};

}  // namespace

std::unique_ptr<TrainingObjective> make_sft_objective(const ObjectiveContext& ctx) {
  return std::make_unique<SftObjective>(ctx);
}

std::unique_ptr<TrainingObjective> make_objective(const ObjectiveContext& ctx) {
  switch (ctx.config.train.objective) {
    case Objective::kSft: return make_sft_objective(ctx);
    case Objective::kDistill: return make_distill_objective(ctx);
    default: return make_preference_objective(ctx);
  }
}

}  // namespace ggtrain::train
