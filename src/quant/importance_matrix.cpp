#include "quant/importance_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace ggtrain::quant {

namespace {

constexpr const char* kSums = ".in_sum2";
constexpr const char* kCounts = ".counts";

// llama-imatrix's legacy .dat: int32 entry count; per entry an int32 name
// length, the name, int32 ncall, int32 nval and nval floats; then,
// optionally, int32 chunk count, int32 length and the dataset's name.
class DatReader {
 public:
  DatReader(const std::string& path, std::string bytes) : path_(path), b_(std::move(bytes)) {}
  bool done() const { return at_ == b_.size(); }
  int32_t i32(const char* field) {
    int32_t v;
    take(&v, 4, field);
    return v;
  }
  std::string text(int32_t n, const char* field) {
    if (n < 0) fail("{}: {} has the negative length {}; not an importance matrix", path_, field, n);
    need(size_t(n), field);  // before allocating what the file says
    std::string s(size_t(n), '\0');
    take(s.data(), size_t(n), field);
    return s;
  }
  std::vector<float> floats(int32_t n, const char* field) {
    if (n < 1) fail("{}: {} is {}; an entry needs at least one value", path_, field, n);
    need(size_t(n) * 4, field);
    std::vector<float> v(static_cast<size_t>(n));
    take(v.data(), size_t(n) * 4, field);
    return v;
  }

 private:
  void need(size_t n, const char* field) const {
    if (n > b_.size() - at_)
      fail("{}: truncated at byte {} reading {} ({} bytes needed, {} left); not a whole importance matrix", path_, at_,
           field, n, b_.size() - at_);
  }
  void take(void* out, size_t n, const char* field) {
    need(n, field);
    std::memcpy(out, b_.data() + at_, n);
    at_ += n;
  }
  const std::string& path_;
  std::string b_;
  size_t at_ = 0;
};

ImportanceMatrix read_legacy(const std::string& path, std::string bytes) {
  DatReader r(path, std::move(bytes));
  ImportanceMatrix m;
  m.legacy = true;
  const int32_t n_entries = r.i32("the entry count");
  if (n_entries < 1)
    fail("{}: the entry count is {}; not an importance matrix (GGUF or llama-imatrix .dat)", path, n_entries);
  for (int32_t i = 0; i < n_entries; ++i) {
    std::string name = r.text(r.i32("an entry's name length"), "an entry's name");
    const int32_t ncall = r.i32("an entry's call count");
    ImatrixEntry e;
    e.sums = r.floats(r.i32("an entry's value count"), "an entry's values");
    e.counts = {ncall};
    m.entries[std::move(name)] = std::move(e);
  }
  if (!r.done()) {  // the optional trailer
    m.chunk_count = uint32_t(r.i32("the chunk count"));
    if (!r.done()) {
      const int32_t len = r.i32("the dataset name length");
      if (len > 0) m.datasets.push_back(r.text(len, "the dataset name"));
    }
  }
  return m;
}

const gguf::TensorInfo& f32_tensor(const gguf::GgufFile& f, const gguf::TensorInfo* t, const std::string& name,
                                   const char* suffix) {
  if (!t)
    fail("{}: entry '{}' has no '{}{}' tensor beside its other one; the file is not a whole importance matrix",
         f.path(), name, name, suffix);
  if (t->type != gguf::TensorType::F32)
    fail("{}: tensor '{}' is {}; an importance matrix stores F32", f.path(), t->name, gguf::type_name(t->type));
  return *t;
}

ImportanceMatrix read_gguf(const std::string& path) {
  const gguf::GgufFile f(path);
  ImportanceMatrix m;
  const gguf::Value* datasets = f.find("imatrix.datasets");
  if (datasets && datasets->type == gguf::ValueType::ARRAY && datasets->elem_type == gguf::ValueType::STRING)
    for (const auto& d : datasets->items) m.datasets.push_back(d.s);
  const bool has_count = f.find("imatrix.chunk_count") != nullptr, has_size = f.find("imatrix.chunk_size") != nullptr;
  m.has_metadata = datasets && has_count && has_size;
  if (has_count) m.chunk_count = uint32_t(f.get_uint("imatrix.chunk_count"));
  if (has_size) m.chunk_size = uint32_t(f.get_uint("imatrix.chunk_size"));
  for (const auto& t : f.tensors()) {
    if (!t.name.ends_with(kSums)) continue;
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(kSums));
    const auto& sums = f32_tensor(f, &t, name, kSums);
    const auto& counts = f32_tensor(f, f.find_tensor(name + kCounts), name, kCounts);
    if (counts.n_elements == 0 || sums.n_elements % counts.n_elements != 0)
      fail("{}: entry '{}' has {} sums for {} counts; they must be a whole row per count", path, name, sums.n_elements,
           counts.n_elements);
    ImatrixEntry e;
    e.sums.resize(size_t(sums.n_elements));
    std::memcpy(e.sums.data(), sums.data, sums.n_bytes);
    for (uint64_t j = 0; j < counts.n_elements; ++j) {
      float c;
      std::memcpy(&c, counts.data + 4 * j, 4);
      if (!std::isfinite(c) || c < 0 || c > 9e15f)
        fail("{}: tensor '{}{}' holds the count {} at {}; counts are whole numbers of tokens", path, name, kCounts, c,
             j);
      e.counts.push_back(std::lround(c));
    }
    m.entries[name] = std::move(e);
  }
  for (const auto& t : f.tensors())
    if (t.name.ends_with(kCounts) && !m.entries.count(t.name.substr(0, t.name.size() - std::strlen(kCounts))))
      fail("{}: tensor '{}' has no '{}' beside it; the file is not a whole importance matrix", path, t.name,
           t.name.substr(0, t.name.size() - std::strlen(kCounts)) + kSums);
  if (m.entries.empty())
    fail("{}: no '*{}' tensors: this GGUF is not an importance matrix (make one with `ggtrain imatrix` or "
         "llama-imatrix)",
         path, kSums);
  return m;
}

}  // namespace

