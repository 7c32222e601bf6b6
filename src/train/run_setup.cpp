// The construction of a Run: its named steps, in the order Run::Run takes them.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "convert/quantize.h"
#include "eval/choice_score.h"
#include "kernels/gemm_bf16.h"
#include "model/block_recipe.h"
#include "model/freeze.h"
#include "model/quantized_base.h"
#include "quant/recipe.h"
#include "train/finetune.h"
#include "train/memory_plan.h"
#include "train/run.h"
#include "train/run_folder.h"
#include "util/atomic_file.h"
#include "util/cpu_level.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// More passes over the training tokens than this is learning them by heart
// (finetuning recipes run 1-3 epochs: TRL's SFTTrainer and axolotl default
// to 3, unsloth's examples to 1).
constexpr double kManyEpochs = 10.0;

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
// model section from the file (a resumed one has it in its saved config,
// all but what only the file holds).
RunConfig resolve_config(const TrainOptions& o, const gguf::GgufFile* base) {
  RunConfig c = o.config;
  if (base) {
    try {
      if (o.resume) adopt_file_only_parts_of(c, *base);
      else adopt_model_of(c, *base);
    } catch (const Error& e) {
      fail("{} (init.from)", e.what());
    }
  }
  c.validate();
  return c;
}

}  // namespace

Run::Run(const TrainOptions& o)
    : run_dir_(o.run_dir),
      resume_(o.resume),
      quiet_(o.quiet),
      stop_at_(o.stop_at),
      base_(open_base(o.config.init.from)),
      c_(resolve_config(o, base_.get())) {
  dp_ = std::make_unique<parallel::DataParallel>(parallel::world(), c_.train.batch, c_.train.seq_len, c_.train.zero);
  check_run_folder();
  // The folder is this run's now: a watcher sees it preparing (tokenizing a
  // large corpus takes a while), and failed with the reason if it does not
  // get through.
  write_status(RunState::kPreparing, std::max<int64_t>(0, latest_step(run_dir_)), "");
  try {
    set_up();
  } catch (const std::exception& e) {
    record_failure(e.what());
    throw;
  }
}

void Run::set_up() {
  const int64_t resume_step = check_resume();
  variant_ = RunVariant::choose(c_, base_.get());  // before the tokenizer: a donor that is no model is named first
  load_tokenizer(resume_step);
  prepare_data();
  resolve_length();
  if (!quiet_) report_plan();
  build_model();
  load_eval_tasks();
  if (resume_) resume_state();
  else init_state();
  objective_->prepare();
  dp_->shard(*optimizer_);  // ZeRO-1: keep this rank's slices only
  if (!quiet_ && dp_->size() > 1) fmt::print(stderr, "{}\n", dp_->describe(optimizer_->state_floats()));
  metrics_ = std::make_unique<MetricsLog>(run_dir_, resume_ ? start_step_ : -1, dp_->root());
}

void Run::check_run_folder() {
  if (!resume_ && latest_step(run_dir_) >= 0)
    fail("{}: this run folder already has checkpoints; use --resume to continue it", run_dir_);
  if (c_.data.corpus.empty() && c_.data.sources.empty())
    fail("config: data.corpus is not set (text or JSONL files, folders or globs)");
  if (!c_.train.teacher.empty() && !std::filesystem::is_regular_file(c_.train.teacher))
    fail("{}: train.teacher does not exist (or is not a file); give the teacher model's GGUF", c_.train.teacher);
  create_run_folder(run_dir_);
  if (c_.train.threads > 0) omp_set_num_threads(int(c_.train.threads));
  // Rank 0 alone: the others start after it and would delete the temporary
  // files of writes it has begun.
  if (dp_->root()) remove_stale_temp_files(run_dir_, quiet_);
}

int64_t Run::check_resume() {
  if (!resume_) return -1;
  const int64_t step = latest_step(run_dir_);
  if (step < 0) fail("{}: no checkpoint to resume from (weights/latest is missing)", run_dir_);
  RunConfig saved;
  apply_toml(saved, read_latest_meta(run_dir_).config_toml, state_path(run_dir_, step) + " (saved config)");
  check_same_model(c_, saved, run_dir_, step);
  if (saved.train.steps != c_.train.steps && !quiet_) {
    // The schedule is a function of train.steps: a new length reshapes it
    // from here on, which a user extending a finished run should know.
    const optim::LrSchedule before = lr_schedule_of(saved.train), after = lr_schedule_of(c_.train);
    fmt::print(stderr,
               "note: train.steps {} -> {}: the {} learning-rate schedule is stretched to end at step {}; "
               "at step {} the rate goes from {:.2e} to {:.2e}\n",
               saved.train.steps, c_.train.steps, option_name(c_.train.schedule), c_.train.steps, step,
               before.lr_at(std::min(step, saved.train.steps - 1)), after.lr_at(step));
  }
  return step;
}

