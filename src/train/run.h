#pragma once
// A training run as trainer.cpp's loop drives it (internal to train/): the
// constructor's named steps live in run_setup.cpp (prepare the run folder,
// check resume, load the tokenizer, prepare data, build the model, init or
// resume state), the loop's in trainer.cpp (step, log, maybe evaluate, maybe
// sample, maybe checkpoint).
#include <unistd.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/batch_loader.h"
#include "corpus/mixture_loader.h"
#include "eval/choice_tasks.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "parallel/data_parallel.h"
#include "tokenizer/tokenizer.h"
#include "train/best_checkpoint.h"
#include "train/fault_injection.h"
#include "train/metrics.h"
#include "train/objective.h"
#include "train/qat.h"
#include "train/run_checkpoint.h"
#include "train/run_data.h"
#include "train/run_status.h"
#include "train/run_variant.h"
#include "train/stop_signals.h"
#include "train/trainer.h"

namespace ggtrain::train {

// What one optimizer step did.
struct StepResult {
  int64_t step = 0;  // steps done, counting this one (from 1)
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  bool finite = true;
  nlohmann::json metrics;  // what the objective adds to the step's record
  std::string progress;  // and to its progress line
};

class Run {
 public:
  explicit Run(const TrainOptions& o);
  TrainSummary loop(StopSignals& signals);
  // RUN/status.json (rank 0): the run failed with `why`.
  void record_failure(const std::string& why);

 private:
  // The constructor's steps, in order.
  void check_run_folder();
  // What the constructor does once the run folder is this run's.
  void set_up();
  int64_t check_resume();  // the step the run resumes from, or -1
  void print_lora_targets(const model::ParamLayout& all) const;
  void check_memory(const std::set<std::string>& frozen, const model::ModelOptions& opts) const;
  void load_tokenizer(int64_t resume_step);
  void load_eval_tasks();
  void prepare_data();
  void resolve_length();
  void report_plan() const;
  void build_model();
  void resume_state();
  void init_state();

  // The loop's steps.
  StepResult train_step(int64_t step);
  void handle_nonfinite(const StepResult& r);
  void log_step(const StepResult& r);
  void maybe_evaluate(int64_t step);
  void maybe_sample(int64_t step);
  void maybe_score_tasks(int64_t step);
  // f(decoder) over the weights in memory (the donor folded in first),
  // its cache n_ctx tokens long.
  void with_decoder(int64_t n_ctx, const std::function<void(infer::Decoder&)>& f);
  void maybe_checkpoint(int64_t step, bool stopping);
  // checkpoint.keep_best: on rank 0, an evaluation's value of that metric,
  // kept as the candidate when it beats the best so far.
  void offer_best(std::string_view metric, double value);
  void report_interruption(int sig, int64_t step);
  void write_status(RunState state, int64_t step, const std::string& message);

  void checkpoint(int64_t step, int64_t keep_step = -1);
  CheckpointData checkpoint_data();

  const std::string run_dir_;
  const bool resume_, quiet_;
  const int64_t stop_at_;
  const bool tty_ = ::isatty(2) == 1;
  const InjectedFaults faults_ = injected_faults();
  std::unique_ptr<gguf::GgufFile> base_;  // init.from, else null
  RunConfig c_;  // resolved: with base_'s model section, and its length in steps (resolve_length)
  std::string run_id_;
  int64_t start_step_ = 0;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::vector<int32_t> token_bytes_;  // tok_->token_byte_lengths(), for bits per byte
  struct TaskSet {
    std::string path;
    int64_t every = 0;  // scored every `every` steps
    std::vector<eval::ChoiceTask> tasks;  // drawn (its limit)
    int64_t tokens = 0;  // the longest sequence a task needs
  };
  std::vector<TaskSet> task_sets_;  // train.eval_tasks
  std::optional<BestCheckpoint> best_;  // checkpoint.keep_best's, on rank 0
  double best_candidate_ = NAN;  // this step's value when it beats best_, on rank 0
  RunTokens tokens_;
  std::unique_ptr<corpus::MixtureLoader> loader_;
  std::unique_ptr<corpus::BatchLoader> val_loader_;
  model::Config mc_;
  std::unique_ptr<RunVariant> variant_;  // scratch, continued, LoRA or donor lens
  std::unique_ptr<model::Transformer<float>> model_;
  std::unique_ptr<parallel::DataParallel> dp_;  // the ranks under mpirun (one process: a pass-through)
  std::unique_ptr<optim::AdamW> optimizer_;  // over the trainable parameters; ZeRO-1: this rank's slices
  std::unique_ptr<QatWeights> qat_;  // train.qat, else null
  std::vector<int32_t> inputs_, targets_, doc_start_;  // a step's micro-batches
  std::vector<int64_t> window_ids_;  // their rows' windows
  std::unique_ptr<TrainingObjective> objective_;  // train.objective
  bool documents_ = false;  // attention within documents (instruction data, data.attention)
  int64_t added_tokens_ = 0;  // chat markers appended to the base's vocabulary
  std::unique_ptr<MetricsLog> metrics_;

  // The loop's running state.
  optim::LrSchedule schedule_;
  int64_t schedule_origin_ = 0;  // the step schedule_ counts from (0; a test's broken resume moves it)
  TrainSummary summary_;
  int64_t nonfinite_in_a_row_ = 0;
  double loop_start_s_ = 0, train_seconds_ = 0;  // train_seconds_: step time only
  double last_progress_s_ = 0;  // when the last progress line was printed
};

}  // namespace ggtrain::train
