#pragma once
// Helpers for tests that run whole training runs: a synthetic corpus, temp
// folders, and byte-level comparison of GGUF tensor data.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace ggtrain::test_support {

// Deterministic English-like text, one sentence per line.
void write_synthetic_corpus(const std::string& path, int lines);
// The first `lines` lines of `from` with their words in reverse order: a
// validation text whose loss falls and then rises again as a model learns
// the forward order (for tests of keeping the best checkpoint).
void write_reversed_lines(const std::string& from, const std::string& to, int lines);

// The tiny preset on `corpus`, single-threaded, quiet-sized for tests.
train::RunConfig tiny_run_config(const std::string& corpus, int64_t steps);

// A small trained model to start from: writes dir/corpus.txt (1200 lines),
// trains the tiny preset for 10 steps in dir/base, returns its step-10
// checkpoint (F32).
std::string tiny_base_model(const std::string& dir);

// A quiet training run in `dir` (resume: with the config saved there),
// optionally ending after step stop_at.
train::TrainSummary run_quiet(const std::string& dir, const train::RunConfig& c, bool resume, int64_t stop_at = 0);

// The loss of step 1 of `c` trained for that one step in `dir`, without
// train.qat: what a QAT run's first step must differ from.
double first_loss_without_qat(const std::string& dir, train::RunConfig c);

// Trains `c` uninterrupted in dir_a, and in dir_b stopped after step
// stop_at then resumed; expects both final checkpoints (weights and state
// files at c.train.steps) to hold identical tensors, the same data position,
// and metrics.jsonl records identical but for timings. Asserts that the
// first part really stopped at stop_at.
void expect_exact_resume(const std::string& dir_a, const std::string& dir_b, const train::RunConfig& c,
                         int64_t stop_at);

// The saved data position (step, loader epoch and cursor) and the seed the
// batch order is drawn from are the same in both state files.
void expect_same_data_position(const std::string& state_a, const std::string& state_b);

// metrics.jsonl of both runs holds the same records (steps, losses,
// learning rates, gradient norms, validation losses), timings aside: a
// resumed run continues the uninterrupted run's log line for line.
void expect_same_metrics(const std::string& dir_a, const std::string& dir_b);

// Every record of RUN/metrics.jsonl (steps and evaluations), in order.
std::vector<nlohmann::json> metrics_records(const std::string& run_dir);
// The record of optimizer step `step` (one with a loss); null when none.
nlohmann::json step_record(const std::string& run_dir, int64_t step);
// The last evaluation record (one with val_loss); null when none.
nlohmann::json last_eval(const std::string& run_dir);

// True when every tensor of both GGUF files has the same name, type, shape
// and bytes (metadata such as run ids may differ). Explains the first
// difference in *why.
bool same_tensor_data(const std::string& a, const std::string& b, std::string* why);

}  // namespace ggtrain::test_support