// train.eval_tasks, read and drawn before the first step (a bad file stops
// the run now, not at its first evaluation); every rank reads them, rank 0
// scores them.
void Run::load_eval_tasks() {
  for (const auto& task : c_.train.eval_tasks) {
    TaskSet set;
    set.path = task.path;
    set.every = c_.train.every_of(task);
    try {
      const auto format = eval::task_format_named(task.format, task.path);
      set.tasks = eval::draw_tasks(eval::read_choice_tasks(task.path, format), c_.train.limit_of(task), format);
    } catch (const Error& e) {
      fail("{} (train.eval_tasks)", e.what());
    }
    set.tokens = eval::tokens_needed(*tok_, set.tasks);
    if (set.tokens > mc_.ctx)
      fail("{} (train.eval_tasks): a task needs {} tokens with its context; model.ctx is {}", task.path, set.tokens,
           mc_.ctx);
    task_sets_.push_back(std::move(set));
  }
}

void Run::load_tokenizer(int64_t resume_step) {
  tok_ = std::make_unique<tokenizer::Tokenizer>(run_tokenizer(run_dir_, c_, quiet_, resume_step));
  added_tokens_ = add_chat_vocabulary(*tok_, c_, quiet_ || !dp_->root());
  token_bytes_ = tok_->token_byte_lengths();
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
      fail("{}: token file vocabulary {} differs from the tokenizer's {}", t->describe(), t->vocab(),
           tok_->vocab_size());
  const int64_t T = c_.train.seq_len;
  std::vector<const corpus::TokenStream*> sources;
  for (const auto& t : tokens_.train) sources.push_back(t.get());
  loader_ = std::make_unique<corpus::MixtureLoader>(
      sources, tokens_.weights, T, c_.train.seed,
      std::vector<corpus::WindowLabels>(sources.size(), tokens_.train_labels()));
  if (tokens_.val && tokens_.val->size() > T)
    val_loader_ = std::make_unique<corpus::BatchLoader>(*tokens_.val, T, c_.train.seed, tokens_.val_labels());
  documents_ = c_.data.format != DataFormat::kText || c_.data.attention == AttentionSpan::kDocument;
  const size_t step_tokens = size_t(c_.train.tokens_per_step());  // a step's micro-batches
  inputs_.resize(step_tokens);
  targets_.resize(step_tokens);
  doc_start_.resize(step_tokens);
  window_ids_.resize(size_t(c_.train.grad_accum * c_.train.batch));
}

// train.epochs as steps, now that the training tokens are known (a
// finetune's default length is epochs: finetune_length_default). A resumed
// run has its steps in its saved config.
void Run::resolve_length() {
  auto& t = c_.train;
  if (resume_ || t.epochs == 0) return;
  const double epochs = t.epochs;
  const int64_t train_tokens = tokens_.train_tokens(), per_step = t.tokens_per_step();
  t.steps = std::max<int64_t>(1, int64_t(std::ceil(epochs * double(train_tokens) / double(per_step))));
  t.epochs = 0;  // the saved config holds the steps
  // The preset's warmup was sized for its own length: at most a tenth of
  // this one unless the user set it.
  const int64_t warmup =
      c_.set_keys.count("train.warmup_steps") ? t.warmup_steps : std::min(t.warmup_steps, t.steps / 10);
  if (!quiet_)
    fmt::print(stderr, "length: {} steps = {} epoch(s) of {} training tokens at {} tokens a step (train.epochs){}\n",
               t.steps, epochs, train_tokens, per_step,
               warmup != t.warmup_steps ? fmt::format("; warmup {} steps (a tenth)", warmup) : "");
  t.warmup_steps = warmup;
}

