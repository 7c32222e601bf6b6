// Which files a corpus spec names: literal files, folders walked
// recursively, and globs matched one path component at a time.
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "corpus/input/documents.h"
#include "corpus/input/token_documents.h"
#include "util/error.h"

namespace ggtrain::corpus {

namespace {

namespace fs = std::filesystem;

bool is_hidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

bool has_glob_chars(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "" stands for the current folder, so that a relative glob such as `*.txt`
// gives `a.txt` rather than `./a.txt`.
std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// A path that lstat() sees but stat() does not is a symlink whose target is
// gone: the user named (or globbed) it as data, so it is an error rather
// than nothing.
[[noreturn]] void fail_unreadable(const std::string& path, int err, const std::string& key) {
  fail("{}: cannot read: {} ({})", path, errno_text(err), key);
}

// Adds `path` when it is (or links to) a regular file; folders and special
// files are ignored, a dangling symlink fails.
void add_if_file(const std::string& path, const std::string& key, std::vector<std::string>* out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) == 0) fail_unreadable(path, err, key);
    return;  // vanished between listing and stat: not ours to report
  }
  if (S_ISREG(st.st_mode)) out->push_back(path);
}

// The names in a folder, failing (naming the folder) when it cannot be listed.
std::vector<fs::directory_entry> list_folder(const std::string& dir, const std::string& key) {
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? "." : dir, ec), end;
  std::vector<fs::directory_entry> entries;
  for (; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) fail("{}: cannot read folder: {} ({})", dir.empty() ? "." : dir, ec.message(), key);
  return entries;
}

bool is_real_folder(const fs::directory_entry& e) {
  std::error_code ec;
  return e.symlink_status(ec).type() == fs::file_type::directory;
}

