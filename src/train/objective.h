#pragma once
// What a run's steps minimize (train.objective), behind one seam: SFT's
// next-token cross-entropy over the counted targets (train/sft_objective.cpp)
// or a preference objective over chosen/rejected pairs
// (train/preference_objective.cpp), distillation from a teacher's
// distribution (train/distill_objective.cpp), or GRPO on the rewards of the
// model's own replies (train/grpo_objective.cpp). An objective runs a step's micro-batches
// forward and backward, validates on held-out windows, and says what it adds
// to the metrics and the progress line; the Run owns the data, the model and
// the ranks, and lends them (ObjectiveContext). A new objective is a new
// implementation of TrainingObjective and a row in make_objective.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "corpus/batch_loader.h"
#include "infer/decoder.h"
#include "model/transformer.h"
#include "parallel/data_parallel.h"
#include "tokenizer/tokenizer.h"
#include "train/run_config.h"
#include "train/run_data.h"
#include "train/run_variant.h"

namespace ggtrain::train {

// A decoder over the run's weights as they are now (Run::with_decoder).
using WithDecoder = std::function<void(int64_t n_ctx, const std::function<void(infer::Decoder&)>& f)>;

// What a run lends its objective; all of it outlives the objective.
struct ObjectiveContext {
  const RunConfig& config;
  model::Transformer<float>& model;
  parallel::DataParallel& dp;
  const RunTokens& tokens;
  const corpus::BatchLoader* val_loader;  // null without validation windows
  const std::vector<int32_t>& token_bytes;  // UTF-8 bytes of each token, for bits per byte
  const tokenizer::Tokenizer& tokenizer;
  bool documents;  // attention within documents (instruction data, data.attention)
  const RunVariant& variant;
  const std::string& run_dir;
  bool resume, quiet;
  WithDecoder with_decoder;  // objectives that sample from the model (GRPO)
};

// A step's train.grad_accum micro-batches as every rank drew them: micro-batch
// k's train.batch rows at k * batch * seq_len (window_ids: at k * batch).
struct StepBatches {
  const int32_t* inputs;
  const int32_t* targets;
  const int32_t* doc_start;
  const int64_t* window_ids;
  int64_t step;  // the step they make (1 for the first), which seeds what an objective samples
};

// The step's targets that carry loss, over every rank and micro-batch:
// what the step's mean divides by.
int64_t counted_targets(const StepBatches& b, const TrainSection& t);

// One step's pass: this rank's share of the step's loss (the trainer sums
// the shares over the ranks), and what the step's metrics record and
// progress line add (values over every rank).
struct StepTerms {
  double loss = 0;
  nlohmann::json metrics = nlohmann::json::object();
  std::string progress;  // after the loss, e.g. " | reward acc 0.75 margin 0.120"
};

// A validation: val_loss and the objective's other val_* metrics (the
// record), the values checkpoint.keep_best may follow, and the text after
// "validation at step N: ".
struct ValidationResult {
  double loss = 0;
  nlohmann::json metrics = nlohmann::json::object();  // val_loss included
  std::vector<std::pair<std::string, double>> best_candidates;  // (checkpoint.keep_best name, value)
  std::string line;
};

// The held-out windows a validation runs over, in stream order (batch i:
// windows i*B .. i*B+B-1), the first train.eval_batches batches of them;
// each loaded batch seen as this rank's rows, as a step's micro-batch is.
class ValidationBatches {
 public:
  explicit ValidationBatches(const ObjectiveContext& ctx);
  int64_t count() const { return count_; }  // 0 without validation windows
  void load(int64_t i);
  const int32_t* inputs() const { return ctx_.dp.local(inputs_.data()); }
  const int32_t* targets() const { return ctx_.dp.local(targets_.data()); }
  const int32_t* doc_start() const { return ctx_.dp.local(doc_start_.data()); }
  // What the model's forward takes: doc_start(), or null unless attention stops at documents.
  const int32_t* documents() const { return ctx_.documents ? doc_start() : nullptr; }
  const int64_t* window_ids() const { return window_ids_.data() + ctx_.dp.first_row(); }

 private:
  const ObjectiveContext& ctx_;
  int64_t count_ = 0;
  std::vector<int32_t> inputs_, targets_, doc_start_;
  std::vector<int64_t> window_ids_;
};

class TrainingObjective {
 public:
  virtual ~TrainingObjective() = default;
  // Once the run's weights are initialized or resumed; rank 0's run is
  // built (and prepared) before the other ranks start theirs.
  virtual void prepare() {}
  // Once every rank's run exists, on every rank together, before the first
  // step: work the ranks share (distillation's teacher pass).
  virtual void start() {}
  // Forward and backward over the step's micro-batches, gradients
  // accumulated in the model (DataParallel reduces them after).
  virtual StepTerms step(const StepBatches& b) = 0;
  // False: step `step` trains on what an earlier step drew (GRPO's replies
  // reused for several updates); the run draws no windows for it, so the
  // data stream goes on where that step left it.
  virtual bool draws_windows(int64_t /*step*/) const { return true; }
  // Over the first train.eval_batches batches of validation windows, on
  // every rank; nothing when there is nothing to validate on.
  virtual std::optional<ValidationResult> validate() = 0;
};

std::unique_ptr<TrainingObjective> make_objective(const ObjectiveContext& ctx);

// The kinds, for make_objective.
std::unique_ptr<TrainingObjective> make_sft_objective(const ObjectiveContext& ctx);
std::unique_ptr<TrainingObjective> make_preference_objective(const ObjectiveContext& ctx);
std::unique_ptr<TrainingObjective> make_distill_objective(const ObjectiveContext& ctx);
std::unique_ptr<TrainingObjective> make_grpo_objective(const ObjectiveContext& ctx);

}  // namespace ggtrain::train