ImportanceMatrix read_importance_matrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the importance matrix", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint32_t magic = 0;
  if (bytes.size() >= 4) std::memcpy(&magic, bytes.data(), 4);
  ImportanceMatrix m = magic == gguf::kMagic ? read_gguf(path) : read_legacy(path, std::move(bytes));
  for (const auto& [name, e] : m.entries)
    for (size_t j = 0; j < e.sums.size(); ++j)
      if (!std::isfinite(e.sums[j]) || e.sums[j] < 0)
        fail("{}: entry '{}' holds {} at {}; sums of squares are finite and not negative", path, name, e.sums[j], j);
  return m;
}

void write_importance_matrix(const ImportanceMatrix& m, const std::string& path) {
  gguf::GgufWriter w;
  w.set("general.type", gguf::Value::str("imatrix"));
  w.set("imatrix.datasets", gguf::Value::string_array(m.datasets));
  w.set("imatrix.chunk_count", gguf::Value::u32(m.chunk_count));
  w.set("imatrix.chunk_size", gguf::Value::u32(m.chunk_size));
  std::vector<std::vector<float>> counts;
  counts.reserve(m.entries.size());
  for (const auto& [name, e] : m.entries) {
    if (e.counts.empty() || e.sums.empty()) continue;
    counts.emplace_back(e.counts.begin(), e.counts.end());
    // ggml writes a tensor's dimensions up to its last one above 1
    // (ggml_n_dims): a dense entry's are [columns] and [1].
    const auto n = uint64_t(e.counts.size());
    const std::vector<uint64_t> sums_shape =
        n > 1 ? std::vector<uint64_t>{uint64_t(e.columns()), n} : std::vector<uint64_t>{uint64_t(e.columns())};
    const std::vector<uint64_t> counts_shape = n > 1 ? std::vector<uint64_t>{1, n} : std::vector<uint64_t>{1};
    w.add_tensor_raw(name + kSums, gguf::TensorType::F32, sums_shape, e.sums.data());
    w.add_tensor_raw(name + kCounts, gguf::TensorType::F32, counts_shape, counts.back().data());
  }
  w.write(path);
}

ImportanceMatrix merge_importance_matrices(const std::vector<ImportanceMatrix>& parts,
                                           const std::vector<std::string>& paths, int64_t chunk_size) {
  if (chunk_size <= 0) fail("imatrix: the chunk size must be positive, got {}", chunk_size);
  ImportanceMatrix out;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (const auto& [name, in] : parts[p].entries) {
      ImatrixEntry& e = out.entries[name];
      if (e.sums.empty()) e.sums.assign(in.sums.size(), 0.0f);
      if (e.sums.size() != in.sums.size())
        fail("{}: entry '{}' has {} sums, {} in the matrices before it; they are of other models", paths[p], name,
             in.sums.size(), e.sums.size());
      if (parts[p].legacy) {
        // A .dat holds per-call means and the call count: back to sums and
        // token rows, as if every call had been a whole chunk.
        if (e.counts.empty()) e.counts.assign(1, 0);
        for (size_t j = 0; j < in.sums.size(); ++j) e.sums[j] += in.sums[j] * float(chunk_size);
        for (int64_t& c : e.counts) c += in.counts[0] * chunk_size;
        continue;
      }
      if (e.counts.empty()) e.counts.assign(in.counts.size(), 0);
      else if (e.counts.size() == 1 && in.counts.size() > 1) e.counts.assign(in.counts.size(), e.counts[0]);
      else if (e.counts.size() != in.counts.size())
        fail("{}: entry '{}' has {} counts, {} in the matrices before it; they are of other models", paths[p], name,
             in.counts.size(), e.counts.size());
      for (size_t j = 0; j < in.sums.size(); ++j) e.sums[j] += in.sums[j];
      for (size_t j = 0; j < in.counts.size(); ++j) e.counts[j] += in.counts[j];
    }
    out.datasets.insert(out.datasets.end(), parts[p].datasets.begin(), parts[p].datasets.end());
  }
  int64_t most = 0;
  for (const auto& [name, e] : out.entries)
    for (const int64_t c : e.counts) most = std::max(most, c);
  out.chunk_count = uint32_t(most / chunk_size);
  out.chunk_size = uint32_t(chunk_size);
  return out;
}

std::vector<float> importance_values(const ImatrixEntry& e, bool legacy) {
  std::vector<float> v(e.sums.size());
  const int64_t cols = e.columns();
  for (size_t x = 0; x < e.counts.size(); ++x) {
    const float count = float(e.counts[x]);
    for (int64_t j = 0; j < cols; ++j) {
      const size_t i = x * size_t(cols) + size_t(j);
      if (legacy) v[i] = count > 0 ? e.sums[i] / count : e.sums[i];
      else v[i] = count > 0 ? e.sums[i] / count : 1.0f;
    }
  }
  return v;
}

}  // namespace ggtrain::quant
