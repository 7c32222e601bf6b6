// The training loop (Run::loop): step, log, maybe evaluate, maybe sample,
// maybe checkpoint; the run it drives is assembled in run_setup.cpp.
#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "eval/choice_score.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "model/checkpoint.h"
#include "model/donor.h"
#include "optim/adamw.h"
#include "parallel/distributed.h"
#include "train/run.h"
#include "train/run_folder.h"
#include "util/clock.h"
#include "util/cpu_level.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// Without a terminal, the longest a run stays silent between progress lines.
constexpr double kProgressEverySeconds = 10.0;

}  // namespace

TrainSummary Run::loop(StopSignals& signals) {
  const auto& t = c_.train;
  schedule_ = lr_schedule_of(t);
  summary_.first_step = start_step_;
  summary_.planned_steps = t.steps;
  loop_start_s_ = now_seconds();
  write_status(RunState::kRunning, start_step_, "");
  objective_->start();
  signals.arm();
  if (start_step_ == 0) {
    maybe_score_tasks(0);  // the starting weights' task scores, for a before and after
    maybe_checkpoint(0, false);  // under checkpoint.keep_best, their score is the one to beat
  }
  for (int64_t step = start_step_; step < t.steps; ++step) {
    const StepResult r = train_step(step);
    log_step(r);
    maybe_evaluate(r.step);
    maybe_score_tasks(r.step);
    maybe_sample(r.step);
    const int sig = int(dp_->max_over_ranks(signals.caught()));  // every rank stops at the same step
    const bool stopping = (stop_at_ > 0 && r.step == stop_at_) || sig != 0;
    maybe_checkpoint(r.step, stopping);
    if (sig != 0 && r.step < t.steps) report_interruption(sig, r.step);
    else if (stopping && r.step < t.steps && dp_->root())
      fmt::print(stderr,
                 "{}stopped after step {}/{} (--stop-at) with checkpoint {}\n"
                 "continue with: ggtrain train --resume --run-dir {}\n",
                 tty_ && !quiet_ ? "\n" : "", r.step, t.steps, weights_path(run_dir_, r.step), shell_word(run_dir_));
    if (stopping) break;
  }
  if (tty_ && !quiet_) fmt::print(stderr, "\n");
  summary_.last_step = latest_step(run_dir_);
  summary_.final_weights = weights_path(run_dir_, summary_.last_step);
  if (summary_.last_step >= t.steps) write_status(RunState::kFinished, summary_.last_step, "");
  else
    write_status(RunState::kStopped, summary_.last_step,
                 summary_.interrupted_by ? fmt::format("{} received", signal_name(summary_.interrupted_by))
                                         : std::string("--stop-at"));
  return summary_;
}

void Run::write_status(RunState state, int64_t step, const std::string& message) {
  if (dp_->root()) write_run_status(run_dir_, current_process_status(state, step, c_.train.steps, message));
}

void Run::record_failure(const std::string& why) {
  try {
    write_status(RunState::kFailed, latest_step(run_dir_), why);
  } catch (const std::exception&) {
    // The failure being reported matters more than its record (a full disk).
  }
}

// Forward and backward over train.grad_accum micro-batches, the gradients
// reduced over ranks, clipped, and AdamW, unless the loss or the gradient
// norm is not finite.
StepResult Run::train_step(int64_t step) {
  const auto& t = c_.train;
  const double t0 = now_seconds();
  StepResult r;
  r.step = step + 1;
  r.lr = schedule_.lr_at(step - schedule_origin_);
  model_->zero_grad();
  // Every rank draws the step's global micro-batches, so each knows the
  // step's totals (targets, pairs) without communicating.
  const int64_t micro = t.batch * t.seq_len;
  for (int64_t k = 0; k < t.grad_accum && objective_->draws_windows(r.step); ++k)
    loader_->next(t.batch, inputs_.data() + k * micro, targets_.data() + k * micro, doc_start_.data() + k * micro,
                  window_ids_.data() + k * t.batch);
  // train.qat: the forward and backward see the weights as the export
  // stores them; the update below applies their gradient to the masters.
  StepTerms terms;
  if (qat_ && qat_->due(step)) qat_->requantize_next();
  {
    const QuantizedScope quantized(qat_.get(), model_->params());
    terms = objective_->step({inputs_.data(), targets_.data(), doc_start_.data(), window_ids_.data(), r.step});
  }
  if (qat_) terms.metrics["qat_s"] = qat_->last_seconds();
  r.loss = terms.loss;
  r.metrics = std::move(terms.metrics);
  r.progress = std::move(terms.progress);
  const auto reduced = reduce_step(*dp_, faults_, r.step, r.loss);
  r.loss = reduced.loss;
  r.grad_norm = reduced.grad_norm;
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.finite) {
    nonfinite_in_a_row_ = 0;
    dp_->update(*optimizer_, r.lr, optim::clip_scale(r.grad_norm, t.grad_clip));
  } else {
    handle_nonfinite(r);
  }
  r.seconds = now_seconds() - t0;
  return r;
}

