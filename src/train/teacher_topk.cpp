#include "train/teacher_topk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "kernels/vexp.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

constexpr char kMagic[8] = {'G', 'G', 'T', 'D', 'S', 'T', '1', '\0'};

struct Header {
  char magic[8];
  uint64_t teacher, tokens;
  int64_t seq_len, n_tokens, k, vocab;
  double temperature;
};

int64_t record_size(int64_t k) { return k * int64_t(sizeof(int32_t) + sizeof(float)) + int64_t(sizeof(float)); }

}  // namespace

// One pass keeps the k best ids in a heap whose top is the worst kept (most
// ids fail the one compare with it), then exp(logits / tau - max) over the
// whole row in the softmax kernels' vectorized exp, summed; the rest's mass
// is that row summed again with the top k zeroed, not 1 minus the top k
// (which cancels when they hold nearly all the mass).
void teacher_top_k(const float* logits, int64_t V, int64_t shared, int64_t k, double tau, int32_t* ids, float* logp,
                   float* log_other) {
  thread_local std::vector<std::pair<float, int32_t>> heap;
  thread_local std::vector<float> e;
  // a before b: more likely, or equally likely with the smaller id
  const auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  heap.clear();
  for (int32_t j = 0; j < int32_t(k); ++j) heap.emplace_back(logits[j], j);
  std::make_heap(heap.begin(), heap.end(), better);
  float worst = heap.front().first;  // ids below it cannot enter: one compare each
  constexpr int32_t kBlock = 64;  // blocks whose max is below the worst kept are skipped whole (vectorized)
  for (int32_t j = int32_t(k); j < int32_t(shared); ++j) {
    if (j % kBlock == 0 && j + kBlock <= shared && kernels::max_of(logits + j, kBlock) < worst) {
      j += kBlock - 1;
      continue;
    }
    if (logits[j] < worst) continue;
    const std::pair<float, int32_t> c{logits[j], j};
    if (!better(c, heap.front())) continue;
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = c;
    std::push_heap(heap.begin(), heap.end(), better);
    worst = heap.front().first;
  }
  std::sort(heap.begin(), heap.end(), better);
  e.resize(size_t(V));
  const float inv = float(1 / tau);
  for (int64_t j = 0; j < V; ++j) e[size_t(j)] = logits[j] * inv;
  const float m = kernels::max_of(e.data(), V);
  kernels::exp_shift(e.data(), V, m);
  const double s = kernels::sum_lanes(e.data(), V);
  const double lse = double(m) + std::log(s);
  for (int64_t i = 0; i < k; ++i) {
    ids[i] = heap[size_t(i)].second;
    logp[i] = float(double(heap[size_t(i)].first) / tau - lse);
    e[size_t(ids[i])] = 0.f;
  }
  const double s_rest = kernels::sum_lanes(e.data(), V);
  *log_other = s_rest > 0 ? float(std::log(s_rest) - std::log(s)) : -INFINITY;
}

TeacherTopKWriter::TeacherTopKWriter(const std::string& path, const TeacherSource& source, int64_t n_tokens, bool part)
    : out_(path), source_(source), n_tokens_(n_tokens) {
  if (part) return;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.teacher = source.teacher;
  h.tokens = source.tokens;
  h.seq_len = source.seq_len;
  h.n_tokens = n_tokens;
  h.k = source.k;
  h.vocab = source.vocab;
  h.temperature = source.temperature;
  out_.write(&h, sizeof(h));
}

int64_t TeacherTopKWriter::record_bytes() const { return record_size(source_.k); }

void TeacherTopKWriter::add(const int32_t* ids, const float* logp, float log_other) {
  out_.write(ids, size_t(source_.k) * sizeof(int32_t));
  out_.write(logp, size_t(source_.k) * sizeof(float));
  out_.write(&log_other, sizeof(float));
  ++written_;
}

void TeacherTopKWriter::add_empty(int64_t n) {
  out_.write_zeros(size_t(n * record_size(source_.k)));
  written_ += n;
}

void TeacherTopKWriter::append_part(const std::string& part_path, int64_t n) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(part_path, ec);
  if (ec || int64_t(size) != n * record_bytes())
    fail("{}: {} where {} records of {} bytes belong (a rank's share of the teacher's pass)", part_path,
         ec ? "missing" : fmt::format("{} bytes", size), n, record_bytes());
  if (n == 0) return;
  const MappedFile part(part_path);
  out_.write(part.data(), part.size());
  written_ += n;
}

void TeacherTopKWriter::commit() {
  if (written_ != n_tokens_)
    fail("teacher top-k: {} records written for {} tokens (a bug: nothing was kept)", written_, n_tokens_);
  out_.commit();
}

TeacherTopK::TeacherTopK(const std::string& path, const TeacherSource& source, int64_t n_tokens) {
  if (!std::filesystem::exists(path))
    fail("{}: missing; a resumed distillation run needs the teacher's top-k log-probabilities it computed at its "
         "start (start a new run to compute them again)",
         path);
  map_ = std::make_unique<MappedFile>(path);
  Header h{};
  if (map_->size() < sizeof(h))
    fail("{}: truncated ({} bytes); start a new run to compute it again", path, map_->size());
  std::memcpy(&h, map_->data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) fail("{}: not a ggtrain teacher top-k file", path);
  if (h.teacher != source.teacher)
    fail("{}: computed from another train.teacher (its tensors have changed since); restore that teacher or start a "
         "new run",
         path);
  if (h.k != source.k || h.temperature != source.temperature || h.vocab != source.vocab)
    fail("{}: computed with train.distill.top_k = {}, temperature = {} over {} tokens of vocabulary (now {}, {}, {}); "
         "start a new run to compute it again",
         path, h.k, h.temperature, h.vocab, source.k, source.temperature, source.vocab);
  if (h.tokens != source.tokens || h.seq_len != source.seq_len || h.n_tokens != n_tokens)
    fail("{}: computed for other data ({} tokens in windows of {}, now {} in windows of {}); start a new run", path,
         h.n_tokens, h.seq_len, n_tokens, source.seq_len);
  const size_t want = sizeof(h) + size_t(n_tokens) * size_t(record_size(h.k));
  if (map_->size() != want)
    fail("{}: {} bytes where {} belong; start a new run to compute it again", path, map_->size(), want);
  k_ = h.k;
  n_tokens_ = n_tokens;
}

TeacherRow TeacherTopK::row(int64_t position) const {
  if (position < 0 || position >= n_tokens_)
    fail("teacher top-k: position {} outside the stream of {} tokens", position, n_tokens_);
  const uint8_t* r = map_->data() + sizeof(Header) + size_t(position) * size_t(record_size(k_));
  TeacherRow row{};
  row.ids = reinterpret_cast<const int32_t*>(r);
  row.logp = reinterpret_cast<const float*>(r + size_t(k_) * sizeof(int32_t));
  std::memcpy(&row.log_other, r + size_t(k_) * 2 * sizeof(float), sizeof(float));
  row.k = k_;
  return row;
}

}  // namespace ggtrain::train
