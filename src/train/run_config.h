#pragma once
// Everything that defines a training run. It comes from a preset, then a TOML
// file, then `--set section.key=value` overrides, in that order; the resolved
// config is saved in the run folder and in every state file.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "chat/conversation.h"
#include "corpus/input/documents.h"
#include "corpus/prepare/window_packer.h"
#include "model/config.h"
#include "optim/schedule.h"
#include "train/distill_loss.h"
#include "train/preference_loss.h"

namespace ggtrain::train {

// data.format: "text" (pretraining documents); "chat", "alpaca" or
// "completion" (instruction tuning from JSONL records, loss on the answers,
// examples packed into windows: chat/chat_data.h); "auto": one of those
// three, detected from each file's first record; "preference": chosen/rejected
// pairs for train.objective's preference objectives.
enum class DataFormat { kText, kChat, kAlpaca, kCompletion, kAuto, kPreference };
// The record format of an instruction format; nullopt for auto (each file's
// first record says), text and preference.
std::optional<chat::RecordFormat> record_format_of(DataFormat f);

// data.attention: "causal" (a window attends across document ends) or
// "document" (attention stays within each document: text documents each
// start at BOS; instruction formats always pack this way).
enum class AttentionSpan { kCausal, kDocument };

struct DataSection {
  // Files, folders (recursively) and globs; .txt, .jsonl/.json, either
  // compressed as .gz or .zst (corpus/input/documents.h).
  std::vector<std::string> corpus;
  std::vector<std::string> val_corpus;  // a separate validation set; empty: val_fraction of corpus
  // A mixture instead of one corpus: each source (a corpus spec) is prepared
  // on its own and training windows are drawn from them in proportion to
  // the weights (corpus/mixture_loader.h).
  struct Source {
    std::string path;
    double weight = 1.0;
  };
  std::vector<Source> sources;
  // "" (nullopt: by extension), "text", "jsonl", or pretokenized "llmc" /
  // "nanogpt" (.bin).
  std::optional<corpus::FileType> file_type;
  corpus::DocSeparator doc_separator = corpus::DocSeparator::kLine;  // text files: "line", "blank_line" or "file"
  std::string text_key = "text";  // JSONL: the member holding the document
  // Invalid UTF-8 / JSON: "error" or "skip" (counted).
  corpus::OnBadDocument on_bad_document = corpus::OnBadDocument::kError;
  bool add_bos = true, add_eos = true;  // each document is BOS + text + EOS
  int64_t shard_tokens = 100'000'000;  // training tokens per shard file
  int64_t tokenizer_sample_lines = 2'000'000;  // lines sampled to train a tokenizer on
  std::string tokenizer;  // sentencepiece .model or a GGUF's vocabulary; empty: train one
  int64_t vocab_size = 4096;
  double val_fraction = 0.01;
  DataFormat format = DataFormat::kText;
  // Instruction formats: "auto" (the base model's tokenizer.chat_template
  // when llama.cpp recognises it, else chatml) or a name of chat/template.h.
  std::string chat_template = "auto";
  // An example longer than train.seq_len: "truncate", "split" or "skip" (counted).
  corpus::Overflow overflow = corpus::Overflow::kTruncate;
  AttentionSpan attention = AttentionSpan::kCausal;
};

// train.on_nonfinite (below).
enum class NonfinitePolicy { kStop, kSkip };

struct TrainSection {
  int64_t steps = 1200, batch = 8, seq_len = 256, grad_accum = 1;
  // > 0: the run's length in passes over its training tokens, made
  // train.steps once the data is prepared (then 0 again, so a saved config
  // holds the steps it trained). Exclusive with a train.steps the user sets.
  double epochs = 0;
  // lr_min < 0: a tenth of lr_max (every preset's ratio), so that setting
  // lr_max alone never leaves an end rate above it.
  double lr_max = 1e-3, lr_min = -1;
  double end_lr() const { return lr_min >= 0 ? lr_min : lr_max / 10; }
  int64_t tokens_per_step() const { return batch * seq_len * grad_accum; }
  int64_t warmup_steps = 50;
  optim::ScheduleKind schedule = optim::ScheduleKind::Cosine;  // "cosine", "constant" or "wsd"
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0;
  uint64_t seed = 1337;
  int64_t threads = 0;  // 0: all cores
  int64_t eval_every = 100, eval_batches = 8;
  // Multiple-choice task files scored on the weights in memory, as `ggtrain
  // eval --task` scores them: each every `every` steps (and at the end),
  // `limit` tasks of it drawn as `eval --tasks N` draws them (0: all). A
  // field left out takes the file's extension (format) or the section-wide
  // eval_tasks_every / eval_tasks_limit.
  struct EvalTask {
    std::string path;
    std::string format;  // "": from the extension
    int64_t every = -1;  // -1: eval_tasks_every
    int64_t limit = -1;  // -1: eval_tasks_limit
  };
  std::vector<EvalTask> eval_tasks;
  int64_t eval_tasks_every = 0, eval_tasks_limit = 0;
  int64_t every_of(const EvalTask& t) const { return t.every >= 0 ? t.every : eval_tasks_every; }
  int64_t limit_of(const EvalTask& t) const { return t.limit >= 0 ? t.limit : eval_tasks_limit; }
  int64_t sample_every = 200, sample_tokens = 48;
  // A step whose loss or gradient norm is NaN/Inf: "stop" ends the run with
  // an error (the last checkpoint is kept); "skip" leaves the weights and
  // moments untouched for that step, counts it in metrics.jsonl, and stops
  // only after max_nonfinite such steps in a row.
  NonfinitePolicy on_nonfinite = NonfinitePolicy::kStop;
  int64_t max_nonfinite = 10;
  // Under mpirun: 1 shards the AdamW moments over the ranks (ZeRO-1), 0
  // keeps them whole on every rank (parallel/data_parallel.h).
  int64_t zero = 0;
  // Activations backward recomputes instead of keeping, trading compute for
  // memory: "none", "attn" (the attention block's) or "all" (every block's;
  // only the residual stream is kept).
  model::Recompute recompute = model::Recompute::kNone;
  // "bf16": the GEMMs run on bf16 inputs with float accumulation; master
  // weights, gradients, optimizer state, norms, softmax and loss stay float,
  // and checkpoints stay F32. "fp32": everything in float.
  model::Precision precision = model::Precision::kFp32;
  // Quantization-aware training: a file type `export` writes ("q4_k_m",
  // "q4_0", ...); each step's forward and backward see the weights as that
  // export stores them (train/qat.h). Empty: off.
  std::string qat;
  // An importance matrix (GGUF or .dat) the QAT forward quantizes against,
  // as `export --imatrix` of the same file will. Empty: none.
  std::string qat_imatrix;
  // New QAT blocks every this many steps; the steps between use the
  // masters plus the last blocks' rounding errors (a K-quant's quantizer
  // costs as much as a step at real shapes).
  int64_t qat_every = 1;
  // Mixture-of-experts models: the weight of the load-balancing loss added
  // to the objective; negative: the family's (Architecture::router_aux_loss_coef).
  double router_aux_loss_coef = -1;
  // The memory a run may plan for, in GiB; 0: the machine's MemAvailable.
  // A run whose weights, gradients, AdamW moments and activations need more
  // is refused before it allocates anything.
  double memory_limit = 0;
  // Tensors that keep their values (no gradient, no optimizer state), e.g.
  // "token_embd", "output", "blk.0-3", "blk.5.ffn_up", "attn_norm" (every block).
  std::vector<std::string> freeze;
  // "sft" (next-token loss on the data's trained tokens), or a preference
  // objective on data.format = "preference" pairs: "dpo", "ipo", "orpo",
  // "simpo" (train/preference_loss.h). beta is DPO/IPO/SimPO's beta and
  // ORPO's lambda; label_smoothing applies to DPO and SimPO.
  Objective objective = Objective::kSft;
  double beta = 0.1, label_smoothing = 0.0, simpo_gamma = 0.5;
  // "distill": the teacher GGUF whose top-k distribution each target
  // follows (train/teacher_topk.h), and the loss's parameters
  // (train/distill_loss.h).
  std::string teacher;
  int64_t distill_top_k = 64;
  DistillParams distill;
  // LoRA adapters (rank > 0): the base model is frozen and each target
  // matrix W gets W + (alpha / rank) B A with trainable A [rank, in], B [out, rank].
  struct Lora {
    int64_t rank = 0;
    double alpha = 16.0;
    std::vector<std::string> targets{"attn_q", "attn_v"};
  } lora;
};

struct InitSection {
  // A model GGUF whose token_embd becomes the frozen input table of a lens
  // warm start (model/donor.h); the run takes its vocabulary and tokenizer.
  std::string donor;
  // A model GGUF (F32/F16/BF16/Q8_0) to continue training: shape, RoPE base,
  // eps, vocabulary and weights come from it.
  std::string from;
};

struct CheckpointSection {
  int64_t every = 200;
  int64_t keep_last = 3;  // 0 keeps all
  // "" (off), "val_loss", "bpb" or "task:NAME": weights/best.gguf follows the
  // best evaluation on that metric (train/best_checkpoint.h).
  std::string keep_best;
  // At the end of the run, RUN/imatrix.gguf: llama-imatrix's statistics of
  // the final weights over the run's validation tokens (chunks of up to 512),
  // for `export --imatrix`.
  bool imatrix = false;
};

// A model.* section: d_model, n_layers, n_heads, n_kv_heads, d_ff, ctx,
// tied, and RoPE's base.
model::Config model_shape(int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                          int64_t ctx, bool tied, double rope_freq_base = 10000.0);

// The train.grpo table: train.objective = "grpo" (train/grpo_objective.cpp,
// the loss in train/grpo_loss.h, the rewards in train/reward.h). Each step
// samples `group` replies to every prompt of its windows with llama.cpp's
// sampler at these settings, at most max_tokens each.
struct GrpoSection {
  std::string reward;  // exact, number, choice, regex:PATTERN or cmd:COMMAND
  double reward_timeout = 60;  // seconds a cmd: reward may take per step
  int64_t group = 8;  // rollouts per prompt (TRL's num_generations)
  int64_t max_tokens = 64;  // per reply (TRL's max_completion_length is 256)
  double temperature = 1.0, top_p = 1.0, min_p = 0.0;  // TRL's defaults (no top-k, no min-p)
  int64_t top_k = 0;
  double epsilon = 0.2, epsilon_high = -1;  // the ratio's clip range; epsilon_high < 0: epsilon
  double beta = 0.0;  // the KL penalty to the initial weights (0: none, TRL's default)
  bool scale_rewards = true;  // advantages divided by the group's reward std
  // Optimisation steps per batch of replies (TRL's num_iterations): the
  // replies sampled at a step train it and the next iterations - 1 steps,
  // which draw no windows of their own.
  int64_t iterations = 1;
};

struct RunConfig {
  // model.*: the fields of model::config_fields() (the defaults are s15's);
  // vocab, donor_dim and lora stay unset here (see model_config()).
  model::Config model = model_shape(288, 6, 6, 6, 768, 256, true);
  DataSection data;
  TrainSection train;
  CheckpointSection checkpoint;
  InitSection init;
  GrpoSection grpo;  // train.grpo.*
  // Keys given by a config file or --set rather than by the preset: with
  // init.from, a model.* key the user set must agree with the file.
  std::set<std::string> set_keys;

