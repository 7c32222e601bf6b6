#pragma once
// Reader for the `ggtrain-ref` reference states (tests/fixtures/README.md):
// a model, a batch, and an independent float64 implementation's logits,
// loss, gradients and weights after one AdamW step.
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "optim/adamw.h"

namespace ggtrain::test_support {

struct ReferenceState {
  std::string path;
  model::Config config;
  int64_t batch = 0, seq_len = 0;
  std::vector<int32_t> inputs, targets;  // [B, T] each
  std::vector<float> logits;  // [B, T, V]
  double loss = 0;
  optim::AdamWConfig adamw;
  double lr = 0;
  int64_t adamw_step = 0;
  std::map<std::string, std::vector<float>> weights, grads, after_step;
};

ReferenceState load_reference_state(const std::string& path);

struct FolderCount {
  std::string folder;
  size_t reference_files;
};

// Every *.gguf whose general.architecture is "ggtrain-ref", from the
// fixtures folder and from each folder in $GGTRAIN_EXTRA_FIXTURES
// (':'-separated); how many came from each folder goes to *counts. Throws,
// naming the folder, when one of them does not exist.
std::vector<std::string> find_reference_states(const std::string& fixtures_dir,
                                               std::vector<FolderCount>* counts = nullptr);

}  // namespace ggtrain::test_support
