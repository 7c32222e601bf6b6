#include "corpus/prepare/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"

namespace ggtrain::corpus {

namespace fs = std::filesystem;
using nlohmann::json;

std::string manifest_path(const std::string& dir) { return dir + "/manifest.json"; }

namespace {

// The files of one kind (a split's tokens or its flags) of the shards that
// hold tokens of that split; flags only where a shard was packed.
std::vector<std::string> shard_files(const std::vector<ShardRecord>& shards, const std::string& dir,
                                     int64_t ShardRecord::*tokens, std::string ShardRecord::*file, bool flags) {
  std::vector<std::string> out;
  for (const auto& s : shards)
    if (s.*tokens > 0 && (!flags || s.packed)) out.push_back(dir + "/" + s.*file);
  return out;
}

}  // namespace

std::vector<std::string> Manifest::train_paths(const std::string& dir) const {
  return shard_files(shards, dir, &ShardRecord::train_tokens, &ShardRecord::train_file, false);
}

std::vector<std::string> Manifest::val_paths(const std::string& dir) const {
  return shard_files(shards, dir, &ShardRecord::val_tokens, &ShardRecord::val_file, false);
}

std::vector<std::string> Manifest::train_flag_paths(const std::string& dir) const {
  return shard_files(shards, dir, &ShardRecord::train_tokens, &ShardRecord::train_flags_file, true);
}

std::vector<std::string> Manifest::val_flag_paths(const std::string& dir) const {
  return shard_files(shards, dir, &ShardRecord::val_tokens, &ShardRecord::val_flags_file, true);
}

void Manifest::recount() {
  documents = train_tokens = val_tokens = 0;
  packed.reset();
  for (const auto& s : shards) count(s);
}

void Manifest::count(const ShardRecord& s) {
  documents += s.documents;
  train_tokens += s.train_tokens;
  val_tokens += s.val_tokens;
  if (s.packed) {
    if (!packed) packed.emplace();
    *packed += *s.packed;
  }
}

namespace {

// PackCounts' fields by name, for both directions.
constexpr std::pair<const char*, int64_t PackCounts::*> kPackFields[] = {
    {"examples", &PackCounts::examples},
    {"val_examples", &PackCounts::val_examples},
    {"bad_skipped", &PackCounts::bad_skipped},
    {"too_long_skipped", &PackCounts::too_long_skipped},
    {"truncated", &PackCounts::truncated},
    {"split", &PackCounts::split},
    {"train_windows", &PackCounts::train_windows},
    {"val_windows", &PackCounts::val_windows},
    {"tokens", &PackCounts::tokens},
    {"trained_tokens", &PackCounts::trained_tokens},
    {"padding", &PackCounts::padding}};

json packed_json(const PackCounts& c) {
  json j = json::object();
  for (const auto& [name, field] : kPackFields) j[name] = c.*field;
  return j;
}

PackCounts packed_of(const json& j, const std::string& path) {
  PackCounts c;
  for (const auto& [name, field] : kPackFields) {
    c.*field = j.at(name).get<int64_t>();
    // Sums of these stay far from overflow: no corpus has 2^50 of anything.
    if (c.*field < 0 || c.*field > (int64_t(1) << 50))
      fail("{}: packed count {} = {} is negative or implausibly large", path, name, c.*field);
  }
  return c;
}

json to_json(const Manifest& m) {
  json sources = json::array(), shards = json::array();
  for (const auto& s : m.sources)
    sources.push_back({{"path", s.path},
                       {"size", s.size},
                       {"mtime_ns", s.mtime_ns},
                       {"sample_hash", s.sample_hash},
                       {"validation", s.validation}});
  for (const auto& s : m.shards) {
    json r{{"train", s.train_file},
           {"train_tokens", s.train_tokens},
           {"val", s.val_file},
           {"val_tokens", s.val_tokens},
           {"documents", s.documents},
           {"end", {{"source", s.end_source}, {"documents_in_source", s.end_documents_in_source}}}};
    if (s.packed) {
      r["train_flags"] = s.train_flags_file;
      r["val_flags"] = s.val_flags_file;
      r["packed"] = packed_json(*s.packed);
    }
    shards.push_back(std::move(r));
  }
  json totals{{"documents", m.documents},
              {"skipped_documents", m.skipped},
              {"bytes", m.bytes},
              {"train_tokens", m.train_tokens},
              {"val_tokens", m.val_tokens}};
  if (m.packed) totals["packed"] = packed_json(*m.packed);
  if (!m.first_skipped.empty()) totals["first_skipped"] = m.first_skipped;
  if (!m.first_bad_record.empty()) totals["first_bad_record"] = m.first_bad_record;
  return {{"format", Manifest::kFormat},
          {"options", json::parse(m.options)},
          {"tokenizer", {{"fingerprint", m.tokenizer_fingerprint}, {"vocab", m.vocab}}},
          {"sources", sources},
          {"shards", shards},
          {"complete", m.complete},
          {"totals", totals}};
}

// A shard file name must stay inside the folder: the manifest is input.
std::string shard_name(const json& j, const char* key, const std::string& path) {
  const std::string name = j.at(key).get<std::string>();
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    fail("{}: shard file name '{}' ({}) is not a plain file name", path, name, key);
  return name;
}

Manifest from_json(const json& j, const std::string& path) {
  Manifest m;
  m.options = j.at("options").dump();
  m.tokenizer_fingerprint = j.at("tokenizer").at("fingerprint").get<std::string>();
  m.vocab = j.at("tokenizer").at("vocab").get<int64_t>();
  for (const auto& s : j.at("sources"))
    m.sources.push_back({s.at("path").get<std::string>(), s.at("size").get<uint64_t>(), s.at("mtime_ns").get<int64_t>(),
                         s.at("sample_hash").get<uint64_t>(), s.at("validation").get<bool>()});
  for (const auto& s : j.at("shards")) {
    ShardRecord r;
    r.train_file = shard_name(s, "train", path);
    r.val_file = shard_name(s, "val", path);
    r.train_tokens = s.at("train_tokens").get<int64_t>();
    r.val_tokens = s.at("val_tokens").get<int64_t>();
    r.documents = s.at("documents").get<int64_t>();
    r.end_source = s.at("end").at("source").get<int64_t>();
    r.end_documents_in_source = s.at("end").at("documents_in_source").get<int64_t>();
    constexpr int64_t kMost = int64_t(1) << 50;  // the totals are sums of these
    if (r.train_tokens < 0 || r.val_tokens < 0 || r.documents < 0 || r.end_source < 0 ||
        r.end_source > int64_t(m.sources.size()) || r.end_documents_in_source < 0 || r.train_tokens > kMost ||
        r.val_tokens > kMost || r.documents > kMost)
      fail("{}: shard {} has a negative or implausibly large count, or an end outside the sources", path, r.train_file);
    if (s.contains("packed")) {
      r.train_flags_file = shard_name(s, "train_flags", path);
      r.val_flags_file = shard_name(s, "val_flags", path);
      r.packed = packed_of(s.at("packed"), path);
    }
    m.shards.push_back(r);
  }
  m.complete = j.at("complete").get<bool>();
  const auto& t = j.at("totals");
  m.documents = t.at("documents").get<int64_t>();
  m.skipped = t.at("skipped_documents").get<int64_t>();
  m.bytes = t.at("bytes").get<uint64_t>();
  m.train_tokens = t.at("train_tokens").get<int64_t>();
  m.val_tokens = t.at("val_tokens").get<int64_t>();
  for (auto [key, field] :
       {std::pair{"first_skipped", &m.first_skipped}, std::pair{"first_bad_record", &m.first_bad_record}})
    if (t.contains(key)) *field = t.at(key).get<std::string>().substr(0, 1000);  // a message, not a payload
  if (t.contains("packed")) packed_of(t.at("packed"), path);  // checked; the totals come from the shards
  m.recount();
  return m;
}

uint64_t sampled_hash(const std::string& path, uint64_t size) {
  constexpr uint64_t kMiB = 1 << 20;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::vector<char> buf(kMiB);
  uint64_t h = fnv1a(&size, sizeof size);
  for (const uint64_t at : {uint64_t(0), size > kMiB ? size - kMiB : uint64_t(0)}) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), off_t(at));
    if (n > 0) h = fnv1a(buf.data(), size_t(n), h);
  }
  ::close(fd);
  return h;
}

}  // namespace

