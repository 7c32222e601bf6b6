#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "data/batch_loader.h"
#include "data/mixture_loader.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "kernels/gemm_bf16.h"
#include "model/checkpoint.h"
#include "model/donor.h"
#include "model/freeze.h"
#include "model/init.h"
#include "model/llama.h"
#include "model/lora.h"
#include "model/quantized_base.h"
#include "model/vocab_growth.h"
#include "kernels/cross_entropy.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/fault_injection.h"
#include "train/finetune.h"
#include "train/metrics.h"
#include "train/run_checkpoint.h"
#include "train/run_data.h"
#include "train/run_folder.h"
#include "train/schedule.h"
#include "train/stop_signals.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// init.from: the file stays mapped for the weights.
std::unique_ptr<gguf::GgufFile> open_base(const std::string& path) {
  if (path.empty()) return nullptr;
  try {
    return std::make_unique<gguf::GgufFile>(path);
  } catch (const Error& e) {
    fail("{} (init.from)", e.what());
  }
}

// The config the run trains with: a fresh run from init.from takes its
// model section from the file (a resumed one has it in its saved config).
RunConfig resolve_config(const TrainOptions& o, const gguf::GgufFile* base) {
  RunConfig c = o.config;
  if (base && !o.resume) {
    try {
      adopt_model_of(c, *base);
    } catch (const Error& e) {
      fail("{} (init.from)", e.what());
    }
  }
  c.validate();
  return c;
}

// What one optimizer step did.
struct StepResult {
  int64_t step = 0;  // steps done, counting this one (from 1)
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  bool finite = true;
};

class Run {
 public:
  explicit Run(const TrainOptions& o);
  TrainSummary loop(StopSignals& signals);

 private:
  // The constructor's steps, in order.
  void check_run_folder();
  int64_t check_resume();  // the step the run resumes from, or -1
  void load_donor();
  void load_tokenizer(int64_t resume_step);
  void prepare_data();
  void build_model();
  void attach_donor();
  void hold_quantized_base(model::ModelOptions& opts);
  void load_grown_base(int64_t base_vocab);
  void resume_state();
  void init_state();

  // The loop's steps.
  StepResult train_step(int64_t step);
  void handle_nonfinite(const StepResult& r);
  void log_step(const StepResult& r);
  void maybe_evaluate(int64_t step);
  void maybe_sample(int64_t step);
  void maybe_checkpoint(int64_t step, bool stopping);
  void report_interruption(int sig, int64_t step);

  double evaluate();
  void checkpoint(int64_t step);
  CheckpointData checkpoint_data();

  const std::string run_dir_;
  const bool resume_, quiet_;
  const int64_t stop_at_;
  const bool tty_ = ::isatty(2) == 1;
  const InjectedFaults faults_ = injected_faults();
  std::unique_ptr<gguf::GgufFile> base_;  // init.from, else null
  const RunConfig c_;                     // resolved: with base_'s model section
  std::string run_id_;
  int64_t start_step_ = 0;
  std::unique_ptr<data::Tokenizer> tok_;
  RunTokens tokens_;
  std::unique_ptr<data::MixtureLoader> loader_;
  std::unique_ptr<data::BatchLoader> val_loader_;
  model::LlamaConfig mc_;
  std::unique_ptr<model::DonorTable> donor_;         // init.donor warm start, else null
  uint64_t base_checksum_ = 0;                       // model::base_fingerprint of base_, in LoRA runs
  std::unique_ptr<model::QuantizedBase> quantized_;  // base_'s Q8_0 matrices, in LoRA runs
  std::unique_ptr<model::LlamaModel<float>> model_;
  std::unique_ptr<DataParallel> dp_;  // the ranks under mpirun (one process: a pass-through)
  std::vector<float> m_, v_;
  std::vector<int32_t> inputs_, targets_, doc_start_;  // a step's micro-batches
  bool documents_ = false;   // attention within documents (instruction data, data.attention)
  int64_t added_tokens_ = 0;  // chat markers appended to the base's vocabulary
  std::unique_ptr<MetricsLog> metrics_;

