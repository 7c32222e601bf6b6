#pragma once
// A run's checkpoints: RUN/weights/step_N.gguf (a standard llama.cpp model),
// RUN/state/step_N.gguf (AdamW's moments and update count, step, data
// position, config), and
// RUN/weights/latest, a relative symlink moved only after both files are
// complete. A crash at any moment leaves `latest` on a complete pair.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "corpus/mixture_loader.h"
#include "gguf/reader.h"
#include "model/config.h"
#include "model/params.h"
#include "optim/adamw.h"
#include "tokenizer/tokenizer.h"
#include "train/best_checkpoint.h"

namespace ggtrain::train {

class RunVariant;
class QatWeights;

constexpr uint32_t kCheckpointFormat = 1;

struct CheckpointMeta {
  int64_t step = 0;
  std::string run_id;
  std::string config_toml;  // the resolved run config
  corpus::MixtureState loader;  // the data position: windows drawn, each source's (epoch, cursor)
  // checkpoint.keep_best's best so far, this step's evaluation included: the
  // state file is its record a resume trusts (best.json and the link may
  // lag it after a crash).
  std::optional<BestCheckpoint> best;
};

struct CheckpointData {
  const model::Config* config;
  const model::ParamLayout* layout;  // the parameters
  const model::ParamLayout* grad_layout;  // the trainable ones: the optimizer's index space
  const tokenizer::Tokenizer* tokenizer;
  float* params;
  optim::AdamW* optimizer;  // its whole state (ZeRO-1 gathers it for the checkpoint)
  // What the weights file holds and how the parameters come back from a
  // checkpoint (a LoRA adapter, a folded donor lens: train/run_variant.h).
  const RunVariant* variant;
  // train.qat's rounding errors between re-quantizations (null without QAT).
  QatWeights* qat = nullptr;
};

std::string weights_path(const std::string& run_dir, int64_t step);
std::string state_path(const std::string& run_dir, int64_t step);

// Writes weights, then state, then moves `latest`; prunes all but the newest
// keep_last pairs (0 keeps all) and keep_step's (the best checkpoint's).
// The state file's record of its step's files (SHA-256, hex): the whole
// weights file, and the AdamW moments' data in the order the state holds them.
inline constexpr const char* kWeightsSha256Key = "ggtrain.weights.sha256";
inline constexpr const char* kMomentsSha256Key = "ggtrain.adam.sha256";
// AdamW's updates taken (behind the steps when some were skipped as not
// finite); a state file without it took one at every step.
inline constexpr const char* kAdamStepsKey = "ggtrain.adam.steps";

// `ggtrain verify RUN_DIR`: every checkpoint of the run read as a resume
// would read it, without training.
struct CheckpointCheck {
  int64_t step = 0;
  std::string problem;  // "": intact
  bool has_digests = false;  // false: written before checkpoints recorded SHA-256 digests
};
std::vector<CheckpointCheck> verify_checkpoints(const std::string& run_dir);

void save_checkpoint(const std::string& run_dir, const CheckpointMeta& meta, const CheckpointData& d, int64_t keep_last,
                     int64_t keep_step = -1);

// Atomically points weights/NAME at step_N.gguf (a relative link).
void move_link(const std::string& run_dir, const std::string& name, int64_t step);

// The steps of RUN/weights/step_N.gguf, ascending.
std::vector<int64_t> checkpoint_steps(const std::string& run_dir);

// Step that `latest` points to, or -1 when the run has no checkpoint.
int64_t latest_step(const std::string& run_dir);

// Reads the config stored with the latest checkpoint.
CheckpointMeta read_latest_meta(const std::string& run_dir);

// Loads params and moments of the latest checkpoint into `d`.
CheckpointMeta load_latest(const std::string& run_dir, const CheckpointData& d);

}  // namespace ggtrain::train
