// train.objective = dpo, ipo, orpo or simpo: the reference paid for once,
// the step's micro-batches scored pair by pair, validation over held-out
// pairs. Loss and gradients are the mean over the step's pairs on every
// rank and micro-batch split, as with SFT's targets.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "train/objective.h"
#include "train/preference_batch.h"
#include "train/preference_loss.h"
#include "train/preference_reference.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// The step's sums on every rank: each rank's micro-batch shares added up.
void sum_over_ranks(parallel::DataParallel& dp, PreferenceTotals& t) {
  if (dp.size() == 1) return;
  for (double* x : {&t.loss, &t.chosen_nll, &t.reward_chosen, &t.reward_rejected, &t.reward_accuracy, &t.reward_margin,
                    &t.logps_chosen, &t.logps_rejected})
    *x = dp.sum_over_ranks(*x);
}

class PreferenceObjective : public TrainingObjective {
 public:
  explicit PreferenceObjective(const ObjectiveContext& ctx)
      : ctx_(ctx),
        objective_(ctx.config.train.objective),
        params_{ctx.config.train.beta, ctx.config.train.label_smoothing, ctx.config.train.simpo_gamma},
        val_(ctx_) {}

  void prepare() override { load_reference(); }
  StepTerms step(const StepBatches& b) override;
  std::optional<ValidationResult> validate() override;

 private:
  void load_reference();
  std::vector<float> reference_losses(const corpus::BatchLoader& windows, int64_t n_tokens);
  const float* reference_rows(const std::vector<float>& ref, const int64_t* window_ids);
  void add_metrics(nlohmann::json& record, const PreferenceTotals& t, const char* prefix) const;

  const ObjectiveContext ctx_;
  const Objective objective_;
  const PreferenceParams params_;
  // DPO and IPO: the reference's -log p of each token of the training and
  // validation streams (train/preference_reference.h).
  std::vector<float> ref_train_, ref_val_;
  std::vector<float> ref_rows_, d_token_loss_;  // [local batch, T] scratch of a micro-batch
  ValidationBatches val_;
};

// DPO and IPO: the initial weights' token losses over both streams, computed
// on a fresh run by rank 0 (before the other ranks start) and read by every
// other rank and on resume.
void PreferenceObjective::load_reference() {
  if (!needs_reference(objective_)) return;
  const int64_t T = ctx_.config.train.seq_len;
  const uint64_t model_fp = ctx_.variant.base_fingerprint();
  struct Stream {
    const corpus::TokenStream* tokens;
    const corpus::BatchLoader* windows;
    std::vector<float>* ref;
    const char* name;
  };
  const corpus::BatchLoader train_windows(*ctx_.tokens.train[0], T, ctx_.config.train.seed, ctx_.tokens.train_labels());
  const Stream streams[] = {{ctx_.tokens.train[0].get(), &train_windows, &ref_train_, "train"},
                            {ctx_.tokens.val.get(), ctx_.val_loader, &ref_val_, "val"}};
  for (const Stream& s : streams) {
    if (!s.tokens || !s.windows) continue;
    const std::string path = fmt::format("{}/data/reference-{}.bin", ctx_.run_dir, s.name);
    const ReferenceSource source{model_fp, token_stream_fingerprint(*s.tokens), T};
    if (!ctx_.resume && ctx_.dp.root()) {
      const double t0 = now_seconds();
      *s.ref = reference_losses(*s.windows, s.tokens->size());
      write_reference(path, source, *s.ref);
      if (!ctx_.quiet)
        fmt::print(stderr, "reference: {} tokens of {} scored by the initial weights in {:.1f} s ({})\n",
                   s.tokens->size(), s.name, now_seconds() - t0, path);
    } else {
      *s.ref = read_reference(path, source, s.tokens->size());
    }
  }
}

// losses[w * T + i + 1] = -log p of window w's target i, for every window,
// in batches of this rank's model.
std::vector<float> PreferenceObjective::reference_losses(const corpus::BatchLoader& windows, int64_t n_tokens) {
  auto& model = ctx_.model;
  const int64_t T = ctx_.config.train.seq_len, B = model.batch();
  std::vector<float> losses(size_t(n_tokens), 0.f);
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T)), ds(size_t(B * T));
  for (int64_t w0 = 0; w0 < windows.n_windows(); w0 += B) {
    const int64_t rows = std::min(B, windows.n_windows() - w0);
    std::fill(tg.begin(), tg.end(), corpus::kNoTarget);  // a last, partial batch: rows past the end count nothing
    for (int64_t b = 0; b < B; ++b)
      windows.window(std::min(w0 + b, windows.n_windows() - 1), in.data() + b * T, tg.data() + b * T,
                     ds.data() + b * T);
    for (int64_t b = rows; b < B; ++b) std::fill(tg.begin() + b * T, tg.begin() + (b + 1) * T, corpus::kNoTarget);
    model.forward_scores(in.data(), tg.data(), ds.data());
    for (int64_t b = 0; b < rows; ++b)
      std::copy(model.token_losses() + b * T, model.token_losses() + (b + 1) * T, losses.begin() + (w0 + b) * T + 1);
  }
  return losses;
}