  // The loop's running state.
  LrSchedule schedule_;
  TrainSummary summary_;
  int64_t nonfinite_in_a_row_ = 0;
  double loop_start_s_ = 0, train_seconds_ = 0;  // train_seconds_: step time only
};

Run::Run(const TrainOptions& o)
    : run_dir_(o.run_dir),
      resume_(o.resume),
      quiet_(o.quiet),
      stop_at_(o.stop_at),
      base_(open_base(o.config.init.from)),
      c_(resolve_config(o, base_.get())) {
  dp_ = std::make_unique<DataParallel>(world(), c_.train.batch, c_.train.seq_len, c_.train.zero);
  check_run_folder();
  const int64_t resume_step = check_resume();
  if (!c_.init.donor.empty()) load_donor();  // before its tokenizer: says first when it is no llama model
  load_tokenizer(resume_step);
  prepare_data();
  build_model();
  if (resume_)
    resume_state();
  else
    init_state();
  dp_->shard_moments(m_, v_);  // ZeRO-1: keep this rank's slices only
  if (!quiet_ && dp_->size() > 1) fmt::print(stderr, "{}\n", dp_->describe());
  metrics_ = std::make_unique<MetricsLog>(run_dir_, resume_ ? start_step_ : -1, dp_->root());
}

void Run::check_run_folder() {
  if (!resume_ && latest_step(run_dir_) >= 0)
    fail("{}: this run folder already has checkpoints; use --resume to continue it", run_dir_);
  if (c_.data.corpus.empty() && c_.data.sources.empty())
    fail("config: data.corpus is not set (text or JSONL files, folders or globs)");
  create_run_folder(run_dir_);
  if (c_.train.threads > 0) omp_set_num_threads(int(c_.train.threads));
  remove_stale_temp_files(run_dir_, quiet_);
}

int64_t Run::check_resume() {
  if (!resume_) return -1;
  const int64_t step = latest_step(run_dir_);
  if (step < 0) fail("{}: no checkpoint to resume from (weights/latest is missing)", run_dir_);
  RunConfig saved;
  apply_toml(saved, read_latest_meta(run_dir_).config_toml, state_path(run_dir_, step) + " (saved config)");
  check_same_model(c_, saved, run_dir_, step);
  return step;
}

void Run::load_donor() {
  try {
    donor_ = std::make_unique<model::DonorTable>(model::load_donor_table(c_.init.donor));
  } catch (const Error& e) {
    fail("{} (init.donor)", e.what());
  }
}

void Run::load_tokenizer(int64_t resume_step) {
  tok_ = std::make_unique<data::Tokenizer>(run_tokenizer(run_dir_, c_, quiet_, resume_step));
  added_tokens_ = add_chat_vocabulary(*tok_, c_, quiet_ || !dp_->root());
  if (resume_ && c_.train.lora.rank == 0)  // a LoRA checkpoint is an adapter, without vocabulary
    check_same_vocabulary(*tok_,
                          !c_.init.donor.empty()      ? c_.init.donor
                          : !c_.init.from.empty()     ? c_.init.from
                          : c_.data.tokenizer.empty() ? run_dir_ + "/tokenizer.model"
                                                      : c_.data.tokenizer,
                          weights_path(run_dir_, resume_step));
}

void Run::prepare_data() {
  tokens_ = open_run_tokens(c_, run_dir_, *tok_, resume_, quiet_);
  for (const auto& t : tokens_.train)
    if (t->vocab() != tok_->vocab_size())
      fail("{}: token file vocabulary {} differs from the tokenizer's {}", t->describe(), t->vocab(), tok_->vocab_size());
  const int64_t T = c_.train.seq_len;
  std::vector<const data::TokenStream*> sources;
  for (const auto& t : tokens_.train) sources.push_back(t.get());
  loader_ = std::make_unique<data::MixtureLoader>(sources, tokens_.weights, T, c_.train.seed,
                                                 std::vector<data::WindowLabels>(sources.size(), tokens_.train_labels()));
  if (tokens_.val && tokens_.val->size() > T)
    val_loader_ = std::make_unique<data::BatchLoader>(*tokens_.val, T, c_.train.seed, tokens_.val_labels());
  documents_ = c_.data.format != "text" || c_.data.attention == "document";
  const size_t step_tokens = size_t(c_.train.grad_accum * c_.train.batch * T);  // a step's micro-batches
  inputs_.resize(step_tokens);
  targets_.resize(step_tokens);
  doc_start_.resize(step_tokens);
}

