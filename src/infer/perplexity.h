#pragma once
// Perplexity exactly as llama.cpp's perplexity tool computes it:
//   tokens = tokenize(whole text, with BOS); n_chunks = tokens / n_ctx
//   (at least 2 * n_ctx tokens are needed); each chunk is the next n_ctx
//   tokens, non-overlapping, evaluated from an empty cache with its first
//   token replaced by BOS; only the second half is scored: positions
//   first = n_ctx/2 .. n_ctx-2 predict the next token, n_ctx-1-first per chunk;
//   PPL = exp(total negative log-likelihood / total scored tokens).
// Bits per byte (tokenizer-independent): the same total in bits over the
// bytes of the scored tokens' texts (Tokenizer::token_byte_lengths).
#include <cstdint>
#include <functional>
#include <vector>

#include "infer/decoder.h"

namespace ggtrain::infer {

struct PerplexityResult {
  double ppl = 0, nll = 0;
  int64_t chunks = 0, scored = 0;
  int64_t bytes = 0;  // of the scored tokens
  double bpb = 0;  // NAN without token byte lengths or when the scored tokens have no bytes
  double seconds = 0;  // evaluating the chunks (chunks * n_ctx tokens), as llama.cpp times it
};

// on_chunk (optional) gets (chunk index, running perplexity). token_bytes
// (optional): each token id's byte length, for bits per byte. max_chunks >
// 0: at most that many chunks (llama.cpp's --chunks).
PerplexityResult perplexity(Decoder& dec, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                            const std::function<void(int64_t, double)>& on_chunk = {},
                            const std::vector<int32_t>* token_bytes = nullptr, int64_t max_chunks = 0);

}  // namespace ggtrain::infer