bool is_folder(const std::string& path) {
  struct stat st {};
  return ::stat(path.empty() ? "." : path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Every regular file below `dir`. Symlinked folders are not followed, so a
// link cycle cannot make the walk endless; symlinked files are.
void walk_folder(const std::string& dir, const std::string& key, std::vector<std::string>* out) {
  for (const auto& e : list_folder(dir, key)) {
    std::string name = e.path().filename().string();
    if (is_hidden(name)) continue;
    std::string path = join(dir, name);
    if (is_real_folder(e)) walk_folder(path, key, out);
    else add_if_file(path, key, out);
  }
}

// Matches pattern components [idx, end) below `dir`. `**` stands for zero or
// more real (not symlinked) folders; other components go to fnmatch, whose
// FNM_PERIOD keeps `*`, `?` and `[...]` off hidden names.
class GlobMatcher {
 public:
  GlobMatcher(std::vector<std::string> parts, const std::string& key) : parts_(std::move(parts)), key_(key) {}

  void match(const std::string& dir, size_t idx, std::vector<std::string>* out) const {
    if (!is_folder(dir)) return;
    if (parts_[idx] == "**") {
      match(dir, idx + 1, out);
      for (const auto& e : list_folder(dir, key_)) {
        std::string name = e.path().filename().string();
        if (!is_hidden(name) && is_real_folder(e)) match(join(dir, name), idx, out);
      }
      return;
    }
    bool last = idx + 1 == parts_.size();
    for (const auto& e : list_folder(dir, key_)) {
      std::string name = e.path().filename().string();
      if (::fnmatch(parts_[idx].c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
      if (last) add_if_file(join(dir, name), key_, out);
      else match(join(dir, name), idx + 1, out);
    }
  }

 private:
  std::vector<std::string> parts_;
  std::string key_;
};

std::vector<std::string> split_path(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t slash = spec.find('/', start);
    if (slash == std::string::npos) slash = spec.size();
    if (slash > start) parts.push_back(spec.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// The glob's literal leading folders are the starting point; the walk
// begins at the first component with a wildcard.
void expand_glob(const std::string& spec, const std::string& key, std::vector<std::string>* out) {
  std::vector<std::string> parts = split_path(spec);
  // A trailing `**` means every file below, as `**/*` does.
  if (!parts.empty() && parts.back() == "**") parts.push_back("*");
  size_t first_glob = 0;
  while (first_glob < parts.size() && !has_glob_chars(parts[first_glob])) ++first_glob;
  std::string base = spec.starts_with('/') ? "/" : "";
  for (size_t i = 0; i < first_glob; ++i) base = join(base, parts[i]);
  if (first_glob == parts.size()) return;  // wildcard only in an ignored spot: nothing to walk
  std::vector<std::string> parts_from_glob(parts.begin() + first_glob, parts.end());
  GlobMatcher(parts_from_glob, key).match(base, 0, out);
}

// The files one spec names, sorted (bytewise, by path) and without repeats.
std::vector<std::string> expand_spec(const std::string& spec, const std::string& key) {
  std::vector<std::string> paths;
  struct stat lst {};
  if (!spec.empty() && ::lstat(spec.c_str(), &lst) == 0) {
    struct stat st {};
    if (::stat(spec.c_str(), &st) != 0) fail_unreadable(spec, errno, key);
    if (S_ISDIR(st.st_mode)) walk_folder(spec, key, &paths);
    else if (S_ISREG(st.st_mode)) paths.push_back(spec);
    else fail("{}: not a regular file or a folder ({})", spec, key);
  } else if (has_glob_chars(spec)) {
    expand_glob(spec, key, &paths);
  }
  if (paths.empty()) fail("{}: '{}' matches no file", key, spec);
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

Compression compression_of(const std::string& lower_name) {
  if (ends_with(lower_name, ".gz")) return Compression::kGzip;
  if (ends_with(lower_name, ".zst") || ends_with(lower_name, ".zstd")) return Compression::kZstd;
  return Compression::kNone;
}

std::string strip_compression_suffix(const std::string& lower_name, Compression c) {
  if (c == Compression::kNone) return lower_name;
  return lower_name.substr(0, lower_name.rfind('.'));
}

// `path` is read only for a .bin, whose content tells llm.c from nanoGPT.
FileType type_by_extension(const std::string& lower_name, const std::string& path) {
  for (const char* ext : {".jsonl", ".json", ".ndjson"})
    if (ends_with(lower_name, ext)) return FileType::kJsonl;
  if (ends_with(lower_name, ".bin")) return detect_bin_type(path);
  return FileType::kText;
}

// Checked at expansion time so that a run fails before it starts, not
// hours in when the reader reaches that file.
void check_readable(const std::string& path, const std::string& key) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_unreadable(path, errno, key);
  ::close(fd);
}

InputFile describe_file(const std::string& path, std::optional<FileType> forced, const std::string& key) {
  check_readable(path, key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_unreadable(path, errno, key);
  InputFile f;
  f.path = path;
  std::string name = lowercase(fs::path(path).filename().string());
  f.compression = compression_of(name);
  f.type = forced ? *forced : type_by_extension(strip_compression_suffix(name, f.compression), path);
  f.size = uint64_t(st.st_size);
  f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (is_pretokenized(f.type)) token_file_layout(f);  // a bad header fails now, not hours in
  return f;
}

}  // namespace

std::string_view file_type_name(FileType t) {
  switch (t) {
    case FileType::kText: return "text";
    case FileType::kJsonl: return "jsonl";
    case FileType::kLlmc: return "llmc";
    case FileType::kNanoGpt: return "nanogpt";
  }
  return "?";
}

std::vector<InputFile> expand_inputs(const std::vector<std::string>& specs, std::optional<FileType> forced,
                                     const std::string& key) {
  std::vector<InputFile> files;
  for (const auto& spec : specs)
    for (const auto& path : expand_spec(spec, key)) files.push_back(describe_file(path, forced, key));
  return files;
}

}  // namespace ggtrain::corpus
