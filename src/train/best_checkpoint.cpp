#include "train/best_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "train/run_checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

std::string best_json(const std::string& run_dir) { return run_dir + "/weights/best.json"; }

}  // namespace

std::optional<BestCheckpoint> read_best(const std::string& run_dir) {
  const std::string path = best_json(run_dir);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("metric") || !j["metric"].is_string() || !j.contains("value") ||
      !j["value"].is_number() || !j.contains("step") || !j["step"].is_number_integer())
    fail("{}: not the best checkpoint's record ({{\"metric\", \"value\", \"step\"}}); delete it to start keeping "
         "the best afresh",
         path);
  return BestCheckpoint{j["metric"].get<std::string>(), j["value"].get<double>(), j["step"].get<int64_t>()};
}

void write_best(const std::string& run_dir, const BestCheckpoint& best) {
  if (!std::filesystem::exists(weights_path(run_dir, best.step)))
    fail("{}: missing; the best checkpoint must be written first", weights_path(run_dir, best.step));
  const std::string text = nlohmann::json{{"metric", best.metric},
                                          {"value", best.value},
                                          {"step", best.step},
                                          {"file", std::filesystem::path(weights_path(run_dir, best.step)).filename()}}
                               .dump() +
                           "\n";
  write_file_atomic(best_json(run_dir), text.data(), text.size());
  move_link(run_dir, "best.gguf", best.step);
}

}  // namespace ggtrain::train
