#pragma once
// Helpers for tests that run whole training runs: a synthetic corpus, temp
// folders, and byte-level comparison of GGUF tensor data.
#include <string>

#include "train/run_config.h"

namespace ggtrain::test_support {

// A fresh empty folder under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Deterministic English-like text, one sentence per line.
void write_synthetic_corpus(const std::string& path, int lines);

// The tiny preset on `corpus`, single-threaded, quiet-sized for tests.
train::RunConfig tiny_run_config(const std::string& corpus, int64_t steps);

// True when every tensor of both GGUF files has the same name, type, shape
// and bytes (metadata such as run ids may differ). Explains the first
// difference in *why.
bool same_tensor_data(const std::string& a, const std::string& b, std::string* why);

}  // namespace ggtrain::test_support
