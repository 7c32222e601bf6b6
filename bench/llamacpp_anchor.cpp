// llama.cpp's own speed on a GGUF, through its C API, measured as
// llama-bench measures it: pp N (a prompt of N random tokens decoded as one
// batch into an empty cache) and tg N (N tokens decoded one at a time, after
// D tokens already in the cache with -d D, as llama-bench's -d), each after a
// warmup run, averaged over repetitions, in tokens/s. The anchor for
// ggtrain's `generate` numbers (bench/compare_llamacpp.sh). Built by that
// script against the llama.cpp shared libraries that the npm package
// @node-llama-cpp/linux-x64 ships and the llama.h of the same release (from
// node-llama-cpp's llama/gitRelease.bundle); never part of ggtrain.
//
//   bench_llamacpp_anchor MODEL.gguf LIB_DIR [-p 128] [-n 128] [-d 0] [-t THREADS] [-r 5]
#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void quiet_log(ggml_log_level, const char*, void*) {}

// The first token is BOS when the vocabulary adds one, the rest random (as
// llama-bench).
bool decode_prompt(llama_context* ctx, int n, int32_t n_vocab, llama_token bos) {
  std::vector<llama_token> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens[size_t(i)] = i == 0 && bos >= 0 ? bos : std::rand() % n_vocab;
  if (llama_decode(ctx, llama_batch_get_one(tokens.data(), n)) != 0) return false;
  llama_synchronize(ctx);
  return true;
}

bool decode_tokens(llama_context* ctx, int n, int32_t n_vocab, llama_token bos) {
  llama_token token = bos >= 0 ? bos : std::rand() % n_vocab;
  for (int i = 0; i < n; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) return false;
    llama_synchronize(ctx);
    token = std::rand() % n_vocab;
  }
  return true;
}

// Which of the CPU variants ggml loaded (libggml-cpu-<arch>.so).
std::string loaded_cpu_variant() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("libggml-cpu-");
    if (at != std::string::npos) return line.substr(at);
  }
  return "none found in /proc/self/maps";
}

struct Stats {
  double mean = 0, sd = 0;
};

// `setup` (untimed) then `run` (timed), reps times.
template <typename Setup, typename Run>
Stats tokens_per_second(int n, int reps, Setup setup, Run run) {
  std::vector<double> tps;
  for (int r = 0; r < reps; ++r) {
    if (!setup()) {
      std::fprintf(stderr, "llama_decode failed\n");
      std::exit(1);
    }
    const double t0 = now_s();
    if (!run()) {
      std::fprintf(stderr, "llama_decode failed\n");
      std::exit(1);
    }
    tps.push_back(double(n) / (now_s() - t0));
  }
  Stats s;
  for (double x : tps) s.mean += x / double(tps.size());
  for (double x : tps) s.sd += (x - s.mean) * (x - s.mean) / double(tps.size() > 1 ? tps.size() - 1 : 1);
  s.sd = std::sqrt(s.sd);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf LIB_DIR [-p N] [-n N] [-d DEPTH] [-t THREADS] [-r REPS]\n", argv[0]);
    return 2;
  }
  int n_prompt = 128, n_gen = 128, depth = 0, threads = 2, reps = 5;
  for (int i = 3; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "-p")) n_prompt = v;
    else if (!std::strcmp(argv[i], "-n")) n_gen = v;
    else if (!std::strcmp(argv[i], "-d")) depth = v;
    else if (!std::strcmp(argv[i], "-t")) threads = v;
    else if (!std::strcmp(argv[i], "-r")) reps = v;
  }
  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all_from_path(argv[2]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "%s: llama.cpp cannot load it\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(std::max(n_prompt, depth) + n_gen);
  cp.n_batch = cp.n_ubatch = uint32_t(std::max({n_prompt, depth, 1}));
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  const llama_token bos = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : -1;
  std::srand(1);
  std::printf("llama.cpp (C API, %s), %d threads, flash attention %s\n", loaded_cpu_variant().c_str(), threads,
              llama_flash_attn_type_name(cp.flash_attn_type));
  auto clear = [&] { llama_memory_clear(llama_get_memory(ctx), true); };
  if (n_prompt > 0) {
    clear();
    decode_prompt(ctx, n_prompt, n_vocab, bos);  // warmup
    const Stats s = tokens_per_second(
        n_prompt, reps, [] { return true; },
        [&] {
          clear();
          return decode_prompt(ctx, n_prompt, n_vocab, bos);
        });
    std::printf("pp%d: %.1f +- %.1f tokens/s\n", n_prompt, s.mean, s.sd);
  }
  if (n_gen > 0) {
    clear();
    decode_tokens(ctx, 1, n_vocab, bos);  // warmup
    const Stats s = tokens_per_second(
        n_gen, reps,
        [&] {
          clear();
          return depth == 0 || decode_prompt(ctx, depth, n_vocab, bos);
        },
        [&] { return decode_tokens(ctx, n_gen, n_vocab, depth == 0 ? bos : -1); });
    if (depth > 0) std::printf("tg%d @ d%d: %.1f +- %.1f tokens/s\n", n_gen, depth, s.mean, s.sd);
    else std::printf("tg%d: %.1f +- %.1f tokens/s\n", n_gen, s.mean, s.sd);
  }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