void Run::build_model() {
  mc_ = c_.llama(tok_->vocab_size());
  if (donor_) attach_donor();
  if (c_.train.lora.rank > 0) mc_.lora = {c_.train.lora.rank, c_.train.lora.alpha, c_.train.lora.targets};
  const auto frozen = mc_.lora.rank > 0 ? model::ParamLayout(mc_.without_lora()).names()  // the whole base
                                        : model::frozen_tensors(model::ParamLayout(mc_), c_.train.freeze, "train.freeze");
  model::ModelOptions model_opts;
  model_opts.recompute = model::recompute_from_name(c_.train.recompute);
  model_opts.precision = model::precision_from_name(c_.train.precision);
  if (mc_.lora.rank > 0) hold_quantized_base(model_opts);
  if (model_opts.precision == model::Precision::kBf16 && !kernels::bf16_gemm_is_native() && !quiet_)
    fmt::print(stderr, "warning: oneDNN finds no AVX512_BF16 on this CPU: bf16 GEMMs are emulated, "
                       "slower than train.precision = \"fp32\"\n");
  model_ = std::make_unique<model::LlamaModel<float>>(mc_, dp_->local_batch(), c_.train.seq_len, frozen, model_opts);
  dp_->attach(*model_);
  if (donor_) std::copy(donor_->table.begin(), donor_->table.end(), model_->donor_table());
  m_.assign(size_t(model_->n_trainable()), 0.f);
  v_.assign(size_t(model_->n_trainable()), 0.f);
  if (mc_.lora.rank > 0) base_checksum_ = model::base_fingerprint(*base_);
  if (!frozen.empty() && !quiet_) {
    const model::ParamLayout all(mc_);  // model_->layout() lacks what quantized_ holds
    fmt::print(stderr, "frozen: {} of {} tensors ({} of {} parameters train)\n", frozen.size(),
               all.tensors().size(), model_->grad_layout().total(), all.total());
  }
}

// The donor's table becomes the frozen input of the lens; the donor's
// vocabulary is the run's (the tokenizer came from the same file).
void Run::attach_donor() {
  if (donor_->vocab != tok_->vocab_size())
    fail("{}: token_embd.weight has {} rows but the donor's vocabulary has {} tokens", c_.init.donor,
         donor_->vocab, tok_->vocab_size());
  mc_.tied = false;  // the donor's table is input only; the new head is trained
  mc_.donor_dim = donor_->dim;
  if (!quiet_)
    fmt::print(stderr, "warm start from {}: frozen embedding [{}, {}], trainable lens.proj [{}, {}], untied head\n",
               c_.init.donor, donor_->vocab, donor_->dim, mc_.d_model, donor_->dim);
}

// A LoRA run keeps the base's Q8_0 matrices as they are in the file (they
// are frozen): the model reads them through `opts`.
void Run::hold_quantized_base(model::ModelOptions& opts) {
  quantized_ = std::make_unique<model::QuantizedBase>(*base_, mc_);
  opts.quantized = quantized_.get();
  if (!quiet_ && !quantized_->names().empty())
    fmt::print(stderr, "base: {} Q8_0 matrices stay quantized ({:.1f} MiB)\n", quantized_->names().size(),
               double(quantized_->bytes()) / (1 << 20));
}

void Run::resume_state() {
  CheckpointMeta meta = load_latest(run_dir_, checkpoint_data());
  start_step_ = meta.step;
  run_id_ = meta.run_id;
  loader_->set_state(meta.loader);
  if (stop_at_ > 0 && stop_at_ <= start_step_)
    fail("--stop-at {} is not after step {}, where this run resumes", stop_at_, start_step_);
  if (!quiet_) fmt::print(stderr, "resuming run {} at step {}\n", run_id_, start_step_);
}

