#include "train/run_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "quant/gguf_floats.h"
#include "train/qat.h"
#include "train/run_variant.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ggtrain::train {

namespace fs = std::filesystem;
using gguf::Value;

std::string weights_path(const std::string& run_dir, int64_t step) {
  return fmt::format("{}/weights/step_{}.gguf", run_dir, step);
}

std::string state_path(const std::string& run_dir, int64_t step) {
  return fmt::format("{}/state/step_{}.gguf", run_dir, step);
}

namespace {

// The one writer of a checkpoint's weights file: the run's keys, then what
// the variant's file holds (the model, an adapter, a folded model) and its
// tokenizer keys.
void write_weights(const std::string& path, const CheckpointMeta& meta, const CheckpointData& d) {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str(d.config->arch));
  w.set("general.name", Value::str("ggtrain-" + meta.run_id));
  w.set("general.run_id", Value::str(meta.run_id));
  w.set("general.step", Value::u64(uint64_t(meta.step)));
  w.set("ggtrain.checkpoint_format", Value::u32(kCheckpointFormat));
  const std::vector<float> folded = d.variant->add_weights(w, d);  // the writer points into it until written
  w.set("ggtrain.n_params_written", Value::u64(w.element_count()));
  d.variant->add_tokenizer(w, *d.tokenizer);
  w.write(path);
}

// The AdamW moments as the state file holds them: each trainable tensor's m
// then its v, in the order they are written and read back.
std::string moments_sha256(const CheckpointData& d) {
  Sha256 h;
  const auto& [m, v] = d.optimizer->moments();
  for (const auto& t : d.grad_layout->tensors()) {
    h.update(m.data() + t.offset, size_t(t.size) * 4);
    h.update(v.data() + t.offset, size_t(t.size) * 4);
  }
  return h.hex();
}

std::string moments_sha256(const gguf::GgufFile& s) {
  Sha256 h;
  for (const auto& t : s.tensors())
    if (t.name.rfind("adam.", 0) == 0) h.update(t.data, size_t(t.n_bytes));
  return h.hex();
}

// `weights_sha256`: the digest of the step's weights file, written before.
void write_state(const std::string& path, const CheckpointMeta& meta, const CheckpointData& d,
                 const std::string& weights_sha256) {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("ggtrain-state"));
  w.set("ggtrain.checkpoint_format", Value::u32(kCheckpointFormat));
  w.set("ggtrain.run_id", Value::str(meta.run_id));
  w.set("ggtrain.step", Value::u64(uint64_t(meta.step)));
  // Source 0 under the keys a single-source run always had; a mixture adds
  // the window count and one pair per further source.
  w.set("ggtrain.data.epoch", Value::u64(meta.loader.sources.at(0).epoch));
  w.set("ggtrain.data.cursor", Value::u64(meta.loader.sources.at(0).cursor));
  if (meta.loader.sources.size() > 1) {
    w.set("ggtrain.data.windows_drawn", Value::u64(meta.loader.drawn));
    for (size_t k = 1; k < meta.loader.sources.size(); ++k) {
      w.set(fmt::format("ggtrain.data.source.{}.epoch", k), Value::u64(meta.loader.sources[k].epoch));
      w.set(fmt::format("ggtrain.data.source.{}.cursor", k), Value::u64(meta.loader.sources[k].cursor));
    }
  }
  w.set("ggtrain.config", Value::str(meta.config_toml));
  if (meta.best) {
    w.set("ggtrain.best.metric", Value::str(meta.best->metric));
    w.set("ggtrain.best.value", Value::f64(meta.best->value));
    w.set("ggtrain.best.step", Value::u64(uint64_t(meta.best->step)));
  }
  w.set(kWeightsSha256Key, Value::str(weights_sha256));
  w.set(kMomentsSha256Key, Value::str(moments_sha256(d)));
  w.set(kAdamStepsKey, Value::u64(uint64_t(d.optimizer->steps_taken())));
  d.variant->write_state(w, d);
  if (d.qat) d.qat->add_errors(w);
  const auto& [m, v] = d.optimizer->moments();
  for (const auto& t : d.grad_layout->tensors()) {  // frozen tensors have no moments
    quant::add_float_tensor(w, "adam.m." + t.name, gguf::TensorType::F32, model::ggml_ne(t.shape), m.data() + t.offset);
    quant::add_float_tensor(w, "adam.v." + t.name, gguf::TensorType::F32, model::ggml_ne(t.shape), v.data() + t.offset);
  }
  w.write(path);
}

std::vector<int64_t> steps_in(const std::string& dir) {
  std::vector<int64_t> steps;
  static const std::regex re("step_([0-9]+)\\.gguf");
  if (!fs::is_directory(dir)) return steps;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) steps.push_back(std::stoll(m[1]));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Old pairs that cannot be removed are left in place (with a warning): the
