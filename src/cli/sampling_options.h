#pragma once
// The sampling flags of the commands that generate (llama.cpp's names).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "infer/sampler.h"

namespace ggtrain::cli {

// -n/--n-predict: a count of tokens, or -1 for no limit (llama.cpp's).
inline void add_n_predict_option(CLI::App* cmd, int64_t& n, const std::string& description) {
  cmd->add_option("-n,--n-predict", n, description)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              if (std::stoll(v) >= -1) return "";
            } catch (const std::exception&) {
            }
            return "takes a number of tokens, or -1 for no limit (got " + v + ")";
          },
          "N >= -1"));
}

inline void add_sampling_options(CLI::App* cmd, infer::SamplerConfig& s, uint64_t& seed) {
  cmd->add_option("--temp", s.temperature, "Temperature; 0 is greedy (default 0.8)");
  cmd->add_option("--top-k", s.top_k, "Top-k, 0 off (default 40)");
  cmd->add_option("--top-p", s.top_p, "Top-p, 1 off (default 0.95)");
  cmd->add_option("--min-p", s.min_p, "Min-p, 0 off (default 0.05)");
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "Repeat penalty, 1 off (default 1)");
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "History the penalty sees (default 64)");
  cmd->add_option("-s,--seed", seed, "Sampling seed (default 42)");
}

}  // namespace ggtrain::cli
