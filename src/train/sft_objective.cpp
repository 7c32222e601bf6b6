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
  explicit SftObjective(const ObjectiveContext& ctx) : ctx_(ctx), val_(ctx_) {}

  // Micro-batch k of this rank weighs in with its counted targets over the
  // step's (all ranks', all micro-batches').
  StepTerms step(const StepBatches& b) override {
    const auto& t = ctx_.config.train;
    const int64_t micro = t.batch * t.seq_len, counted = counted_targets(b, t);
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
    if (val_.count() == 0) return std::nullopt;
    auto& dp = ctx_.dp;
    const int64_t T = ctx_.config.train.seq_len;
    double sum = 0, counted = 0, bytes = 0;  // over every counted target of the batches
    for (int64_t i = 0; i < val_.count(); ++i) {
      val_.load(i);
      const int32_t* targets = val_.targets();
      const double mean = ctx_.model.evaluate(val_.inputs(), targets, val_.documents());
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
  ValidationBatches val_;
};

}  // namespace

std::unique_ptr<TrainingObjective> make_sft_objective(const ObjectiveContext& ctx) {
  return std::make_unique<SftObjective>(ctx);
}

}  // namespace ggtrain::train
