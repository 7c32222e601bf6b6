#pragma once
// `ggtrain imatrix`: an importance matrix collected as llama-imatrix
// collects it. The text is cut into chunks of n_ctx tokens as llama.cpp's
// perplexity tool cuts it (infer/perplexity.h); while each chunk runs, every
// product of a block weight (blk.*, and output.weight when asked) adds the
// squares of its input rows to that weight's per-column sums. As llama.cpp:
// a dense product's rows count in micro-batches of 512, one of fewer than 16
// rows not at all (the decoder must get a chunk in one eval); an expert tensor keeps
// one row of sums and one count per expert, counting each (token, expert)
// pair routed to it.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "infer/decoder.h"
#include "infer/perplexity.h"
#include "quant/importance_matrix.h"

namespace ggtrain::infer {

class ImatrixCollector {
 public:
  // n_experts: the model's experts per layer (0: dense); with_output: also
  // output.weight (llama-imatrix --process-output).
  ImatrixCollector(int64_t n_experts, bool with_output) : n_experts_(n_experts), with_output_(with_output) {}
  void add(const Decoder::MatrixInput& in);
  const std::map<std::string, quant::ImatrixEntry>& entries() const { return entries_; }

 private:
  int64_t n_experts_;
  bool with_output_;
  std::map<std::string, quant::ImatrixEntry> entries_;
};

struct ImatrixResult {
  quant::ImportanceMatrix matrix;
  PerplexityResult perplexity;  // of the same chunks, as llama-imatrix prints it
};

// Runs `tokens` (chunks as perplexity(); at most max_chunks when > 0) and
// collects. dataset: the text file's name, recorded in the matrix.
ImatrixResult collect_imatrix(Decoder& dec, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                              int64_t max_chunks, bool with_output, const std::string& dataset,
                              const std::function<void(int64_t, double)>& on_chunk = {});

}  // namespace ggtrain::infer