// train.on_nonfinite: "stop" fails naming the last intact checkpoint;
// "skip" leaves the weights as they were, up to train.max_nonfinite steps in
// a row.
void Run::handle_nonfinite(const StepResult& r) {
  const auto& t = c_.train;
  const std::string what =
      fmt::format("step {}: loss {:.6g} / gradient norm {:.6g} is not finite", r.step, r.loss, r.grad_norm);
  if (t.on_nonfinite != NonfinitePolicy::kSkip)
    fail("{}; stopping (train.on_nonfinite = \"stop\"); {}. To skip such steps instead, set "
         "train.on_nonfinite = \"skip\"",
         what, last_checkpoint_text(run_dir_));
  ++nonfinite_in_a_row_;
  ++summary_.nonfinite_steps;
  if (nonfinite_in_a_row_ >= t.max_nonfinite)
    fail("{}; {} non-finite steps in a row (train.max_nonfinite = {}); stopping; {}", what, nonfinite_in_a_row_,
         t.max_nonfinite, last_checkpoint_text(run_dir_));
  if (!quiet_)
    fmt::print(stderr, "{}{}; update skipped ({} in a row, at most {})\n", tty_ ? "\n" : "", what, nonfinite_in_a_row_,
               t.max_nonfinite);
}

// metrics.jsonl, the summary, and the progress line: every step on a
// terminal; otherwise the first step, every 10th, the last, and any step
// 10 s after the previous line, so that a slow run is never silent long.
void Run::log_step(const StepResult& r) {
  const auto& t = c_.train;
  const int64_t tokens_per_step = t.tokens_per_step();
  const double tps = double(tokens_per_step) / r.seconds;
  train_seconds_ += r.seconds;
  nlohmann::json record{{"step", r.step},      {"loss", r.loss},
                        {"lr", r.lr},          {"grad_norm", r.grad_norm},
                        {"tokens_per_s", tps}, {"elapsed_s", now_seconds() - loop_start_s_}};
  if (r.step == start_step_ + 1) record["cpu_level"] = built_cpu_level();  // which build of the engine ran
  record.update(r.metrics);
  if (!r.finite) {  // NaN/Inf are written as null; the counters say why
    record["skipped"] = true;
    record["nonfinite_in_a_row"] = nonfinite_in_a_row_;
    record["nonfinite_steps"] = summary_.nonfinite_steps;
  }
  metrics_->log_step(record);
  if (r.finite) {  // a skipped step's NaN would hide the run's progress in the summary
    if (summary_.first_loss == 0) summary_.first_loss = r.loss;
    summary_.last_loss = r.loss;
  }
  summary_.tokens_per_s = double(tokens_per_step * (r.step - start_step_)) / train_seconds_;
  const bool due = tty_ || r.step == start_step_ + 1 || r.step % 10 == 0 || r.step == t.steps ||
                   now_seconds() - last_progress_s_ >= kProgressEverySeconds;
  if (!quiet_ && due) {
    last_progress_s_ = now_seconds();
    const double eta = (now_seconds() - loop_start_s_) / double(r.step - start_step_) * double(t.steps - r.step);
    fmt::print(stderr, "{}step {:>6}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}{}",
               tty_ ? "\r" : "", r.step, t.steps, r.loss, r.progress, r.lr, r.grad_norm, tps, duration_text(eta),
               tty_ ? "   " : "\n");
  }
}

void Run::maybe_evaluate(int64_t step) {
  const auto& t = c_.train;
  if (t.eval_every <= 0 || (step % t.eval_every != 0 && step != t.steps)) return;
  std::optional<ValidationResult> v;
  {
    const QuantizedScope quantized(qat_.get(), model_->params());  // the loss of the weights as they will ship
    v = objective_->validate();
  }
  if (!v) return;
  nlohmann::json record = v->metrics;
  record["step"] = step;
  metrics_->log_eval(record);
  summary_.last_val_loss = v->loss;
  for (const auto& [metric, value] : v->best_candidates)
    if (c_.checkpoint.keep_best == metric) offer_best(metric, value);
  if (!quiet_) fmt::print(stderr, "{}validation at step {}: {}\n", tty_ ? "\n" : "", step, v->line);
}