std::optional<Manifest> read_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object (delete it to prepare the data again)", path);
  if (j.value("format", "") != Manifest::kFormat)
    fail("{}: format '{}' is not {} (delete it to prepare the data again)", path, j.value("format", "?"),
         Manifest::kFormat);
  try {
    return from_json(j, path);
  } catch (const json::exception& e) {
    fail("{}: a field is missing or has the wrong type ({}); delete it to prepare the data again", path, e.what());
  }
}

void write_manifest(const std::string& dir, const Manifest& m) {
  const std::string text = to_json(m).dump(1) + "\n";
  write_file_atomic(manifest_path(dir), text.data(), text.size());
}

SourceRecord describe_source(const InputFile& f, bool validation) {
  return {f.path, f.size, f.mtime_ns, sampled_hash(f.path, f.size), validation};
}

std::optional<std::string> changed_source(const std::vector<SourceRecord>& recorded) {
  for (const auto& s : recorded) {
    struct stat st {};
    if (::stat(s.path.c_str(), &st) != 0) return s.path + " (it is gone)";
    const uint64_t size = uint64_t(st.st_size);
    const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (size != s.size) return fmt::format("{} (its size was {} bytes, now {})", s.path, s.size, size);
    if (mtime != s.mtime_ns && sampled_hash(s.path, size) != s.sample_hash) return s.path + " (its content changed)";
  }
  return std::nullopt;
}

}  // namespace ggtrain::corpus
