#pragma once
// `ggtrain eval --kl-divergence BASE.gguf`: how far a model (a quantized
// export) strays from its base on a text, with the statistics
// llama-perplexity --kl-divergence prints, computed as it computes them.
// The text is cut into chunks as for perplexity (infer/perplexity.h); for
// the scored half of each chunk the base's log-probabilities are kept as
// llama-perplexity keeps them in its base file (16-bit steps over the top 16
// nats: a 2.4e-4 step, which the statistics inherit), and each position adds
// the KL divergence of the model from the base over those, both models'
// negative log-likelihoods of the next token, the change in its probability
// and whether the two argmaxes agree.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/decoder.h"

namespace ggtrain::eval {

struct KlDivergence {
  // llama-perplexity's running sums (kl_divergence_result)
  double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0, sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  float max_p_diff = 0;
  int64_t n_same_top = 0, count = 0, chunks = 0;
  std::vector<float> kld_values, p_diff_values;  // per scored position, in order
};

// on_chunk (optional) gets each chunk's index and the sums so far.
KlDivergence kl_divergence(infer::Decoder& model, infer::Decoder& base, const std::vector<int32_t>& tokens,
                           int64_t n_ctx, int32_t bos, int64_t max_chunks = 0,
                           const std::function<void(int64_t, const KlDivergence&)>& on_chunk = {});

// llama-perplexity's base file (--kl-divergence-base FILE): "_logits_",
// uint32 context, int32 vocabulary size, int32 chunk count, the chunks'
// tokens (int32, as the text tokenized: BOS not put in), then per chunk and
// scored position the base row (float scale, float minimum, one uint16 step
// per token, padded to an even count).
// Writes one from `base` as llama-perplexity does (atomically).
void write_kl_divergence_base(infer::Decoder& base, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                              int64_t max_chunks, const std::string& path);
// Whether `path` starts as a base file does.
bool is_kl_divergence_base(const std::string& path);
// The model against a base file (its tokens and context; the file may come
// from llama-perplexity). Hostile input: every size is checked against the
// file and the model; an Error names the file and the field.
KlDivergence kl_divergence_from_base(infer::Decoder& model, const std::string& path, int32_t bos,
                                     int64_t max_chunks = 0,
                                     const std::function<void(int64_t, const KlDivergence&)>& on_chunk = {});

// The "Perplexity statistics", "KL divergence statistics" and "Token
// probability statistics" blocks in llama-perplexity's wording and format
// (empty under 100 positions, where it prints none).
std::string kl_divergence_report(KlDivergence r);

}  // namespace ggtrain::eval