void Run::init_state() {
  run_id_ = new_run_id();
  if (base_) {
    const int64_t base_vocab = tok_->vocab_size() - added_tokens_;
    if (base_->get_uint_or("llama.vocab_size", uint64_t(base_vocab)) != uint64_t(base_vocab) ||
        mc_.vocab != tok_->vocab_size())
      fail("{}: the model's vocabulary differs from its tokenizer's {} tokens (init.from)", base_->path(), base_vocab);
    if (added_tokens_ > 0) {
      load_grown_base(base_vocab);
    } else {
      model::load_base_params(*base_, mc_, model_->layout(), model_->params());  // dequantized to F32
    }
    if (mc_.lora.rank > 0) model::init_lora(model_->layout(), model_->params(), c_.train.seed);
    if (!quiet_)
      fmt::print(stderr, "continuing {}: {} parameters as F32 {}, fresh AdamW state\n", base_->path(),
                 model_->layout().total(), mc_.lora.rank > 0 ? "weights" : "master weights");
  } else {
    model::init_params(mc_, model_->layout(), model_->params(), c_.train.seed);
  }
  if (donor_) model::init_lens(*donor_, model_->layout(), model_->params(), c_.train.seed);
  const std::string cfg = to_toml(c_);
  write_file_atomic(run_dir_ + "/config.toml", cfg.data(), cfg.size());
}

// The base of a finetune whose vocabulary grew by chat markers (a full
// finetune: LoRA runs refuse new tokens): read at the base's size, then
// carried over with the new rows at the mean embedding.
void Run::load_grown_base(int64_t base_vocab) {
  model::LlamaConfig base_cfg = mc_;
  base_cfg.vocab = base_vocab;
  const model::ParamLayout base_layout(base_cfg);
  std::vector<float> base_params(size_t(base_layout.total()));
  model::load_base_params(*base_, base_cfg, base_layout, base_params.data());
  model::grow_vocabulary(base_layout, base_params.data(), base_vocab, model_->layout(), model_->params());
}

CheckpointData Run::checkpoint_data() {
  return {.config = &mc_,
          .layout = &model_->layout(),
          .grad_layout = &model_->grad_layout(),
          .tokenizer = tok_.get(),
          .params = model_->params(),
          .m = m_.data(),
          .v = v_.data(),
          .donor = donor_.get(),
          .lora_base = mc_.lora.rank > 0 ? base_.get() : nullptr,
          .lora_base_checksum = base_checksum_};
}

TrainSummary Run::loop(StopSignals& signals) {
  const auto& t = c_.train;
  schedule_ = {schedule_kind_from_name(t.schedule), t.lr_max, t.lr_min, t.warmup_steps, t.steps, 0.2};
  summary_.first_step = start_step_;
  loop_start_s_ = now_seconds();
  signals.arm();
  for (int64_t step = start_step_; step < t.steps; ++step) {
    const StepResult r = train_step(step);
    log_step(r);
    maybe_evaluate(r.step);
    maybe_sample(r.step);
    const int sig = int(dp_->max_over_ranks(signals.caught()));  // every rank stops at the same step
    const bool stopping = (stop_at_ > 0 && r.step == stop_at_) || sig != 0;
    maybe_checkpoint(r.step, stopping);
    if (sig != 0 && r.step < t.steps) report_interruption(sig, r.step);
    if (stopping) break;
  }
  if (tty_ && !quiet_) fmt::print(stderr, "\n");
  summary_.last_step = latest_step(run_dir_);
  summary_.final_weights = weights_path(run_dir_, summary_.last_step);
  return summary_;
}