// new checkpoint is complete, so that is no reason to stop a run.
void prune(const std::string& run_dir, int64_t keep_last, int64_t latest, int64_t keep_step) {
  if (keep_last <= 0) return;
  auto steps = steps_in(run_dir + "/weights");
  if (int64_t(steps.size()) <= keep_last) return;
  for (size_t i = 0; i + size_t(keep_last) < steps.size(); ++i) {
    if (steps[i] == latest || steps[i] == keep_step) continue;
    for (const auto& p : {weights_path(run_dir, steps[i]), state_path(run_dir, steps[i])}) {
      std::error_code ec;
      fs::remove(p, ec);
      if (ec) fmt::print(stderr, "ggtrain: warning: {}: cannot remove old checkpoint: {}\n", p, ec.message());
    }
  }
}

void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the checkpoint folder: {}", dir, ec.message());
}

// Removes files of a checkpoint that was not completed (best effort: the
// folder may be the very thing that failed). `latest` never points to them.
void discard(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    std::error_code ec;
    fs::remove(p, ec);
  }
}

CheckpointMeta read_state_meta(const gguf::GgufFile& s, int64_t expect_step) {
  if (s.get_string("general.architecture") != "ggtrain-state") fail("{}: not a ggtrain state file", s.path());
  if (s.get_uint("ggtrain.checkpoint_format") != kCheckpointFormat)
    fail("{}: ggtrain.checkpoint_format {} is not supported", s.path(), s.get_uint("ggtrain.checkpoint_format"));
  CheckpointMeta m;
  m.step = int64_t(s.get_uint("ggtrain.step"));
  if (m.step != expect_step) fail("{}: ggtrain.step is {}, expected {}", s.path(), m.step, expect_step);
  m.run_id = s.get_string("ggtrain.run_id");
  m.config_toml = s.get_string("ggtrain.config");
  m.loader.sources.push_back({s.get_uint("ggtrain.data.epoch"), s.get_uint("ggtrain.data.cursor")});
  if (s.find("ggtrain.best.metric")) {
    m.best = BestCheckpoint{s.get_string("ggtrain.best.metric"), s.get_float("ggtrain.best.value"),
                            int64_t(s.get_uint("ggtrain.best.step"))};
    if (m.best->step > m.step)
      fail("{}: ggtrain.best.step {} lies after the checkpoint's step {}", s.path(), m.best->step, m.step);
  }
  if (s.find("ggtrain.data.windows_drawn")) {
    m.loader.drawn = s.get_uint("ggtrain.data.windows_drawn");
    for (size_t k = 1; s.find(fmt::format("ggtrain.data.source.{}.epoch", k)); ++k)
      m.loader.sources.push_back({s.get_uint(fmt::format("ggtrain.data.source.{}.epoch", k)),
                                  s.get_uint(fmt::format("ggtrain.data.source.{}.cursor", k))});
  }
  return m;
}

// Error naming the file whose bytes no longer have the digest `state`
// recorded; nothing when they do, or when `state` predates the digests.
void verify_checkpoint_files(const std::string& weights, const gguf::GgufFile& state) {
  const gguf::Value* ws = state.find(kWeightsSha256Key);
  const gguf::Value* ms = state.find(kMomentsSha256Key);
  if (!ws || !ms) return;  // written before checkpoints recorded digests
  if (sha256_of_file(weights) != ws->s)
    fail("{}: its bytes no longer have the SHA-256 digest {} recorded when the checkpoint was written: the file "
         "changed on disk. Restore it from a copy, or point weights/latest at an earlier step_N.gguf whose pair is "
         "intact (`ggtrain verify RUN_DIR` checks every checkpoint)",
         weights, state.path());
  if (moments_sha256(state) != ms->s)
    fail("{}: its AdamW moments no longer have the SHA-256 digest the file recorded when it was written: the file "
         "changed on disk. Restore it from a copy, or point weights/latest at an earlier checkpoint whose pair is "
         "intact (`ggtrain verify RUN_DIR` checks every checkpoint)",
         state.path());
}

// A step's weights and state opened and checked as a resume needs them: the
// state is of that step, both files are of one run, and their bytes still
// have the digests the state recorded (when it recorded them).
struct CheckpointPair {
  gguf::GgufFile weights, state;
  CheckpointMeta meta;
  CheckpointPair(const std::string& run_dir, int64_t step)
      : weights(weights_path(run_dir, step)), state(state_path(run_dir, step)), meta(read_state_meta(state, step)) {
    if (weights.get_uint("general.step") != uint64_t(step) || weights.get_string("general.run_id") != meta.run_id)
      fail("{}: general.step/general.run_id do not match the state file {}", weights.path(), state.path());
    verify_checkpoint_files(weights.path(), state);
  }
};

}  // namespace

