#pragma once
// A run folder as a person watching it sees it: its state, its records
// (metrics.jsonl, read incrementally and tolerating a torn last line), its
// config, its checkpoints. What `ggtrain serve` and `ggtrain report` show.
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::dashboard {

struct Checkpoint {
  int64_t step = 0;
  int64_t bytes = 0;  // weights/step_N.gguf
  bool latest = false;  // weights/latest points to it
  bool best = false;  // weights/best.gguf points to it (checkpoint.keep_best)
};

struct RunSummary {
  std::string dir;  // as given
  std::string name;  // the folder's name
  // running, finished, stopped, failed (RUN/status.json, a running one whose
  // process is gone is failed), or missing (the folder went away).
  std::string state;
  std::string detail;  // why it failed or stopped, whose process runs it
  std::string host;
  int64_t steps = 0;  // train.steps; 0 when unknown
  int64_t last_checkpoint = -1;
  std::string config_toml;
  std::vector<Checkpoint> checkpoints;
};

// Error naming `dir` when it is not a run folder (none of metrics.jsonl,
// config.toml, weights/).
void check_run_folder(const std::string& dir);

// What the folder holds now; a folder that went away reads as "missing".
RunSummary read_run_summary(const std::string& dir);

// The records of RUN/metrics.jsonl from byte `offset` on, at most
// `max_records`, each a JSON object text; *next_offset is where to go on.
// A last line without its newline (being written, or torn by a crash) is
// left for the next read; a complete line that is not a JSON object with a
// step is skipped and counted in *skipped.
std::vector<std::string> read_records(const std::string& dir, int64_t offset, int64_t max_records, int64_t* next_offset,
                                      int64_t* skipped);

}  // namespace ggtrain::dashboard
