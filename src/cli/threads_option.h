#pragma once
// -t/--threads N for the commands that run a model (llama.cpp's flag): the
// OpenMP threads of the kernels and GEMMs. 0 (the default) keeps OpenMP's
// own choice (OMP_NUM_THREADS, else every core).
#include <omp.h>
#include <CLI/CLI.hpp>

#include <cstdint>

namespace ggtrain::cli {

inline void add_threads_option(CLI::App* cmd, int64_t& threads) {
  cmd->add_option("-t,--threads", threads, "Threads (default: OMP_NUM_THREADS, else every core)")
      ->check(CLI::NonNegativeNumber);
}

inline void apply_threads_option(int64_t threads) {
  if (threads > 0) omp_set_num_threads(int(threads));
}

}  // namespace ggtrain::cli
