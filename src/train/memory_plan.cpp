#include "train/memory_plan.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ggtrain::train {

namespace {

// "3.25 GiB", or "12.5 MiB" under a GiB
std::string size_text(int64_t bytes) {
  const double mib = double(bytes) / double(1 << 20);
  return mib >= 1024 ? fmt::format("{:.2f} GiB", mib / 1024) : fmt::format("{:.1f} MiB", mib);
}

// "weights 1.2 GiB, gradients ..., activations 3.0 GiB"
std::string parts_text(const MemoryPlan& p) {
  const std::string held =
      p.held_weights > 0 ? fmt::format(" + {} held quantized (mapped from the base)", size_text(p.held_weights)) : "";
  return fmt::format("weights {}{}, gradients {}, AdamW moments {}, activations {}", size_text(p.float_weights), held,
                     size_text(p.gradients), size_text(p.moments), size_text(p.activations));
}

}  // namespace

std::string memory_plan_text(const MemoryPlan& p, int64_t available) {
  const std::string of = available > 0 ? fmt::format(" of {} available", size_text(available)) : "";
  return fmt::format("memory: {}: {}{}", parts_text(p), size_text(p.total()), of);
}

int64_t memory_available(double limit_gib) {
  if (limit_gib > 0) return int64_t(limit_gib * double(int64_t(1) << 30));
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void check_memory_plan(const MemoryPlan& p, int64_t available, double limit_gib) {
  if (available <= 0 || p.total() <= available) return;
  fail("the run needs about {} ({}) but {} is available ({}); lower train.batch or train.seq_len, set "
       "train.recompute = \"all\", finetune with LoRA (train.lora.rank) on a quantized base, or free memory",
       size_text(p.total()), parts_text(p), size_text(available),
       limit_gib > 0 ? fmt::format("train.memory_limit = {}", limit_gib) : "MemAvailable in /proc/meminfo");
}

}  // namespace ggtrain::train