  // Model config once the tokenizer fixed the vocabulary size.
  model::Config model_config(int64_t vocab) const;
  // Throws Error naming the key of the first bad value.
  void validate() const;
};

// The learning-rate schedule train.* describes.
optim::LrSchedule lr_schedule_of(const TrainSection& t);

// A finetune's length comes from its data, not the preset's pretraining
// steps: with init.from and neither train.steps nor train.epochs set (by a
// config file or --set), train.epochs becomes 3 for instruction or
// preference records (TRL's SFTTrainer and axolotl default to 3; unsloth's
// notebooks run 1) or 1 for text (continued pretraining reads its corpus
// once). Returns the line that says so, or "" when it changed nothing.
std::string finetune_length_default(RunConfig& c);

// The names the config gives its choice options (the keys' values in TOML,
// `--set` and messages); each is read into its enum once, with the config.
std::string_view option_name(DataFormat f);
std::string_view option_name(AttentionSpan a);
std::string_view option_name(corpus::FileType t);
std::string_view option_name(corpus::DocSeparator d);
std::string_view option_name(corpus::OnBadDocument b);
std::string_view option_name(corpus::Overflow o);
std::string_view option_name(optim::ScheduleKind k);
std::string_view option_name(NonfinitePolicy p);
std::string_view option_name(model::Recompute r);
std::string_view option_name(model::Precision p);
std::string_view option_name(Objective o);

std::vector<std::string> preset_names();
RunConfig preset(const std::string& name);  // "tiny", "s15", "smol135"
// Applies every key of a TOML document; unknown keys and bad values are
// errors naming the key (and `source`).
void apply_toml(RunConfig& c, const std::string& toml_text, const std::string& source);
void apply_toml_file(RunConfig& c, const std::string& path);
// "section.key=value"
void apply_override(RunConfig& c, const std::string& assignment);
// The resolved config as a TOML document that apply_toml reads back.
std::string to_toml(const RunConfig& c);
// The same with a comment on each line saying what the key does
// (`ggtrain config show`); it reads back the same way.
std::string to_toml_documented(const RunConfig& c);

}  // namespace ggtrain::train