// What the planned steps amount to, and a warning when no validation loss
// can be reported.
void Run::report_plan() const {
  const auto& t = c_.train;
  const int64_t train_tokens = tokens_.train_tokens(), per_step = t.tokens_per_step();
  fmt::print(stderr, "cpu: level {} ({}), {} threads\n", built_cpu_level(), built_cpu_description(),
             omp_get_max_threads());
  fmt::print(stderr, "plan: {} steps x {} tokens = {} tokens, {:.2f} epochs of the {} training tokens\n", t.steps,
             per_step, t.steps * per_step, double(t.steps * per_step) / double(std::max<int64_t>(1, train_tokens)),
             train_tokens);
  const double epochs = double(t.steps * per_step) / double(std::max<int64_t>(1, train_tokens));
  if (epochs > kManyEpochs)  // a pretraining preset's length on a finetune's data
    fmt::print(stderr,
               "warning: {} steps are {:.1f} epochs of the training tokens: the model will learn them by heart; "
               "3 epochs would be train.steps={}\n",
               t.steps, epochs,
               std::max<int64_t>(1, int64_t(std::ceil(3.0 * double(train_tokens) / double(per_step)))));
  const int64_t ctx = c_.model.ctx;
  if (const std::string past = model::window_past_context(c_.model_config(1), t.seq_len); !past.empty())
    fmt::print(stderr, "warning: train.seq_len {} exceeds model.ctx {}: {}; the checkpoints say context_length {}{}\n",
               t.seq_len, ctx, past, ctx,
               c_.init.from.empty() ? fmt::format(" (model.ctx={} makes them say the length trained)", t.seq_len)
                                    : " as init.from's file does");
  fmt::print(stderr, "learning rate: {} warmup steps to {:.3g}, {} to {:.3g}\n", t.warmup_steps, t.lr_max,
             option_name(t.schedule), t.schedule == optim::ScheduleKind::Constant ? t.lr_max : t.end_lr());
  if (t.warmup_steps >= t.steps)
    fmt::print(stderr,
               "warning: train.warmup_steps {} >= train.steps {}: the rate never reaches train.lr_max {:.3g} "
               "(it peaks at {:.3g}); lower train.warmup_steps\n",
               t.warmup_steps, t.steps, t.lr_max, lr_schedule_of(t).lr_at(t.steps - 1));
  const int64_t val_windows = val_loader_ ? val_loader_->n_windows() : 0;
  if (t.eval_every > 0 && val_windows < t.batch)
    fmt::print(stderr,
               "warning: the validation set holds {} tokens, less than one batch of {} x {}: no validation "
               "loss will be reported; raise data.val_fraction (now {}) or name a data.val_corpus\n",
               tokens_.val ? tokens_.val->size() : 0, t.batch, t.seq_len, c_.data.val_fraction);
}

// The run's memory plan, printed and checked before the model allocates
// or loads anything.
void Run::check_memory(const std::set<std::string>& frozen, const model::ModelOptions& opts) const {
  const int64_t f = sizeof(float);
  const model::ParamLayout layout(mc_, opts.quantized ? opts.quantized->names() : std::set<std::string>{});
  const int64_t trainable = layout.trainable(frozen).total();
  MemoryPlan plan;
  plan.float_weights = layout.total() * f + mc_.vocab * mc_.donor_dim * f;  // + a warm start's donor table
  if (opts.precision == model::Precision::kBf16) plan.float_weights += layout.total() * 2;  // the bf16 copy
  plan.held_weights = opts.quantized ? opts.quantized->bytes() : 0;
  plan.gradients = trainable * f;
  plan.moments = 2 * trainable * f / (c_.train.zero ? dp_->size() : 1);
  plan.activations = int64_t(
      model::Transformer<float>::planned_activation_bytes(mc_, dp_->local_batch(), c_.train.seq_len, frozen, opts));
  const int64_t available = memory_available(c_.train.memory_limit);
  if (!quiet_) fmt::print(stderr, "{}\n", memory_plan_text(plan, available));
  check_memory_plan(plan, available, c_.train.memory_limit);
}

