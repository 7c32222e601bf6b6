// A Run's preference objective (train.objective = dpo, ipo, orpo, simpo):
// the reference paid for once, the step's micro-batches scored pair by pair,
// validation over held-out pairs. Loss and gradients are the mean over the
// step's pairs on every rank and micro-batch split, as with SFT's targets.
#include <algorithm>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "train/preference_reference.h"
#include "train/run.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// The step's sums on every rank: each rank's micro-batch shares added up.
void sum_over_ranks(parallel::DataParallel& dp, PreferenceTotals& t) {
  if (dp.size() == 1) return;
  const double n = double(dp.size());
  for (double* x : {&t.loss, &t.chosen_nll, &t.reward_chosen, &t.reward_rejected, &t.reward_accuracy, &t.reward_margin,
                    &t.logps_chosen, &t.logps_rejected})
    *x = dp.mean_over_ranks(*x) * n;
}

}  // namespace

// DPO and IPO: the initial weights' token losses over both streams, computed
// on a fresh run by rank 0 (before the other ranks start) and read by every
// other rank and on resume.
void Run::load_reference() {
  if (!needs_reference(objective_)) return;
  const int64_t T = c_.train.seq_len;
  const uint64_t model_fp = variant_->base_fingerprint();
  struct Stream {
    const corpus::TokenStream* tokens;
    const corpus::BatchLoader* windows;
    std::vector<float>* ref;
    const char* name;
  };
  std::unique_ptr<corpus::BatchLoader> train_windows =
      std::make_unique<corpus::BatchLoader>(*tokens_.train[0], T, c_.train.seed, tokens_.train_labels());
  const Stream streams[] = {{tokens_.train[0].get(), train_windows.get(), &ref_train_, "train"},
                            {tokens_.val.get(), val_loader_.get(), &ref_val_, "val"}};
  for (const Stream& s : streams) {
    if (!s.tokens || !s.windows) continue;
    const std::string path = fmt::format("{}/data/reference-{}.bin", run_dir_, s.name);
    const ReferenceSource source{model_fp, token_stream_fingerprint(*s.tokens), T};
    if (!resume_ && dp_->root()) {
      const double t0 = now_seconds();
      *s.ref = reference_losses(*s.windows, s.tokens->size());
      write_reference(path, source, *s.ref);
      if (!quiet_)
        fmt::print(stderr, "reference: {} tokens of {} scored by the initial weights in {:.1f} s ({})\n",
                   s.tokens->size(), s.name, now_seconds() - t0, path);
    } else {
      *s.ref = read_reference(path, source, s.tokens->size());
    }
  }
}

// losses[w * T + i + 1] = -log p of window w's target i, for every window,
// in batches of this rank's model.
std::vector<float> Run::reference_losses(const corpus::BatchLoader& windows, int64_t n_tokens) {
  const int64_t T = c_.train.seq_len, B = model_->batch();
  std::vector<float> losses(size_t(n_tokens), 0.f);
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T)), ds(size_t(B * T));
  for (int64_t w0 = 0; w0 < windows.n_windows(); w0 += B) {
    const int64_t rows = std::min(B, windows.n_windows() - w0);
    std::fill(tg.begin(), tg.end(), corpus::kNoTarget);  // a last, partial batch: rows past the end count nothing
    for (int64_t b = 0; b < B; ++b)
      windows.window(std::min(w0 + b, windows.n_windows() - 1), in.data() + b * T, tg.data() + b * T,
                     ds.data() + b * T);
    for (int64_t b = rows; b < B; ++b) std::fill(tg.begin() + b * T, tg.begin() + (b + 1) * T, corpus::kNoTarget);
    model_->forward_scores(in.data(), tg.data(), ds.data());
    for (int64_t b = 0; b < rows; ++b)
      std::copy(model_->token_losses() + b * T, model_->token_losses() + (b + 1) * T,
                losses.begin() + (w0 + b) * T + 1);
  }
  return losses;
}

