#pragma once
// Helpers for tests that run whole training runs: a synthetic corpus, temp
// folders, and byte-level comparison of GGUF tensor data.
#include <string>

#include "support/temp_dir.h"
#include "train/run_config.h"

namespace ggtrain::test_support {


// Deterministic English-like text, one sentence per line.
void write_synthetic_corpus(const std::string& path, int lines);

// The tiny preset on `corpus`, single-threaded, quiet-sized for tests.
train::RunConfig tiny_run_config(const std::string& corpus, int64_t steps);

// True when every tensor of both GGUF files has the same name, type, shape
// and bytes (metadata such as run ids may differ). Explains the first
// difference in *why.
bool same_tensor_data(const std::string& a, const std::string& b, std::string* why);

}  // namespace ggtrain::test_support
