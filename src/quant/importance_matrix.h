#pragma once
// llama.cpp's importance matrix: what llama-imatrix writes and
// llama-quantize --imatrix reads. Per weight matrix (by its GGUF name), per
// input column, the sum of the squares of the activations the matrix
// multiplied, and how many token rows were summed; a stacked expert tensor
// keeps one row of sums and one count per expert. Read from llama-imatrix's
// GGUF format (general.type "imatrix", `NAME.in_sum2` [cols, n] and
// `NAME.counts` [1, n] F32 tensors) or its legacy .dat; written as GGUF.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ggtrain::quant {

struct ImatrixEntry {
  std::vector<float> sums;  // [counts.size(), columns]
  std::vector<int64_t> counts;  // token rows summed, per expert (one for a dense matrix)
  int64_t columns() const { return counts.empty() ? 0 : int64_t(sums.size() / counts.size()); }
};

struct ImportanceMatrix {
  std::map<std::string, ImatrixEntry> entries;  // sorted by name, as llama-imatrix stores them
  std::vector<std::string> datasets;  // the text files it was collected on
  uint32_t chunk_count = 0, chunk_size = 0;
  bool legacy = false;  // read from a .dat: sums are per-call means, counts the call count
  bool has_metadata = true;  // GGUF: the datasets, chunk_count and chunk_size keys were all there
};

// Either format, told apart by the GGUF magic. Hostile input: every length
// and count is checked against the file; an Error names the file and field.
ImportanceMatrix read_importance_matrix(const std::string& path);
// GGUF, as llama-imatrix writes it (names sorted, in_sum2 then counts), atomically.
void write_importance_matrix(const ImportanceMatrix& m, const std::string& path);

// Matrices combined as `llama-imatrix --in-file A --in-file B ...` combines
// them (chunks of `chunk_size` tokens, its -c): sums and counts added in
// float and integers, a legacy .dat's per-call means scaled back by
// chunk_size, the datasets listed in order, the chunk count the largest
// count over chunk_size. Error naming the file whose entry has another
// shape than the same entry before it. `paths` name `parts` in messages.
ImportanceMatrix merge_importance_matrices(const std::vector<ImportanceMatrix>& parts,
                                           const std::vector<std::string>& paths, int64_t chunk_size);

// The importance llama-quantize hands ggml's quantizers for one entry:
// [experts, columns] mean squared activation per column (sums / count; 1
// for an expert that saw no token; a legacy entry's sums / its call count).
std::vector<float> importance_values(const ImatrixEntry& e, bool legacy);

}  // namespace ggtrain::quant