void Run::with_decoder(int64_t n_ctx, const std::function<void(infer::Decoder&)>& f) {
  // train.qat: samples, task scores and rollouts come from the weights as
  // they will ship (already so inside a step).
  const QuantizedScope quantized(qat_.get(), model_->params());
  // The decoder runs a standard model: a donor's lens folded in first.
  const std::optional<model::FoldedModel> folded = variant_->fold(mc_, model_->layout(), model_->params());
  infer::Decoder dec(folded ? folded->config : mc_, folded ? folded->params.data() : model_->params(),
                     folded ? nullptr : variant_->held(), n_ctx);
  f(dec);
}

// Each train.eval_tasks file every its `every` steps, before the first step
// of a new run and at the end: one metrics.jsonl record per task file.
// Under mpirun rank r scores tasks r, r + ranks, ...; their sums are added up.
void Run::maybe_score_tasks(int64_t step) {
  for (const auto& set : task_sets_) {
    if (set.every <= 0 || (step % set.every != 0 && step != c_.train.steps)) continue;
    std::vector<eval::ChoiceTask> mine;
    for (size_t i = size_t(dp_->rank()); i < set.tasks.size(); i += size_t(dp_->size())) mine.push_back(set.tasks[i]);
    eval::ChoiceTotals t;
    with_decoder(set.tokens,
                 [&](infer::Decoder& dec) { t = eval::totals_of(eval::score_choice_tasks(dec, *tok_, mine).tasks); });
    if (dp_->size() > 1)
      for (double* x : {&t.tasks, &t.right, &t.right_norm, &t.gold_logprob}) *x = dp_->sum_over_ranks(*x);
    if (!dp_->root()) continue;
    eval::ChoiceResult r;
    eval::set_accuracies(r, t);
    metrics_->log_record({{"step", step},
                          {"task", set.path},
                          {"tasks", set.tasks.size()},
                          {"acc", r.acc},
                          {"acc_stderr", r.acc_stderr},
                          {"acc_norm", r.acc_norm},
                          {"acc_norm_stderr", r.acc_norm_stderr},
                          {"gold_logprob", r.gold_logprob}});
    if (names_task(c_.checkpoint.keep_best, set.path)) offer_best(c_.checkpoint.keep_best, r.acc_norm);
    if (!quiet_)
      fmt::print(stderr, "{}tasks {} at step {}: acc_norm {:.2f}% +/- {:.2f}, acc {:.2f}% over {} tasks\n",
                 tty_ ? "\n" : "", set.path, step, 100 * r.acc_norm, 100 * r.acc_norm_stderr, 100 * r.acc,
                 set.tasks.size());
  }
}

// A generated text on rank 0 every train.sample_every steps.
void Run::maybe_sample(int64_t step) {
  if (c_.train.sample_every <= 0 || step % c_.train.sample_every != 0 || !dp_->root()) return;
  std::vector<int32_t> ids;
  // Room for the sample only (BOS and sample_tokens), not the whole context.
  with_decoder(std::min(c_.train.sample_tokens + 1, mc_.ctx), [&](infer::Decoder& dec) {
    ids = infer::generate(dec, {tok_->bos_id()}, c_.train.sample_tokens, {}, c_.train.seed ^ uint64_t(step),
                          {tok_->eos_id()})
              .tokens;
  });
  const std::string text = tok_->decode(ids);
  if (!quiet_) fmt::print(stderr, "\nsample at step {}: {}\n", step, text);
  metrics_->log_record({{"step", step}, {"sample", text}});  // for the dashboard
}

void Run::offer_best(std::string_view metric, double value) {
  if (dp_->root() && better_on(metric, value, best_ ? best_->value : NAN)) best_candidate_ = value;
}

