#include "train/run_folder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <vector>

#include "gguf/reader.h"
#include "train/run_checkpoint.h"
#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::train {

namespace fs = std::filesystem;

void create_run_folder(const std::string& run_dir) {
  if (fs::exists(run_dir) && !fs::is_directory(run_dir)) fail("{}: the run folder is not a directory", run_dir);
  std::error_code ec;
  fs::create_directories(run_dir + "/data", ec);
  if (ec) fail("{}/data: cannot create the run folder: {}", run_dir, ec.message());
}

void remove_stale_temp_files(const std::string& run_dir, bool quiet) {
  static const std::regex tmp_name(R"((.*\.tmp\.[A-Za-z0-9]{6})|(\.latest\.tmp))");
  int removed = 0;
  for (const char* sub : {"", "/weights", "/state", "/data"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir + sub, ec)) {
      if (!std::regex_match(e.path().filename().string(), tmp_name)) continue;
      std::error_code rm;
      if (fs::remove(e.path(), rm)) ++removed;
    }
  }
  if (removed > 0 && !quiet)
    fmt::print(stderr, "removed {} temporary file(s) left by an interrupted write in {}\n", removed, run_dir);
}

void check_same_model(const RunConfig& now, const RunConfig& saved, const std::string& run_dir, int64_t step) {
  std::vector<std::string> diffs;
  for (const auto& field : model::config_fields())
    if (!model::same_field(now.model, saved.model, field))
      diffs.push_back(fmt::format("model.{} is {} but the checkpoint has {}", field.name,
                                  model::field_text(now.model, field), model::field_text(saved.model, field)));
  if (!diffs.empty())
    fail("{}: cannot resume step {} with a different model: {} (on --resume, --set may change "
         "train.* and checkpoint.* keys, not model.*; start a new run in another --run-dir)",
         run_dir, step, fmt::join(diffs, "; "));
}

void check_same_vocabulary(const tokenizer::Tokenizer& tok, const std::string& tok_source, const std::string& weights) {
  gguf::GgufFile w(weights);
  const tokenizer::Tokenizer ck = tokenizer::Tokenizer::from_gguf(w);
  const std::string fix = "resume with the tokenizer the run was trained with";
  if (ck.vocab_size() != tok.vocab_size())
    fail("{}: vocabulary mismatch: the checkpoint has {} tokens but the tokenizer {} has {}; {}", weights,
         ck.vocab_size(), tok_source, tok.vocab_size(), fix);
  for (int32_t i = 0; i < int32_t(tok.vocab_size()); ++i)
    if (ck.piece(i) != tok.piece(i) || ck.token_type(i) != tok.token_type(i))
      fail("{}: vocabulary mismatch: token {} is '{}' in the checkpoint but '{}' in the tokenizer "
           "{}; {}",
           weights, i, ck.piece(i), tok.piece(i), tok_source, fix);
}

std::string new_run_id() {
  Rng rng(uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) ^ uint64_t(::getpid()));
  return fmt::format("{:016x}", rng.next_u64());
}

std::string last_checkpoint_text(const std::string& run_dir) {
  int64_t step = -1;
  try {
    step = latest_step(run_dir);
  } catch (const Error&) {
  }
  return step < 0 ? std::string("there is no checkpoint yet")
                  : fmt::format("the last checkpoint {} is intact", weights_path(run_dir, step));
}

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./+:@%,=") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace ggtrain::train