// Forward and backward over train.grad_accum micro-batches, the gradients
// reduced over ranks, clipped, and AdamW, unless the loss or the gradient
// norm is not finite.
StepResult Run::train_step(int64_t step) {
  const auto& t = c_.train;
  const double t0 = now_seconds();
  StepResult r;
  r.step = step + 1;
  r.lr = schedule_.lr_at(step);
  model_->zero_grad();
  // Every rank draws the step's global micro-batches, so each knows how
  // many targets carry loss in all of them without communicating: the loss
  // is the mean over those, and micro-batch k of this rank weighs in with
  // its own count over that total.
  const int64_t micro = t.batch * t.seq_len;
  for (int64_t k = 0; k < t.grad_accum; ++k)
    loader_->next(t.batch, inputs_.data() + k * micro, targets_.data() + k * micro, doc_start_.data() + k * micro);
  const int64_t counted = int64_t(targets_.size()) - std::count(targets_.begin(), targets_.end(), kernels::kNoTarget);
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    dp_->begin_micro_batch(k + 1 == t.grad_accum);
    const float mean = model_->forward(dp_->local(inputs_.data() + k * micro), dp_->local(targets_.data() + k * micro),
                                       documents_ ? dp_->local(doc_start_.data() + k * micro) : nullptr);
    const float weight = counted > 0 ? float(model_->counted_targets()) / float(counted) : 0.f;
    r.loss += double(mean) * double(weight);
    model_->backward(weight);
  }
  if (faults_.rank_fails_at(dp_->rank(), r.step))
    fail("step {}: injected failure on rank {} (GGTRAIN_INJECT_RANK_FAILURE)", r.step, dp_->rank());
  // gradients summed over ranks; the ranks' shares of the loss summed too
  r.loss = dp_->finish_backward(r.loss) * double(dp_->size());
  if (faults_.nan_grad_at(r.step)) dp_->inject_nonfinite_gradient();
  r.grad_norm = dp_->grad_norm();
  if (faults_.nan_loss_at(r.step)) r.loss = NAN;
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.finite) {
    nonfinite_in_a_row_ = 0;
    const AdamWConfig adamw{float(t.beta1), float(t.beta2), float(t.eps), float(t.weight_decay)};
    dp_->adamw(m_, v_, r.step, r.lr, adamw, clip_scale(r.grad_norm, t.grad_clip));
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
  if (t.on_nonfinite != "skip")
    fail("{}; stopping (train.on_nonfinite = \"stop\"); {}. To skip such steps instead, set "
         "train.on_nonfinite = \"skip\"", what, last_checkpoint_text(run_dir_));
  ++nonfinite_in_a_row_;
  ++summary_.nonfinite_steps;
  if (nonfinite_in_a_row_ >= t.max_nonfinite)
    fail("{}; {} non-finite steps in a row (train.max_nonfinite = {}); stopping; {}", what, nonfinite_in_a_row_,
         t.max_nonfinite, last_checkpoint_text(run_dir_));
  if (!quiet_)
    fmt::print(stderr, "{}{}; update skipped ({} in a row, at most {})\n", tty_ ? "\n" : "", what,
               nonfinite_in_a_row_, t.max_nonfinite);
}

// metrics.jsonl, the summary, and the progress line (every step on a
// terminal, every 10th otherwise).
void Run::log_step(const StepResult& r) {
  const auto& t = c_.train;
  const int64_t tokens_per_step = t.batch * t.seq_len * t.grad_accum;
  const double tps = double(tokens_per_step) / r.seconds;
  train_seconds_ += r.seconds;
  nlohmann::json record{{"step", r.step},       {"loss", r.loss},         {"lr", r.lr},
                        {"grad_norm", r.grad_norm}, {"tokens_per_s", tps}, {"elapsed_s", now_seconds() - loop_start_s_}};
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
  if (!quiet_ && (tty_ || r.step % 10 == 0 || r.step == t.steps)) {
    const double eta = (now_seconds() - loop_start_s_) / double(r.step - start_step_) * double(t.steps - r.step);
    fmt::print(stderr, "{}step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}{}",
               tty_ ? "\r" : "", r.step, t.steps, r.loss, r.lr, r.grad_norm, tps, duration_text(eta),
               tty_ ? "   " : "\n");
  }
}

void Run::maybe_evaluate(int64_t step) {
  const auto& t = c_.train;
  if (t.eval_every <= 0 || (step % t.eval_every != 0 && step != t.steps)) return;
  const double vl = evaluate();
  if (!std::isfinite(vl)) return;
  metrics_->log_eval({{"step", step}, {"val_loss", vl}, {"val_ppl", std::exp(vl)}});
  summary_.last_val_loss = vl;
  if (!quiet_)
    fmt::print(stderr, "{}validation at step {}: loss {:.4f}, perplexity {:.2f}\n", tty_ ? "\n" : "", step, vl,
               std::exp(vl));
}

