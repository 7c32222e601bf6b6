#include "infer/imatrix.h"

#include <cmath>

#include "util/error.h"

namespace ggtrain::infer {

namespace {

// llama.cpp runs a chunk in micro-batches of 512 tokens (its default
// n_ubatch) and llama-imatrix ignores a dense product of fewer than 16 rows:
// the rows of a chunk count in pieces of 512, a piece under 16 not at all.
constexpr int64_t kUbatch = 512, kMinRows = 16;

bool all_finite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

}  // namespace

void ImatrixCollector::add(const Decoder::MatrixInput& in) {
  const bool expert = in.expert >= 0;
  int64_t rows = in.rows;
  if (!expert) {
    if (in.name.rfind("blk.", 0) != 0 && !(with_output_ && in.name == "output.weight")) return;
    if (rows % kUbatch < kMinRows) rows -= rows % kUbatch;  // the last piece
    if (rows == 0) return;
  }
  quant::ImatrixEntry& e = entries_[in.name];
  const int64_t slots = expert ? n_experts_ : 1, slot = expert ? in.expert : 0;
  if (e.counts.empty()) {
    e.sums.assign(size_t(slots * in.cols), 0.0f);
    e.counts.assign(size_t(slots), 0);
  }
  float* acc = e.sums.data() + slot * in.cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.x + r * in.cols;
    for (int64_t j = 0; j < in.cols; ++j) acc[j] += x[j] * x[j];
  }
  e.counts[size_t(slot)] += rows;
  if (!all_finite(acc, in.cols))
    fail("imatrix: the inputs of '{}' are not finite; the model's activations overflow on this text", in.name);
}

ImatrixResult collect_imatrix(Decoder& dec, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                              int64_t max_chunks, bool with_output, const std::string& dataset,
                              const std::function<void(int64_t, double)>& on_chunk) {
  ImatrixCollector collector(dec.config().n_experts, with_output);
  dec.observe_matrix_inputs([&](const Decoder::MatrixInput& in) { collector.add(in); });
  ImatrixResult r;
  try {
    r.perplexity = perplexity(dec, tokens, n_ctx, bos, on_chunk, nullptr, max_chunks);
  } catch (...) {
    dec.observe_matrix_inputs({});
    throw;
  }
  dec.observe_matrix_inputs({});
  r.matrix.entries = collector.entries();
  r.matrix.datasets = {dataset};
  r.matrix.chunk_count = uint32_t(r.perplexity.chunks);
  r.matrix.chunk_size = uint32_t(n_ctx);
  return r;
}

}  // namespace ggtrain::infer