const float* Run::reference_rows(const std::vector<float>& ref, const int64_t* window_ids) {
  if (!needs_reference(objective_)) return nullptr;
  const int64_t T = c_.train.seq_len, B = model_->batch();
  ref_rows_.resize(size_t(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t w = window_ids[b];
    std::copy(ref.begin() + w * T + 1, ref.begin() + w * T + 1 + T, ref_rows_.begin() + b * T);
  }
  return ref_rows_.data();
}

// The step's micro-batches (drawn by train_step into inputs_, targets_,
// doc_start_, window_ids_): each pair's loss over the step's pairs counted
// on every rank, as per-position weights into the model's backward.
void Run::preference_micro_batches(StepResult& r) {
  const auto& t = c_.train;
  const int64_t T = t.seq_len, micro = t.batch * T, B = model_->batch();
  PairCounts step;
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    const PairCounts c = count_pairs(targets_.data() + k * micro, doc_start_.data() + k * micro, t.batch, T);
    step.pairs += c.pairs;
    step.chosen_tokens += c.chosen_tokens;
  }
  const int64_t first_row = (dp_->local(targets_.data()) - targets_.data()) / T;
  d_token_loss_.resize(size_t(B * T));
  PreferenceTotals mine;
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    dp_->begin_micro_batch(k + 1 == t.grad_accum);
    const int32_t* targets = dp_->local(targets_.data() + k * micro);
    const int32_t* doc_start = dp_->local(doc_start_.data() + k * micro);
    model_->forward_scores(dp_->local(inputs_.data() + k * micro), targets, doc_start);
    const float* ref = reference_rows(ref_train_, window_ids_.data() + k * t.batch + first_row);
    std::fill(d_token_loss_.begin(), d_token_loss_.end(), 0.f);
    score_pairs(objective_, pref_, find_pairs(targets, doc_start, B, T), targets, model_->token_losses(), ref,
                std::max<int64_t>(1, step.pairs), std::max<int64_t>(1, step.chosen_tokens), mine, d_token_loss_.data());
    model_->backward_weighted(d_token_loss_.data());
  }
  // This rank's share of the step's objective; train_step sums the shares.
  r.loss = mine.loss / double(std::max<int64_t>(1, step.pairs));
  if (adds_chosen_nll(objective_)) r.loss += mine.chosen_nll / double(std::max<int64_t>(1, step.chosen_tokens));
  r.pref = mine;
  r.pref.pairs = step.pairs;
  r.pref.chosen_tokens = step.chosen_tokens;
  sum_over_ranks(*dp_, r.pref);
}

// Validation pairs: the objective's mean and TRL's rewards over the first
// train.eval_batches batches of held-out windows.
PreferenceTotals Run::preference_validation() {
  PreferenceTotals all;
  if (!val_loader_) return all;
  const int64_t B = c_.train.batch, T = c_.train.seq_len;
  const int64_t n_batches = std::min(c_.train.eval_batches, val_loader_->n_windows() / B);
  const int64_t first_row = (dp_->local(targets_.data()) - targets_.data()) / T;
  std::vector<int64_t> windows(static_cast<size_t>(B));
  for (int64_t i = 0; i < n_batches; ++i) {
    for (int64_t b = 0; b < B; ++b) {
      windows[size_t(b)] = i * B + b;
      val_loader_->window(i * B + b, inputs_.data() + b * T, targets_.data() + b * T, doc_start_.data() + b * T);
    }
    const int32_t* targets = dp_->local(targets_.data());
    const int32_t* doc_start = dp_->local(doc_start_.data());
    model_->forward_scores(dp_->local(inputs_.data()), targets, doc_start);
    const float* ref = reference_rows(ref_val_, windows.data() + first_row);
    score_pairs(objective_, pref_, find_pairs(targets, doc_start, model_->batch(), T), targets, model_->token_losses(),
                ref, 1, 1, all, nullptr);
  }
  const int64_t pairs = all.pairs, chosen_tokens = all.chosen_tokens;
  sum_over_ranks(*dp_, all);
  all.pairs = int64_t(dp_->mean_over_ranks(double(pairs)) * double(dp_->size()) + 0.5);
  all.chosen_tokens = int64_t(dp_->mean_over_ranks(double(chosen_tokens)) * double(dp_->size()) + 0.5);
  return all;
}

// TRL's names: rewards/chosen, rewards/rejected, rewards/accuracies,
// rewards/margins, logps/chosen, logps/rejected (means over the pairs).
void Run::log_preference(nlohmann::json& record, const PreferenceTotals& t, const char* prefix) const {
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

}  // namespace ggtrain::train
