#include "dashboard/run_view.h"

#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train/run_checkpoint.h"
#include "train/run_status.h"
#include "util/error.h"

namespace ggtrain::dashboard {

namespace fs = std::filesystem;

namespace {

// Whether `path` (symbolic links followed) lies inside `dir`: a file linked
// out of the run folder is never read for a watcher.
bool inside(const std::string& dir, const std::string& path) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return false;
  const fs::path p = fs::weakly_canonical(path, ec);
  if (ec) return false;
  const std::string r = root.string() + "/", q = p.string();
  return q.compare(0, r.size(), r) == 0;
}

std::string slurp_or_empty(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (!inside(dir, path)) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// train.steps from config.toml: the line `steps = N` under [train].
int64_t configured_steps(const std::string& toml) {
  std::istringstream in(toml);
  bool in_train = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[') in_train = line.rfind("[train]", 0) == 0;
    if (in_train && line.rfind("steps = ", 0) == 0) {
      try {
        return std::stoll(line.substr(8));
      } catch (const std::exception&) {
        return 0;
      }
    }
  }
  return 0;
}

// The step a weights/NAME link points to, or -1.
int64_t link_step(const std::string& dir, const char* name) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(fs::path(dir) / "weights" / name, ec);
  if (ec) return -1;
  const std::string f = target.filename().string();
  if (f.rfind("step_", 0) != 0) return -1;
  try {
    return std::stoll(f.substr(5));
  } catch (const std::exception&) {
    return -1;
  }
}

bool process_gone(int64_t pid) { return pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH; }

void judge_state(RunSummary& r) {
  const auto status = inside(r.dir, r.dir + "/status.json") ? train::read_run_status(r.dir) : std::nullopt;
  if (!status) {
    // A folder written before status.json existed, or with a torn one.
    r.state = r.steps > 0 && r.last_checkpoint >= r.steps ? "finished" : "stopped";
    return;
  }
  r.state = std::string(train::run_state_name(status->state));
  r.detail = status->message;
  r.host = status->host;
  if (train::has_process(status->state)) {
    if (status->host == train::host_name() && process_gone(status->pid)) {
      r.state = "failed";
      r.detail = fmt::format("its training process ({}) ended without a word (killed?); resume with ggtrain train "
                             "--resume --run-dir {}",
                             status->pid, r.dir);
    } else {
      r.detail = fmt::format("process {} on {}", status->pid, status->host);
    }
  }
}

}  // namespace

void check_run_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{}: no such folder; give a run folder (ggtrain train --run-dir)", dir);
  for (const char* part : {"metrics.jsonl", "config.toml", "weights"})
    if (fs::exists(fs::path(dir) / part, ec)) return;
  fail("{}: not a run folder (it has no metrics.jsonl, config.toml or weights/); give a folder that ggtrain train "
       "--run-dir wrote",
       dir);
}

RunSummary read_run_summary(const std::string& dir) {
  RunSummary r;
  r.dir = dir;
  r.name = fs::path(dir).lexically_normal().filename().string();
  if (r.name.empty() || r.name == ".") r.name = fs::path(dir).lexically_normal().parent_path().filename().string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    r.state = "missing";
    r.detail = "the folder is gone";
    return r;
  }
  r.config_toml = slurp_or_empty(dir, "config.toml");
  r.steps = configured_steps(r.config_toml);
  try {
    const int64_t latest = link_step(dir, "latest"), best = link_step(dir, "best.gguf");
    for (const int64_t step : train::checkpoint_steps(dir)) {
      const auto bytes = fs::file_size(train::weights_path(dir, step), ec);
      r.checkpoints.push_back({step, ec ? 0 : int64_t(bytes), step == latest, step == best});
    }
    r.last_checkpoint = r.checkpoints.empty() ? -1 : r.checkpoints.back().step;
  } catch (const std::exception&) {
    // The folder changed under us (a checkpoint rotated away): next time.
  }
  judge_state(r);
  return r;
}

std::vector<std::string> read_records(const std::string& dir, int64_t offset, int64_t max_records, int64_t* next_offset,
                                      int64_t* skipped) {
  std::vector<std::string> out;
  *next_offset = offset;
  if (!inside(dir, dir + "/metrics.jsonl")) return out;
  std::ifstream in(dir + "/metrics.jsonl", std::ios::binary);
  if (!in) return out;
  in.seekg(offset);
  if (!in) return out;
  std::string line;
  while (int64_t(out.size()) < max_records && std::getline(in, line)) {
    if (in.eof()) break;  // no newline: not written to the end yet
    *next_offset += int64_t(line.size()) + 1;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number()) {
      ++*skipped;
      continue;
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace ggtrain::dashboard