void move_link(const std::string& run_dir, const std::string& name, int64_t step) {
  const std::string dir = run_dir + "/weights";
  const std::string tmp = dir + "/." + name + ".tmp";
  ::unlink(tmp.c_str());
  const std::string target = fmt::format("step_{}.gguf", step);
  if (::symlink(target.c_str(), tmp.c_str()) != 0) fail("{}: cannot create symlink: {}", tmp, errno_text(errno));
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0)
    fail("{}/{}: cannot replace symlink: {}", dir, name, errno_text(errno));
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void save_checkpoint(const std::string& run_dir, const CheckpointMeta& meta, const CheckpointData& d, int64_t keep_last,
                     int64_t keep_step) {
  make_dir(run_dir + "/weights");
  make_dir(run_dir + "/state");
  const std::string wp = weights_path(run_dir, meta.step), sp = state_path(run_dir, meta.step);
  // A step `latest` already names is never deleted, even if rewriting it fails.
  const bool rewrite = latest_step(run_dir) == meta.step;
  try {
    write_weights(wp, meta, d);  // each write is atomic: no partial file on failure
    write_state(sp, meta, d, sha256_of_file(wp));  // the digest of what landed on disk
    move_link(run_dir, "latest", meta.step);
  } catch (const Error&) {
    if (!rewrite) discard({wp, sp});  // a complete weights file without its state is no checkpoint
    throw;
  }
  prune(run_dir, keep_last, meta.step, keep_step);
}

std::vector<int64_t> checkpoint_steps(const std::string& run_dir) { return steps_in(run_dir + "/weights"); }

int64_t latest_step(const std::string& run_dir) {
  const std::string link = run_dir + "/weights/latest";
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(link, ec))) return -1;
  const std::string target = fs::read_symlink(link).string();
  static const std::regex re("step_([0-9]+)\\.gguf");
  std::smatch m;
  if (!std::regex_match(target, m, re)) fail("{}: points to '{}', not a step_N.gguf checkpoint", link, target);
  return std::stoll(m[1]);
}

CheckpointMeta read_latest_meta(const std::string& run_dir) {
  const int64_t step = latest_step(run_dir);
  if (step < 0) fail("{}: no checkpoint to resume from (weights/latest is missing)", run_dir);
  const std::string sp = state_path(run_dir, step), wp = weights_path(run_dir, step);
  std::error_code ec;
  if (!fs::exists(wp, ec))
    fail("{}: missing: weights/latest points to it, so the run has no checkpoint to resume from "
         "(its state file {} alone is not a model)",
         wp, sp);
  if (!fs::exists(sp, ec))
    fail("{}: missing: weights/latest points to step {} but its optimizer state file is gone, so "
         "the run cannot resume exactly ({} is still a complete model)",
         sp, step, weights_path(run_dir, step));
  gguf::GgufFile s(sp);
  return read_state_meta(s, step);
}

std::vector<CheckpointCheck> verify_checkpoints(const std::string& run_dir) {
  std::vector<CheckpointCheck> out;
  for (const int64_t step : checkpoint_steps(run_dir)) {
    CheckpointCheck c;
    c.step = step;
    try {
      const std::string sp = state_path(run_dir, step);
      if (!fs::exists(sp)) fail("{}: missing: the checkpoint has its weights but not its optimizer state", sp);
      const CheckpointPair p(run_dir, step);
      c.has_digests = p.state.find(kWeightsSha256Key) && p.state.find(kMomentsSha256Key);
    } catch (const Error& e) {
      c.problem = e.what();
    }
    out.push_back(c);
  }
  return out;
}

CheckpointMeta load_latest(const std::string& run_dir, const CheckpointData& d) {
  const int64_t step = latest_step(run_dir);
  if (step < 0) fail("{}: no checkpoint to resume from", run_dir);
  const CheckpointPair p(run_dir, step);
  const gguf::GgufFile& s = p.state;
  d.variant->load(p.weights, s, d);
  if (d.qat) d.qat->load_errors(s);
  size_t n_moments = 0;
  for (const auto& ti : s.tensors()) n_moments += ti.name.rfind("adam.m.", 0) == 0;
  if (n_moments != d.grad_layout->tensors().size())
    fail("{}: holds AdamW moments for {} tensors but this run trains {}; train.freeze / train.lora "
         "cannot change on --resume",
         s.path(), n_moments, d.grad_layout->tensors().size());
  auto& [m, v] = d.optimizer->moments();
  for (const auto& t : d.grad_layout->tensors()) {
    for (auto [prefix, dst] : {std::pair{"adam.m.", m.data()}, std::pair{"adam.v.", v.data()}}) {
      const auto& ti = s.tensor(prefix + t.name);
      if (ti.type != gguf::TensorType::F32 || ti.shape() != model::ggml_ne(t.shape))
        fail("{}: tensor '{}{}' has the wrong type or shape", s.path(), prefix, t.name);
      std::memcpy(dst + t.offset, ti.data, size_t(t.size) * 4);
    }
  }
  const uint64_t updates = s.get_uint_or(kAdamStepsKey, uint64_t(step));
  if (updates > uint64_t(step)) fail("{}: {} is {}, more than the step {}", s.path(), kAdamStepsKey, updates, step);
  d.optimizer->set_steps_taken(int64_t(updates));
  return p.meta;
}

}  // namespace ggtrain::train
