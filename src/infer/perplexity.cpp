#include "infer/perplexity.h"

#include <algorithm>
#include <cmath>

#include "kernels/cross_entropy.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::infer {

PerplexityResult perplexity(Decoder& dec, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                            const std::function<void(int64_t, double)>& on_chunk,
                            const std::vector<int32_t>* token_bytes, int64_t max_chunks) {
  if (n_ctx < 2 || n_ctx > dec.n_ctx()) fail("perplexity: context {} must be in [2, {}]", n_ctx, dec.n_ctx());
  if (int64_t(tokens.size()) < 2 * n_ctx)
    fail("perplexity: the text has {} tokens; at least {} (2 x context {}) are needed", tokens.size(), 2 * n_ctx,
         n_ctx);
  const int64_t V = dec.config().vocab, first = n_ctx / 2;
  PerplexityResult r;
  r.chunks = int64_t(tokens.size()) / n_ctx;
  if (max_chunks > 0) r.chunks = std::min(r.chunks, max_chunks);
  double nll = 0;
  std::vector<int32_t> window(static_cast<size_t>(n_ctx));
  const double t0 = now_seconds();
  for (int64_t c = 0; c < r.chunks; ++c) {
    std::copy(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx, window.begin());
    if (bos >= 0) window[0] = bos;
    dec.reset();
    dec.eval(window.data(), n_ctx, true);
    for (int64_t k = first; k < n_ctx - 1; ++k) {
      const int32_t target = tokens[size_t(c * n_ctx + k + 1)];
      nll += kernels::token_nll(dec.logits() + k * V, V, target);
      if (token_bytes) r.bytes += token_bytes->at(size_t(target));
    }
    r.scored += n_ctx - 1 - first;
    if (on_chunk) on_chunk(c, std::exp(nll / double(r.scored)));
  }
  r.seconds = now_seconds() - t0;
  r.nll = nll / double(r.scored);
  r.ppl = std::exp(r.nll);
  r.bpb = r.bytes > 0 ? nll / std::log(2.0) / double(r.bytes) : NAN;
  return r;
}

}  // namespace ggtrain::infer