void Run::build_model() {
  mc_ = c_.model_config(tok_->vocab_size());
  variant_->shape(mc_, *tok_, quiet_);
  const auto frozen = model::frozen_in_run(mc_, c_.train.freeze, "train.freeze");
  model::ModelOptions model_opts;
  model_opts.recompute = c_.train.recompute;
  model_opts.precision = c_.train.precision;
  model_opts.router_aux_loss_coef =
      c_.train.router_aux_loss_coef >= 0 ? c_.train.router_aux_loss_coef : mc_.architecture().router_aux_loss_coef;
  variant_->hold(mc_, model_opts, quiet_);
  check_memory(frozen, model_opts);
  if (model_opts.precision == model::Precision::kBf16 && !kernels::bf16_gemm_is_native() && !quiet_)
    fmt::print(stderr, "warning: oneDNN finds no AVX512_BF16 on this CPU: bf16 GEMMs are emulated, "
                       "slower than train.precision = \"fp32\"\n");
  model_ = std::make_unique<model::Transformer<float>>(mc_, dp_->local_batch(), c_.train.seq_len, frozen, model_opts);
  dp_->attach(*model_);
  variant_->bind(*model_);
  const auto& t = c_.train;
  if (!t.qat.empty()) {
    const auto imatrix =
        t.qat_imatrix.empty() ? std::nullopt : std::optional(convert::load_imatrix_input(t.qat_imatrix));
    qat_ = std::make_unique<QatWeights>(*quant::quantized_file_type(t.qat), mc_, model_->layout(),
                                        imatrix ? &*imatrix : nullptr, t.qat_every);
  }
  optimizer_ = std::make_unique<optim::AdamW>(
      model_->grad_layout(), optim::AdamWConfig{float(t.beta1), float(t.beta2), float(t.eps), float(t.weight_decay)});
  objective_ = make_objective({.config = c_,
                               .model = *model_,
                               .dp = *dp_,
                               .tokens = tokens_,
                               .val_loader = val_loader_.get(),
                               .token_bytes = token_bytes_,
                               .tokenizer = *tok_,
                               .documents = documents_,
                               .variant = *variant_,
                               .run_dir = run_dir_,
                               .resume = resume_,
                               .quiet = quiet_,
                               .with_decoder = [this](int64_t n_ctx, const std::function<void(infer::Decoder&)>& f) {
                                 with_decoder(n_ctx, f);
                               }});
  if (!frozen.empty() && !quiet_) {
    const model::ParamLayout all(mc_);  // model_->layout() lacks what a LoRA base holds quantized
    fmt::print(stderr, "frozen: {} of {} tensors ({} of {} parameters train)\n", frozen.size(), all.tensors().size(),
               model_->grad_layout().total(), all.total());
    if (mc_.lora.rank > 0) print_lora_targets(all);
  }
}

// Each LoRA target's adapter parameters beside the base weights it adapts,
// so that a run adapting a sliver of the model (a mixture of experts' router
// but not its experts) says so before it trains.
void Run::print_lora_targets(const model::ParamLayout& all) const {
  std::string parts;
  for (const auto& target : mc_.lora.targets) {
    int64_t adapter = 0, base = 0;
    for (const auto& t : all.tensors()) {
      const std::string weight = "." + target + ".weight";
      if (t.name.ends_with(weight)) base += t.size;
      if (t.name.ends_with(weight + ".lora_a") || t.name.ends_with(weight + ".lora_b")) adapter += t.size;
    }
    parts += fmt::format("{}{} {} (of {})", parts.empty() ? "" : ", ", target, adapter, base);
  }
  fmt::print(stderr, "lora: rank {} on {}; {:.3g}% of the model's {} parameters train\n", mc_.lora.rank, parts,
             100.0 * double(model_->grad_layout().total()) / double(all.total()), all.total());
}

void Run::resume_state() {
  CheckpointMeta meta = load_latest(run_dir_, checkpoint_data());
  break_resume(faults_, {.loader = meta.loader,
                         .optimizer = *optimizer_,
                         .layout = model_->layout(),
                         .params = model_->params(),
                         .step = meta.step,
                         .schedule_origin = schedule_origin_});
  start_step_ = meta.step;
  run_id_ = meta.run_id;
  loader_->set_state(meta.loader);
  // The state file's best is the one the run had after this step: best.json
  // and weights/best.gguf are brought to it (a crash may have left them on
  // the one before). A changed checkpoint.keep_best starts afresh.
  if (meta.best && meta.best->metric == c_.checkpoint.keep_best) {
    best_ = meta.best;
    if (dp_->root()) write_best(run_dir_, *best_);
  }
  if (stop_at_ > 0 && stop_at_ <= start_step_)
    fail("--stop-at {} is not after step {}, where this run resumes", stop_at_, start_step_);
  if (!quiet_) fmt::print(stderr, "resuming run {} at step {}\n", run_id_, start_step_);
}

void Run::init_state() {
  run_id_ = new_run_id();
  if (base_ && mc_.vocab != tok_->vocab_size())
    fail("{}: the model's vocabulary differs from its tokenizer's {} tokens (init.from)", base_->path(),
         tok_->vocab_size() - added_tokens_);
  variant_->init(*model_, mc_, added_tokens_, c_.train.seed, quiet_);
  const std::string cfg = to_toml(c_);
  write_file_atomic(run_dir_ + "/config.toml", cfg.data(), cfg.size());
}

CheckpointData Run::checkpoint_data() {
  return {.config = &mc_,
          .layout = &model_->layout(),
          .grad_layout = &model_->grad_layout(),
          .tokenizer = tok_.get(),
          .params = model_->params(),
          .optimizer = optimizer_.get(),
          .variant = variant_.get(),
          .qat = qat_.get()};
}

}  // namespace ggtrain::train
