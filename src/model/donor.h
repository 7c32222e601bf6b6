#pragma once
// Warm start from a donor model (init.donor): the donor's embedding table E
// [vocab, donor_dim] is frozen input, a trainable lens W [d_model, donor_dim]
// (`lens.proj.weight`) maps it into the new model (x = W E[token]), and every
// checkpoint folds the two into a standard llama token_embd so that the file
// is an ordinary llama.cpp model.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

struct DonorTable {
  std::string path;
  int64_t vocab = 0, dim = 0;
  std::vector<float> table;  // [vocab, dim], dequantized to F32
  // FNV-1a over the F32 bits: a resumed run checks that it got the same table.
  uint64_t checksum = 0;
};

// Reads token_embd.weight (F32/F16/BF16/Q8_0) of a model GGUF; errors name
// the file and what is missing or wrong.
DonorTable load_donor_table(const std::string& path);

// Lens init that gives x = W E[token] the per-element scale `std` of a
// freshly initialised token_embd, whatever the donor table's own scale.
void init_lens(const DonorTable& donor, const ParamLayout& layout, float* params, uint64_t seed, double std = 0.02);

// The standard llama model equal to a lens-trained one: the same tensors with
// token_embd.weight = fold(E, W) (exact: accumulated in double).
struct FoldedModel {
  Config config;  // donor_dim 0, untied
  std::vector<float> params;  // laid out by ParamLayout(config)
};
FoldedModel fold_donor_model(const Config& c, const ParamLayout& layout, const float* params, const float* donor_table);

}  // namespace ggtrain::model
