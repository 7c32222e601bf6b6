// Rollout speed: G replies to one prompt, as GRPO samples them (TRL's
// sampler defaults: temperature 1, no top-k/top-p/min-p), decoded one
// reply at a time (infer::generate from the prompt's cache, each reply a
// one-row product per token) against together (infer::generate_group: one
// batch per token, a G-row GEMM). No stop tokens: every reply runs the full
// length, so both do the same work. One invocation prints both and the
// ratio, for each G:
//
//   build/bench/bench_rollouts MODEL.gguf [prompt tokens (64)] [reply tokens (128)] [G...(1 8)]
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "util/cpu_level.h"

using namespace ggtrain;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: bench_rollouts MODEL.gguf [prompt tokens] [reply tokens] [G...]\n");
    return 2;
  }
  const gguf::GgufFile f(argv[1]);
  const int64_t P = argc > 2 ? std::atoll(argv[2]) : 64, R = argc > 3 ? std::atoll(argv[3]) : 128;
  std::vector<int64_t> groups;
  for (int i = 4; i < argc; ++i) groups.push_back(std::atoll(argv[i]));
  if (groups.empty()) groups = {1, 8};
  infer::Decoder dec(f, P + R + 1, kernels::CacheType::kF32);
  const int64_t V = dec.config().vocab;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < P; ++i) prompt.push_back(int32_t((i * 7919 + 13) % V));
  infer::SamplerConfig s{1.0, 0, 1.0, 0.0, 1.0, 64};
  fmt::print("{}: {} layers, d_model {}, vocab {}; {} threads; {}\n", argv[1], dec.config().n_layers,
             dec.config().d_model, V, omp_get_max_threads(), built_cpu_description());
  fmt::print("prompt {} tokens, {} reply tokens each\n", P, R);
  fmt::print("{:>4} {:>16} {:>16} {:>8}\n", "G", "one-at-a-time", "batched", "ratio");
  dec.warmup();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    dec.reset();
    const double t0 = bench::now_s();
    dec.eval(prompt.data(), P, false);
    best = std::min(best, bench::now_s() - t0);
  }
  fmt::print("the prompt alone: {:.1f} t/s (best of 3)\n", double(P) / best);
  for (int64_t G : groups) {
    std::vector<uint64_t> seeds;
    for (int64_t i = 0; i < G; ++i) seeds.push_back(uint64_t(100 + i));
    infer::GenerateControl keep;
    keep.reuse_cache = true;
    dec.set_sequences(1);
    dec.reset();
    infer::generate(dec, prompt, 1, s, 1, {});  // the prompt in the cache: both time replies only
    double t0 = bench::now_s();
    int64_t alone_tokens = 0;
    for (uint64_t seed : seeds)
      alone_tokens += int64_t(infer::generate(dec, prompt, R, s, seed, {}, {}, keep).tokens.size());
    const double alone_s = bench::now_s() - t0;
    t0 = bench::now_s();
    int64_t batch_tokens = 0;
    for (const auto& g : infer::generate_group(dec, prompt, R, s, seeds, {}, keep))
      batch_tokens += int64_t(g.tokens.size());
    const double batch_s = bench::now_s() - t0;
    fmt::print("{:>4} {:>12.1f} t/s {:>12.1f} t/s {:>7.2f}x\n", G, double(alone_tokens) / alone_s,
               double(batch_tokens) / batch_s, (double(batch_tokens) / batch_s) / (double(alone_tokens) / alone_s));
  }
  return 0;
}
