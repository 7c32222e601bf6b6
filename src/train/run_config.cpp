#include "train/run_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "chat/chat_data.h"
#include "chat/template.h"
#include "model/params.h"
#include "optim/schedule.h"
#include "quant/recipe.h"
#include "train/best_metric.h"
#include "train/preference_loss.h"
#include "train/reward.h"
#include "util/error.h"
#include "util/suggest.h"

namespace ggtrain::train {

std::optional<chat::RecordFormat> record_format_of(DataFormat f) {
  switch (f) {
    case DataFormat::kChat: return chat::RecordFormat::kChat;
    case DataFormat::kAlpaca: return chat::RecordFormat::kAlpaca;
    case DataFormat::kCompletion: return chat::RecordFormat::kCompletion;
    case DataFormat::kText:
    case DataFormat::kAuto:
    case DataFormat::kPreference: return std::nullopt;
  }
  return std::nullopt;
}

model::Config model_shape(int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                          int64_t ctx, bool tied, double rope_freq_base) {
  model::Config c;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.d_ff = d_ff;
  c.ctx = ctx;
  c.tied = tied;
  c.rope_freq_base = rope_freq_base;
  return c;
}

model::Config RunConfig::model_config(int64_t vocab) const {
  model::Config c;
  c.vocab = vocab;
  model::copy_fields(c, model);
  return c;
}

namespace {

// train.steps, batch, seq_len (within model.ctx where every layer attends),
// grad_accum, eval_batches.
void check_steps_and_shapes(const RunConfig& c) {
  const auto& train = c.train;
  const auto& model = c.model;
  auto positive = [](int64_t v, const char* key) {
    if (v <= 0) fail("config: {} must be positive, got {}", key, v);
  };
  positive(train.steps, "train.steps");
  if (!(train.epochs >= 0 && train.epochs <= 1e6))
    fail("config: train.epochs must be in [0, 1e6], got {}", train.epochs);
  if (train.epochs > 0 && c.set_keys.count("train.steps"))
    fail("config: train.epochs ({}) and train.steps ({}) are both set; give one (train.epochs makes the steps)",
         train.epochs, train.steps);
  positive(train.batch, "train.batch");
  positive(train.seq_len, "train.seq_len");
  positive(train.grad_accum, "train.grad_accum");
  positive(train.eval_batches, "train.eval_batches");
  if (train.seq_len > model.ctx && !c.model_config(1).has_recurrent_layers())
    fail("config: train.seq_len {} exceeds model.ctx {}; every layer of {} attends, so lower train.seq_len{}",
         train.seq_len, model.ctx, model.arch, c.init.from.empty() ? " or raise model.ctx" : "");
}

// init.from / init.donor / train.lora and the tokenizer they bring.
void check_init_and_lora(const RunConfig& c) {
  const auto& data = c.data;
  const auto& train = c.train;
  const auto& init = c.init;
  if (!init.from.empty() && !init.donor.empty())
    fail("config: init.from and init.donor exclude each other (continue a model, or warm-start a new one)");
  if (!init.from.empty() && !data.tokenizer.empty())
    fail("config: init.from brings its own tokenizer; leave data.tokenizer unset (it is '{}')", data.tokenizer);
  if (train.lora.rank < 0) fail("config: train.lora.rank must be >= 0, got {}", train.lora.rank);
  if (train.lora.rank > 0) {
    if (init.from.empty()) fail("config: train.lora needs a base model: set init.from");
    if (!(train.lora.alpha > 0)) fail("config: train.lora.alpha must be positive, got {}", train.lora.alpha);
    if (train.lora.targets.empty()) fail("config: train.lora.targets is empty");
    for (const auto& t : train.lora.targets)
      if (!model::is_lora_target(t))
        fail("config: train.lora.targets: '{}' is not one of {}", t, model::lora_target_names_text());
    if (!train.freeze.empty())
      fail("config: train.freeze does not apply to a LoRA run (the whole base model is frozen)");
  }
  if (!init.donor.empty() && !data.tokenizer.empty())
    fail("config: init.donor brings its own tokenizer; leave data.tokenizer unset (it is '{}')", data.tokenizer);
}

// The data section's names and numbers.
void check_data(const RunConfig& c) {
  const auto& data = c.data;
  if (!data.sources.empty() && !data.corpus.empty())
    fail("config: data.sources and data.corpus exclude each other (a mixture names its corpora in data.sources)");
  if (!data.sources.empty() && !data.val_corpus.empty())
    fail("config: data.val_corpus does not apply to data.sources (each source keeps data.val_fraction of its "
         "documents)");
  if (data.text_key.empty()) fail("config: data.text_key is empty");
  if (data.shard_tokens < 1) fail("config: data.shard_tokens must be positive, got {}", data.shard_tokens);
  if (data.tokenizer_sample_lines < 1)
    fail("config: data.tokenizer_sample_lines must be positive, got {}", data.tokenizer_sample_lines);
  if (data.vocab_size < 260) fail("config: data.vocab_size must be at least 260, got {}", data.vocab_size);
  if (!(data.val_fraction >= 0 && data.val_fraction < 0.5))
    fail("config: data.val_fraction must be in [0, 0.5), got {}", data.val_fraction);
  if (data.format != DataFormat::kText && !data.sources.empty())
    fail("config: data.format = \"{}\" takes data.corpus, not data.sources", option_name(data.format));
  if (data.chat_template != "auto") chat::template_named(data.chat_template, "config: data.chat_template");
}

// Learning rates, schedule, AdamW's constants.
void check_optimizer(const RunConfig& c) {
  const auto& train = c.train;
  if (!(train.lr_max > 0)) fail("config: train.lr_max must be > 0");
  if (train.lr_min >= 0 && train.lr_min > train.lr_max)
    fail("config: train.lr_min {} exceeds train.lr_max {}: the rate would rise after its warmup; lower "
         "train.lr_min, or leave it unset (a tenth of lr_max)",
         train.lr_min, train.lr_max);
  if (train.warmup_steps < 0) fail("config: train.warmup_steps must be >= 0");
  if (!(train.beta1 >= 0 && train.beta1 < 1)) fail("config: train.beta1 must be in [0, 1)");
  if (!(train.beta2 >= 0 && train.beta2 < 1)) fail("config: train.beta2 must be in [0, 1)");
  if (!(train.eps > 0)) fail("config: train.eps must be positive");
  if (train.weight_decay < 0) fail("config: train.weight_decay must be >= 0");
}

// train.qat: a quantized file type, on a model's own weights or a LoRA
// adapter over a base kept in float.
void check_qat(const RunConfig& c) {
  const std::string& qat = c.train.qat;
  if (qat.empty() && !c.train.qat_imatrix.empty())
    fail("config: train.qat_imatrix is set but train.qat is not: name the type the export will have "
         "(train.qat = \"q4_k_m\", ...)");
  if (c.train.qat_every < 1) fail("config: train.qat_every must be at least 1, got {}", c.train.qat_every);
  if (qat.empty()) return;
  if (!quant::quantized_file_type(qat))
    fail("config: train.qat = \"{}\" is not a file type export writes ({})", qat, quant::quantized_file_type_names());
  if (c.train.lora.rank > 0 && c.train.precision == model::Precision::kBf16)
    fail("config: train.qat on a LoRA run needs train.precision = \"fp32\" (a bf16 run holds the base in bf16, "
         "and QAT rewrites the base matrices each step)");
  if (!c.init.donor.empty())
    fail("config: train.qat does not apply to a donor-lens run (its embedding is folded at each checkpoint)");
}

// Threads, non-finite policy, ZeRO, recompute/precision, intervals.
void check_run_options(const RunConfig& c) {
  const auto& train = c.train;
  const auto& checkpoint = c.checkpoint;
  if (train.threads < 0) fail("config: train.threads must be >= 0");
  if (train.max_nonfinite < 1) fail("config: train.max_nonfinite must be at least 1, got {}", train.max_nonfinite);
  if (train.zero != 0 && train.zero != 1)
    fail("config: train.zero must be 0 or 1 (ZeRO-1: optimizer state sharded over MPI ranks), got {}", train.zero);
  check_qat(c);
  if (train.eval_every < 0 || train.sample_every < 0 || checkpoint.every < 0 || checkpoint.keep_last < 0)
    fail("config: eval_every, sample_every, checkpoint.every and checkpoint.keep_last must be >= 0");
  if (train.eval_tasks_every < 0 || train.eval_tasks_limit < 0)
    fail("config: train.eval_tasks_every and train.eval_tasks_limit must be >= 0");
  check_keep_best(checkpoint.keep_best);
  if ((checkpoint.keep_best == "val_loss" || checkpoint.keep_best == "bpb") && train.eval_every == 0)
    fail("config: checkpoint.keep_best = \"{}\" needs validation; train.eval_every is 0", checkpoint.keep_best);
  std::vector<std::string> task_paths;
  for (const auto& t : train.eval_tasks) task_paths.push_back(t.path);
  if (checkpoint.keep_best.starts_with("task:") &&
      std::none_of(task_paths.begin(), task_paths.end(),
                   [&](const std::string& p) { return names_task(checkpoint.keep_best, p); }))
    fail("config: checkpoint.keep_best = \"{}\" names no train.eval_tasks file ({}); list the task file there",
         checkpoint.keep_best,
         task_paths.empty() ? std::string("it is empty") : fmt::format("{}", fmt::join(task_paths, ", ")));
  for (const auto& t : train.eval_tasks)
    if (train.every_of(t) == 0)
      fail("config: train.eval_tasks names {} but {} is 0; set how often to score it", t.path,
           t.every == 0 ? "its every" : "train.eval_tasks_every");
}

// train.objective = "distill" and its keys: a teacher, from one corpus
// (the teacher's file indexes one token stream).
void check_distillation(const RunConfig& c) {
  const auto& t = c.train;
  const bool distill = t.objective == Objective::kDistill;
  if (distill && t.teacher.empty())
    fail("config: train.objective = \"distill\" needs a teacher: set train.teacher to its GGUF");
  if (!distill && !t.teacher.empty())
    fail("config: train.teacher ('{}') is only read by train.objective = \"distill\"; set that objective or remove "
         "train.teacher",
         t.teacher);
  if (!distill) return;
  if (c.data.sources.size() > 1)
    fail("config: distillation trains on one corpus: give data.corpus (or one data.sources entry), not {} sources",
         c.data.sources.size());
  if (t.distill_top_k < 1) fail("config: train.distill.top_k must be >= 1, got {}", t.distill_top_k);
  if (!(t.distill.temperature > 0 && std::isfinite(t.distill.temperature)))
    fail("config: train.distill.temperature must be positive, got {}", t.distill.temperature);
  if (!(t.distill.alpha >= 0 && t.distill.alpha <= 1))
    fail("config: train.distill.alpha (the hard-label loss's weight) must be in [0, 1], got {}", t.distill.alpha);
}

// train.objective = "grpo" and the train.grpo table: prompts with answers
// (instruction records), a reward, groups that can differ, and replies that
// fit the windows a rollout is trained in.
void check_grpo(const RunConfig& c) {
  const GrpoSection& g = c.grpo;
  const bool grpo = c.train.objective == Objective::kGrpo;
  if (!grpo && !g.reward.empty())
    fail("config: train.grpo.reward ('{}') is only read by train.objective = \"grpo\"; set that objective or remove "
         "train.grpo.reward",
         g.reward);
  if (!grpo) return;
  if (c.data.format == DataFormat::kText || c.data.format == DataFormat::kPreference)
    fail("config: train.objective = \"grpo\" samples replies to prompts: set data.format to completion ({{\"prompt\", "
         "\"answer\"}} records), chat or auto");
  if (g.reward.empty())
    fail("config: train.objective = \"grpo\" needs a reward: set train.grpo.reward to exact, number, choice, "
         "regex:PATTERN or cmd:COMMAND");
  make_reward(g.reward, g.reward_timeout);  // a bad spec or pattern fails here, before any data is prepared
  if (g.group < 2)
    fail("config: train.grpo.group must be >= 2 (advantages compare the replies to one prompt), got {}", g.group);
  if (g.max_tokens < 1 || g.max_tokens >= c.train.seq_len)
    fail("config: train.grpo.max_tokens must be in [1, train.seq_len = {}) (a prompt and its reply are trained in "
         "one window), got {}",
         c.train.seq_len, g.max_tokens);
  if (!(g.temperature > 0 && std::isfinite(g.temperature)))
    fail("config: train.grpo.temperature must be positive (greedy replies to a prompt would all be the same), got {}",
         g.temperature);
  if (!(g.top_p > 0 && g.top_p <= 1)) fail("config: train.grpo.top_p must be in (0, 1], got {}", g.top_p);
  if (!(g.min_p >= 0 && g.min_p < 1)) fail("config: train.grpo.min_p must be in [0, 1), got {}", g.min_p);
  if (g.top_k < 0) fail("config: train.grpo.top_k must be >= 0 (0: off), got {}", g.top_k);
  if (!(g.epsilon > 0 && g.epsilon < 1)) fail("config: train.grpo.epsilon must be in (0, 1), got {}", g.epsilon);
  if (!(g.epsilon_high < 0 || g.epsilon_high > 0) || !std::isfinite(g.epsilon_high))
    fail("config: train.grpo.epsilon_high must be positive (or negative: train.grpo.epsilon), got {}", g.epsilon_high);
  if (!(g.beta >= 0 && std::isfinite(g.beta))) fail("config: train.grpo.beta must be >= 0, got {}", g.beta);
  if (g.beta > 0 && (c.init.from.empty() || !c.init.donor.empty()))
    fail("config: train.grpo.beta = {} keeps the policy near a reference: set init.from (the model GRPO starts from)",
         g.beta);
  if (!(g.reward_timeout > 0 && std::isfinite(g.reward_timeout)))
    fail("config: train.grpo.reward_timeout must be positive seconds, got {}", g.reward_timeout);
  if (g.iterations < 1)
    fail("config: train.grpo.iterations must be >= 1 (optimisation steps per batch of replies), got {}", g.iterations);
}

}  // namespace

// train.objective and its parameters: preference objectives go with
// preference data, DPO and IPO with the reference init.from gives.
void check_objective(const RunConfig& c) {
  const auto& t = c.train;
  const Objective o = t.objective;
  const bool pairs = c.data.format == DataFormat::kPreference;
  if (pairs && !on_pairs(o))
    fail("config: data.format = \"preference\" needs a preference objective: set train.objective to dpo, ipo, orpo "
         "or simpo");
  if (!pairs && on_pairs(o))
    fail("config: train.objective = \"{}\" trains on chosen/rejected pairs: set data.format = \"preference\"",
         option_name(o));
  if (needs_reference(o) && c.init.from.empty())
    fail("config: train.objective = \"{}\" compares with a reference model: set init.from (the model to tune, "
         "usually the SFT one)",
         option_name(o));
  if (!(t.beta > 0)) fail("config: train.beta must be positive, got {}", t.beta);
  if (!(t.label_smoothing >= 0 && t.label_smoothing < 0.5))
    fail("config: train.label_smoothing must be in [0, 0.5), got {}", t.label_smoothing);
  if (!(t.simpo_gamma >= 0)) fail("config: train.simpo_gamma must be >= 0, got {}", t.simpo_gamma);
  check_distillation(c);
  check_grpo(c);
}

void RunConfig::validate() const {
  model_config(std::max<int64_t>(1, data.vocab_size)).validate("config: model");
  check_steps_and_shapes(*this);
  check_init_and_lora(*this);
  check_data(*this);
  check_optimizer(*this);
  check_run_options(*this);
  check_objective(*this);
}

std::string finetune_length_default(RunConfig& c) {
  if (c.init.from.empty() || c.set_keys.count("train.steps") || c.set_keys.count("train.epochs")) return "";
  const bool records = c.data.format != DataFormat::kText;
  c.train.epochs = records ? 3 : 1;
  return fmt::format("init.from without train.steps or train.epochs: a finetune's default of {} epoch(s) of its {} "
                     "(set either to choose)",
                     c.train.epochs, records ? "records" : "text");
}

optim::LrSchedule lr_schedule_of(const TrainSection& t) {
  return {t.schedule, t.lr_max, t.end_lr(), t.warmup_steps, t.steps, 0.2};
}

std::vector<std::string> preset_names() {
  return {"tiny",       "s15",       "smol135",      "qwen3-0.6b",    "gemma3-270m", "llama3.2-1b",
          "smollm3-3b", "lfm2-350m", "qwen3.5-0.8b", "qwen3-30b-a3b", "olmoe-1b-7b"};
}

namespace {

// The released models' shapes (their config.json), trained from scratch on
// the run's own vocabulary of data.vocab_size tokens unless data.tokenizer
// names the model's tokenizer.json. A window of seq_len 512 keeps the first
// steps within a laptop's memory; the context is the model's.
RunConfig model_family_preset(const std::string& name) {
  RunConfig c;
  c.data.vocab_size = 32000;
  c.train.seq_len = 512;
  c.train.batch = 4;
  c.train.lr_max = 3e-4;
  if (name == "qwen3-0.6b") {  // Qwen/Qwen3-0.6B
    c.model = model_shape(1024, 28, 16, 8, 3072, 40960, true, 1e6);
    c.model.arch = "qwen3";
    c.model.head_dim = 128;
    c.model.rms_eps = 1e-6;
  } else if (name == "gemma3-270m") {  // google/gemma-3-270m
    c.model = model_shape(640, 18, 4, 1, 2048, 32768, true, 1e6);
    c.model.arch = "gemma3";
    c.model.head_dim = 256;
    c.model.rms_eps = 1e-6;
    c.model.sliding_window = 512;
    c.model.swa_pattern = 6;
    c.model.rope_freq_base_swa = 10000.0;
  } else if (name == "smollm3-3b") {  // HuggingFaceTB/SmolLM3-3B: every fourth layer without RoPE
    c.model = model_shape(2048, 36, 16, 4, 11008, 65536, true, 5e6);
    c.model.arch = "smollm3";
    c.model.rms_eps = 1e-6;
  } else if (name == "lfm2-350m") {  // LiquidAI/LFM2-350M: ten short-convolution layers, six attending
    c.model = model_shape(1024, 16, 16, 8, 4608, 128000, true, 1e6);
    c.model.arch = "lfm2";
    c.model.attention_layers = "2,5,8,10,12,14";
    c.model.shortconv_l_cache = 3;
  } else if (name == "qwen3.5-0.8b") {  // Qwen/Qwen3.5-0.8B (text): Gated DeltaNet, gated attention every fourth layer
    c.model = model_shape(1024, 24, 8, 2, 3584, 262144, true, 1e7);
    c.model.arch = "qwen35";
    c.model.head_dim = 256;
    c.model.rope_dim = 64;
    c.model.rms_eps = 1e-6;
    c.model.attention_layers = "3,7,11,15,19,23";
    c.model.ssm_conv_kernel = 4;
    c.model.ssm_state_size = 128;
    c.model.ssm_group_count = 16;
    c.model.ssm_time_step_rank = 16;
  } else if (name == "qwen3-30b-a3b") {  // Qwen/Qwen3-30B-A3B: 128 experts of 768, 8 a token
    c.model = model_shape(2048, 48, 32, 4, 6144, 40960, false, 1e6);
    c.model.arch = "qwen3moe";
    c.model.head_dim = 128;
    c.model.rms_eps = 1e-6;
    c.model.n_experts = 128;
    c.model.n_experts_used = 8;
    c.model.d_ff_expert = 768;
  } else if (name == "olmoe-1b-7b") {  // allenai/OLMoE-1B-7B-0924: 64 experts of 1024, 8 a token
    c.model = model_shape(2048, 16, 16, 16, 1024, 4096, false, 10000.0);
    c.model.arch = "olmoe";
    c.model.n_experts = 64;
    c.model.n_experts_used = 8;
  } else {  // meta-llama/Llama-3.2-1B at its original 8192 context: the
            // "llama3" RoPE scaling (rope_freqs.weight) extends a released
            // model to 128k and comes with init.from, not from scratch
    c.model = model_shape(2048, 16, 32, 8, 8192, 8192, true, 500000.0);
  }
  return c;
}

}  // namespace

RunConfig preset(const std::string& name) {
  RunConfig c;  // the defaults are s15
  if (name == "s15") return c;
  if (name == "tiny") {
    c.model = model_shape(64, 2, 4, 2, 160, 64, false);
    c.data.vocab_size = 320;
    c.data.val_fraction = 0.05;
    c.train.steps = 40;
    c.train.batch = 4;
    c.train.seq_len = 64;
    c.train.lr_max = 3e-3;
    c.train.warmup_steps = 4;
    c.train.eval_every = 20;
    c.train.eval_batches = 2;
    c.train.sample_every = 0;
    c.train.sample_tokens = 16;
    c.checkpoint.every = 10;
    c.checkpoint.keep_last = 0;
    return c;
  }
  if (name == "smol135") {
    c.model = model_shape(576, 30, 9, 3, 1536, 2048, true, 100000.0);
    c.data.vocab_size = 49152;
    c.train.seq_len = 512;
    c.train.batch = 4;
    c.train.lr_max = 3e-4;
    return c;
  }
  if (name == "qwen3-0.6b" || name == "gemma3-270m" || name == "llama3.2-1b" || name == "smollm3-3b" ||
      name == "lfm2-350m" || name == "qwen3.5-0.8b" || name == "qwen3-30b-a3b" || name == "olmoe-1b-7b")
    return model_family_preset(name);
  fail("unknown preset '{}'{}; the presets: {}", name, did_you_mean(name, preset_names()),
       fmt::join(preset_names(), ", "));
}

}  // namespace ggtrain::train