const float* PreferenceObjective::reference_rows(const std::vector<float>& ref, const int64_t* window_ids) {
  if (!needs_reference(objective_)) return nullptr;
  const int64_t T = ctx_.config.train.seq_len, B = ctx_.model.batch();
  ref_rows_.resize(size_t(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t w = window_ids[b];
    std::copy(ref.begin() + w * T + 1, ref.begin() + w * T + 1 + T, ref_rows_.begin() + b * T);
  }
  return ref_rows_.data();
}

// Each pair's loss over the step's pairs counted on every rank, as
// per-position weights into the model's backward.
StepTerms PreferenceObjective::step(const StepBatches& b) {
  const auto& t = ctx_.config.train;
  auto& dp = ctx_.dp;
  auto& model = ctx_.model;
  const int64_t T = t.seq_len, micro = t.batch * T, B = model.batch();
  PairCounts step;
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    const PairCounts c = count_pairs(b.targets + k * micro, b.doc_start + k * micro, t.batch, T);
    step.pairs += c.pairs;
    step.chosen_tokens += c.chosen_tokens;
  }
  d_token_loss_.resize(size_t(B * T));
  PreferenceTotals mine;
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    dp.begin_micro_batch(k + 1 == t.grad_accum);
    const int32_t* targets = dp.local(b.targets + k * micro);
    const int32_t* doc_start = dp.local(b.doc_start + k * micro);
    model.forward_scores(dp.local(b.inputs + k * micro), targets, doc_start);
    const float* ref = reference_rows(ref_train_, b.window_ids + k * t.batch + dp.first_row());
    std::fill(d_token_loss_.begin(), d_token_loss_.end(), 0.f);
    score_pairs(objective_, params_, find_pairs(targets, doc_start, B, T), targets, model.token_losses(), ref,
                std::max<int64_t>(1, step.pairs), std::max<int64_t>(1, step.chosen_tokens), mine, d_token_loss_.data());
    model.backward_weighted(d_token_loss_.data());
  }
  StepTerms r;
  // This rank's share of the step's objective; the trainer sums the shares.
  r.loss = mine.loss / double(std::max<int64_t>(1, step.pairs));
  if (adds_chosen_nll(objective_)) r.loss += mine.chosen_nll / double(std::max<int64_t>(1, step.chosen_tokens));
  PreferenceTotals all = mine;
  all.pairs = step.pairs;
  all.chosen_tokens = step.chosen_tokens;
  sum_over_ranks(dp, all);
  add_metrics(r.metrics, all, "");
  if (all.pairs > 0)
    r.progress = fmt::format(" | reward acc {:.2f} margin {:.3f}", all.reward_accuracy / double(all.pairs),
                             all.reward_margin / double(all.pairs));
  return r;
}

// The objective's mean and TRL's rewards over the first train.eval_batches
// batches of held-out windows.
std::optional<ValidationResult> PreferenceObjective::validate() {
  auto& dp = ctx_.dp;
  auto& model = ctx_.model;
  const int64_t T = ctx_.config.train.seq_len;
  PreferenceTotals all;
  for (int64_t i = 0; i < val_.count(); ++i) {
    val_.load(i);
    const int32_t* targets = val_.targets();
    const int32_t* doc_start = val_.doc_start();
    model.forward_scores(val_.inputs(), targets, doc_start);
    const float* ref = reference_rows(ref_val_, val_.window_ids());
    score_pairs(objective_, params_, find_pairs(targets, doc_start, model.batch(), T), targets, model.token_losses(),
                ref, 1, 1, all, nullptr);
  }
  const int64_t pairs = all.pairs, chosen_tokens = all.chosen_tokens;
  sum_over_ranks(dp, all);
  all.pairs = int64_t(dp.sum_over_ranks(double(pairs)) + 0.5);
  all.chosen_tokens = int64_t(dp.sum_over_ranks(double(chosen_tokens)) + 0.5);
  if (all.pairs == 0) return std::nullopt;
  ValidationResult v;
  v.loss = all.loss / double(all.pairs);
  if (adds_chosen_nll(objective_)) v.loss += all.chosen_nll / double(std::max<int64_t>(1, all.chosen_tokens));
  v.metrics["val_loss"] = v.loss;
  add_metrics(v.metrics, all, "val_");
  v.best_candidates = {{"val_loss", v.loss}};
  v.line = fmt::format("loss {:.4f}, reward accuracy {:.3f}, margin {:.4f} over {} pairs", v.loss,
                       all.reward_accuracy / double(all.pairs), all.reward_margin / double(all.pairs), all.pairs);
  return v;
}

// TRL's names: rewards/chosen, rewards/rejected, rewards/accuracies,
// rewards/margins, logps/chosen, logps/rejected (means over the pairs).
void PreferenceObjective::add_metrics(nlohmann::json& record, const PreferenceTotals& t, const char* prefix) const {
  if (t.pairs == 0) return;
  const double n = double(t.pairs);
  const std::string p = prefix;
  record[p + "rewards/chosen"] = t.reward_chosen / n;
  record[p + "rewards/rejected"] = t.reward_rejected / n;
  record[p + "rewards/accuracies"] = t.reward_accuracy / n;
  record[p + "rewards/margins"] = t.reward_margin / n;
  record[p + "logps/chosen"] = t.logps_chosen / n;
  record[p + "logps/rejected"] = t.logps_rejected / n;
  record[p + "pairs"] = t.pairs;
  if (adds_chosen_nll(objective_) && t.chosen_tokens > 0)
    record[p + "nll_loss"] = t.chosen_nll / double(t.chosen_tokens);
}

}  // namespace

std::unique_ptr<TrainingObjective> make_preference_objective(const ObjectiveContext& ctx) {
  return std::make_unique<PreferenceObjective>(ctx);
}

}  // namespace ggtrain::train