double Run::evaluate() {
  if (!val_loader_) return NAN;
  const int64_t B = c_.train.batch, T = c_.train.seq_len;
  const int64_t n_batches = std::min(c_.train.eval_batches, val_loader_->n_windows() / B);
  if (n_batches == 0) return NAN;
  double sum = 0, counted = 0;  // the mean over every counted target of the batches
  for (int64_t i = 0; i < n_batches; ++i) {
    for (int64_t b = 0; b < B; ++b)
      val_loader_->window(i * B + b, inputs_.data() + b * T, targets_.data() + b * T, doc_start_.data() + b * T);
    const double mean = model_->evaluate(dp_->local(inputs_.data()), dp_->local(targets_.data()),
                                         documents_ ? dp_->local(doc_start_.data()) : nullptr);
    sum += mean * double(model_->counted_targets());
    counted += double(model_->counted_targets());
  }
  const double all = dp_->mean_over_ranks(counted);
  return all > 0 ? dp_->mean_over_ranks(sum) / all : NAN;
}

// A generated text on rank 0 every train.sample_every steps.
void Run::maybe_sample(int64_t step) {
  if (c_.train.sample_every <= 0 || step % c_.train.sample_every != 0 || !dp_->root()) return;
  std::optional<model::FoldedModel> folded;  // the decoder runs a standard model
  if (donor_) folded = model::fold_donor_model(mc_, model_->layout(), model_->params(), donor_->table.data());
  // Room for the sample only (BOS and sample_tokens), not the whole context.
  infer::Decoder dec(folded ? folded->config : mc_, folded ? folded->params.data() : model_->params(),
                     folded ? nullptr : quantized_.get(), std::min(c_.train.sample_tokens + 1, mc_.ctx));
  const auto ids = infer::generate(dec, {tok_->bos_id()}, c_.train.sample_tokens, {}, c_.train.seed ^ uint64_t(step),
                                   {tok_->eos_id()})
                       .tokens;
  if (!quiet_) fmt::print(stderr, "\nsample at step {}: {}\n", step, tok_->decode(ids));
}

// Every checkpoint.every steps, at the last step, and where the run stops.
void Run::maybe_checkpoint(int64_t step, bool stopping) {
  const int64_t every = c_.checkpoint.every;
  if ((every > 0 && step % every == 0) || step == c_.train.steps || stopping) checkpoint(step);
}

void Run::checkpoint(int64_t step) {
  const auto whole = dp_->prepare_checkpoint(step, m_, v_);  // ZeRO-1: rank 0 holds all of m, v meanwhile
  if (!dp_->root()) return;  // rank 0 writes the run's files
  CheckpointMeta meta{step, run_id_, to_toml(c_), loader_->state()};
  try {
    save_checkpoint(run_dir_, meta, checkpoint_data(), c_.checkpoint.keep_last);
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
    fmt::print(stderr, "{}ggtrain: {} received: stopped after step {}/{} with checkpoint {}\n"
               "resume with: ggtrain train --resume --run-dir {}\n",
               tty_ && !quiet_ ? "\n" : "", signal_name(sig), step, c_.train.steps, weights_path(run_dir_, step),
               shell_word(run_dir_));
}

}  // namespace

TrainSummary run_training(const TrainOptions& opts) {
  StopSignals signals;  // before any thread of the run exists (MPI's too: they inherit the mask)
  Communicator& comm = world();
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
    // Several ranks: end them all here, while `run` (and every buffer an
    // unfinished MPI operation may still write) is alive.
    end_every_rank(failure_message(e));
    throw;
  }
}

RunConfig saved_run_config(const std::string& run_dir) {
  CheckpointMeta meta = read_latest_meta(run_dir);
  RunConfig c;
  apply_toml(c, meta.config_toml, state_path(run_dir, meta.step) + " (saved config)");
  return c;
}

}  // namespace ggtrain::train