// Every checkpoint.every steps, at the last step, where the run stops, and
// at a new best (checkpoint.keep_best): that checkpoint is written first,
// recording the new best, and the best's link moved to it after. Step 0
// (the starting weights, scored on the tasks) is written only as a best:
// when no step beats it, best.gguf holds the weights the run started from.
void Run::maybe_checkpoint(int64_t step, bool stopping) {
  const int64_t every = c_.checkpoint.every;
  // Rank 0 alone knows a task's score; every rank takes part in a checkpoint.
  const bool new_best =
      !c_.checkpoint.keep_best.empty() && dp_->max_over_ranks(std::isnan(best_candidate_) ? 0 : 1) > 0;
  if (!new_best) {
    if (step > 0 && ((every > 0 && step % every == 0) || step == c_.train.steps || stopping)) checkpoint(step);
    return;
  }
  const int64_t previous = best_ ? best_->step : -1;  // kept until the link has moved
  if (dp_->root()) best_ = BestCheckpoint{c_.checkpoint.keep_best, best_candidate_, step};
  best_candidate_ = NAN;
  checkpoint(step, previous);
  if (!dp_->root()) return;
  write_best(run_dir_, *best_);
  metrics_->log_record({{"step", step}, {"best", best_->metric}, {"value", best_->value}});
  if (!quiet_)
    fmt::print(stderr, "{}best {} so far at step {}: {:.4f} (weights/best.gguf)\n", tty_ ? "\n" : "", best_->metric,
               step, best_->value);
}

void Run::checkpoint(int64_t step, int64_t keep_step) {
  const auto whole = dp_->prepare_checkpoint(step, *optimizer_);  // ZeRO-1: rank 0 holds the whole state meanwhile
  if (!dp_->root()) return;  // rank 0 writes the run's files
  CheckpointMeta meta{step, run_id_, to_toml(c_), loader_->state(), best_};
  if (keep_step < 0 && best_) keep_step = best_->step;
  try {
    save_checkpoint(run_dir_, meta, checkpoint_data(), c_.checkpoint.keep_last, keep_step);
  } catch (const Error& e) {
    // save_checkpoint leaves no partial or orphan file and moves `latest`
    // only after both files are complete: say what survived.
    fail("step {}: cannot write the checkpoint: {}; {}{}", step, e.what(), last_checkpoint_text(run_dir_),
         latest_step(run_dir_) >= 0 ? " and weights/latest still points to it" : "");
  }
  metrics_->write_plot();
}

void Run::report_interruption(int sig, int64_t step) {
  summary_.interrupted_by = sig;
  if (dp_->root())  // under mpirun every rank got the signal; one says so
    fmt::print(stderr,
               "{}ggtrain: {} received: stopped after step {}/{} with checkpoint {}\n"
               "resume with: ggtrain train --resume --run-dir {}\n",
               tty_ && !quiet_ ? "\n" : "", signal_name(sig), step, c_.train.steps, weights_path(run_dir_, step),
               shell_word(run_dir_));
}

TrainSummary run_training(const TrainOptions& opts) {
  StopSignals signals;  // before any thread of the run exists (MPI's too: they inherit the mask)
  parallel::Communicator& comm = parallel::world();
  TrainOptions mine = opts;
  mine.quiet = opts.quiet || !comm.root();  // rank 0 alone reports
  // Rank 0 prepares the run folder (tokenizer, token files) before the
  // other ranks open it.
  std::unique_ptr<Run> run;
  try {
    if (comm.root()) run = std::make_unique<Run>(mine);
    comm.barrier();
    if (!comm.root()) run = std::make_unique<Run>(mine);
    return run->loop(signals);
  } catch (const std::exception& e) {
    if (run) run->record_failure(e.what());
    // Several ranks: end them all here, while `run` (and every buffer an
    // unfinished MPI operation may still write) is alive.
    parallel::end_every_rank(parallel::failure_message(e));
    throw;
  }
}

int on_every_rank(const std::function<int()>& body) {
  try {
    const int rc = body();
    if (parallel::world_started()) parallel::world().finalize();
    return rc;
  } catch (const std::exception& e) {
    const std::string message = parallel::failure_message(e);
    parallel::end_every_rank(message);
    if (parallel::world_started()) parallel::world().finalize();
    if (dynamic_cast<const Error*>(&e) || dynamic_cast<const std::bad_alloc*>(&e)) throw;
    // A library's own exception must still end in a message and a
    // non-zero exit, never in std::terminate.
    throw Error(message);
  }
}

RunConfig saved_run_config(const std::string& run_dir) {
  CheckpointMeta meta = read_latest_meta(run_dir);
  RunConfig c;
  apply_toml(c, meta.config_toml, state_path(run_dir, meta.step) + " (saved config)");
  return c;
}

}  // namespace ggtrain::train
