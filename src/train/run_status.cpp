#include "train/run_status.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/atomic_file.h"

namespace ggtrain::train {

namespace {

constexpr std::string_view kNames[] = {"running", "finished", "stopped", "failed", "preparing"};

std::string path_of(const std::string& run_dir) { return run_dir + "/status.json"; }

}  // namespace

std::string_view run_state_name(RunState s) { return kNames[int(s)]; }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

RunStatus current_process_status(RunState state, int64_t step, int64_t steps, std::string message) {
  RunStatus s;
  s.state = state;
  s.pid = int64_t(getpid());
  s.host = host_name();
  s.step = step;
  s.steps = steps;
  s.message = std::move(message);
  s.updated_unix_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return s;
}

void write_run_status(const std::string& run_dir, const RunStatus& s) {
  const nlohmann::json j{{"state", run_state_name(s.state)},
                         {"pid", s.pid},
                         {"host", s.host},
                         {"step", s.step},
                         {"steps", s.steps},
                         {"message", s.message},
                         {"updated_unix_s", s.updated_unix_s}};
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_file_atomic(path_of(run_dir), text.data(), text.size());
}

std::optional<RunStatus> read_run_status(const std::string& run_dir) {
  std::ifstream in(path_of(run_dir));
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto integer = [&](const char* k) { return j.contains(k) && j[k].is_number_integer(); };
  auto text = [&](const char* k) { return j.contains(k) && j[k].is_string(); };
  if (!text("state") || !integer("pid") || !integer("step") || !integer("steps") || !text("host")) return std::nullopt;
  RunStatus s;
  bool known = false;
  for (int i = 0; i < int(std::size(kNames)); ++i)
    if (j["state"].get<std::string>() == kNames[i]) {
      s.state = RunState(i);
      known = true;
    }
  if (!known) return std::nullopt;
  s.pid = j["pid"].get<int64_t>();
  s.host = j["host"].get<std::string>();
  s.step = j["step"].get<int64_t>();
  s.steps = j["steps"].get<int64_t>();
  if (text("message")) s.message = j["message"].get<std::string>();
  if (j.contains("updated_unix_s") && j["updated_unix_s"].is_number())
    s.updated_unix_s = j["updated_unix_s"].get<double>();
  return s;
}

}  // namespace ggtrain::train
