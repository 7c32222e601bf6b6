// infer/perplexity: llama-perplexity's rule (chunks, BOS, the second half of
// each chunk scored) and bits per byte, against the training forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/perplexity.h"
#include "model/transformer.h"
#include "support/random_model.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::small_model_config;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::write_random_model;

TEST(Perplexity, FollowsLlamaCppRule) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  auto p = write_random_model(c, tmp / "m.gguf");
  const int64_t n_ctx = 16, bos = 1;
  auto toks = spread_tokens(16 * 3 + 5, c.vocab);  // 3 full chunks; the tail is dropped
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f);
  std::vector<int32_t> token_bytes(size_t(c.vocab));
  for (size_t v = 0; v < token_bytes.size(); ++v) token_bytes[v] = int32_t(v % 5);  // some tokens have none
  auto r = infer::perplexity(d, toks, n_ctx, bos, {}, &token_bytes);
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.scored, 3 * (n_ctx - 1 - n_ctx / 2));
  // Independently, with the training forward pass: chunk c, first token BOS,
  // positions n_ctx/2 .. n_ctx-2 predict the next original token.
  model::Transformer<float> m(c, 1, n_ctx);
  std::copy(p.begin(), p.end(), m.params());
  double nll = 0, bytes = 0;
  for (int64_t ch = 0; ch < 3; ++ch) {
    std::vector<int32_t> w(toks.begin() + ch * n_ctx, toks.begin() + (ch + 1) * n_ctx);
    w[0] = bos;
    m.forward(w.data(), nullptr);
    for (int64_t k = n_ctx / 2; k < n_ctx - 1; ++k) {
      const float* z = m.logits() + k * c.vocab;
      double mx = *std::max_element(z, z + c.vocab), s = 0;
      for (int64_t v = 0; v < c.vocab; ++v) s += std::exp(z[v] - mx);
      nll += mx + std::log(s) - z[toks[size_t(ch * n_ctx + k + 1)]];
      bytes += double(toks[size_t(ch * n_ctx + k + 1)] % 5);
    }
  }
  EXPECT_NEAR(r.ppl, std::exp(nll / double(r.scored)), 1e-5 * r.ppl);
  // Bits per byte: the same total in bits over the scored tokens' bytes.
  EXPECT_EQ(double(r.bytes), bytes);
  EXPECT_NEAR(r.bpb, nll / std::log(2.0) / bytes, 1e-5 * r.bpb);
  EXPECT_THROW(infer::perplexity(d, spread_tokens(31, c.vocab), n_ctx, bos), Error);  // < 2 chunks
}
