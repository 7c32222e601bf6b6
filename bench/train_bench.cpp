// Training throughput of a preset (s15 by default: d_model 288, 6 layers, 6
// heads, d_ff 768, vocab 4096, batch 8 x 256, tied; smol135, the
// SmolLM2-135M shape at batch 4 x 512; or a released model's shape,
// qwen3-0.6b, gemma3-270m, llama3.2-1b): tokens/s, model FLOPs/token
// (6N + 12*L*d*T), MFU against the GEMM peak measured in this same run on the
// step's GEMM shapes (fp32: oneDNN sgemm; bf16: oneDNN's bf16 matmul), peak
// RSS, and the time per operation of forward, backward and recomputation.
// Usage: bench_train [--preset NAME] [--precision fp32|bf16]
//                    [--recompute none|attn|all] [--steps N]
//                    [--vocab N] [--batch B] [--seq-len T]
//                    [--lora RANK]  LoRA on every block matrix the model has, base frozen
//                    [--prompt F]   the first fraction F of each window has no
//                                   target, as a chat example's masked prompt
//                    [--held-base TYPE]  with --lora: the base written to a GGUF
//                                   of TYPE (q8_0, bf16, f32, ...) and held as a
//                                   LoRA run holds it (quantized; in bf16 in a
//                                   bf16 run), not as float parameters
//                    [--as-llama]   the same shape as plain llama: what the
//                                   architecture's own operations cost
//                    [threads...]
#include <fmt/format.h>
#include <omp.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/freeze.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/params.h"
#include "model/quantized_base.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/run_config.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ggtrain;

namespace {

struct Args {
  std::string preset = "s15", precision = "fp32", recompute = "none";
  int steps = 0;  // 0: 8 for s15, 3 for the larger presets
  int64_t vocab = 0, batch = 0, seq_len = 0, lora_rank = 0;  // 0: the preset's (no LoRA)
  double prompt = 0;  // fraction of each window without targets
  std::string held_base;  // a GGUF type name, or empty: a dense float base
  bool as_llama = false;
  std::vector<int> threads;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) fail("bench_train: {} needs a value", s);
      return std::string(argv[++i]);
    };
    if (s == "--preset") a.preset = value();
    else if (s == "--precision") a.precision = value();
    else if (s == "--recompute") a.recompute = value();
    else if (s == "--steps") a.steps = std::atoi(value().c_str());
    else if (s == "--vocab") a.vocab = std::atoll(value().c_str());
    else if (s == "--batch") a.batch = std::atoll(value().c_str());
    else if (s == "--seq-len") a.seq_len = std::atoll(value().c_str());
    else if (s == "--lora") a.lora_rank = std::atoll(value().c_str());
    else if (s == "--prompt") a.prompt = std::atof(value().c_str());
    else if (s == "--held-base") a.held_base = value();
    else if (s == "--as-llama") a.as_llama = true;
    else if (!s.empty() && s[0] != '-') a.threads.push_back(std::atoi(s.c_str()));
    else fail("bench_train: unknown option {}", s);
  }
  if (a.threads.empty()) a.threads = {1, 2};
  if (a.steps <= 0) a.steps = a.preset == "s15" ? 8 : 3;
  return a;
}

// A random base of `c`'s shape written as a GGUF of `type`, in a child
// process so that its float weights never count in this one's peak RSS.
void write_random_base(const model::Config& c, gguf::TensorType type, const std::string& path) {
  const pid_t pid = fork();
  if (pid < 0) fail("bench_train: fork failed");
  if (pid == 0) {
    try {
      const model::Config plain = c.without_lora();
      const model::ParamLayout layout(plain);
      std::vector<float> w(size_t(layout.total()));
      model::init_params(plain, layout, w.data(), 1);
      gguf::GgufWriter gw;
      model::add_model_tensors(gw, plain, layout, w.data(), type);
      gw.write(path);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_train: %s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("bench_train: writing the base {} failed", path);
}

// What the step's memory is made of, as planned: the frozen base (float
// parameters, or matrices held quantized or in bf16), the trainable tensors
// with their gradients and AdamW moments, the bf16 rounding of every
// parameter (bf16 training), and the activations and scratch (the head's
// chunk of logits among them).
void print_memory_parts(const model::Transformer<float>& m, const model::ModelOptions& o) {
  const double mib = 1 << 20;
  const bool bf16 = o.precision == model::Precision::kBf16;
  const int64_t trainable = m.n_trainable(), frozen = m.n_params() - trainable;
  const int64_t chunk =
      model::default_logit_chunk_rows(m.config().vocab, omp_get_max_threads(), m.batch() * m.seq_len());
  std::printf("  memory: frozen base %.0f MiB as float + %.0f MiB held; trainable with gradients and AdamW %.0f MiB; "
              "bf16 rounding %.0f MiB; activations and scratch %.0f MiB (the head's logit chunk %.0f)\n",
              double(frozen) * 4 / mib, o.quantized ? double(o.quantized->bytes()) / mib : 0.0,
              double(trainable) * 16 / mib, bf16 ? double(m.n_params()) * 2 / mib : 0.0,
              double(m.activation_bytes()) / mib, double(chunk * m.config().vocab) * (bf16 ? 6 : 4) / mib);
}

struct Result {
  double tokens_per_s, seconds_per_step, loss, optimizer_s;
  model::OpProfile profile;
};

Result run_training(const model::Config& c, int64_t B, int64_t T, const model::ModelOptions& o, int warmup, int steps,
                    double prompt) {
  // LoRA: the whole base frozen (no gradient, no moments), as a LoRA run has it.
  const std::set<std::string> frozen = model::frozen_in_run(c, {}, "--lora");
  model::Transformer<float> m(c, B, T, frozen, o);
  model::init_params(c, m.layout(), m.params(), 1);
  if (c.lora.rank > 0) model::init_lora(m.layout(), m.params(), 1);
  const int64_t n = m.n_trainable();
  std::vector<float> mom(size_t(n), 0.f), var(size_t(n), 0.f);
  print_memory_parts(m, o);
  Rng rng(7);
  std::vector<int32_t> tokens(size_t(B * T + 1)), targets(size_t(B * T));
  Result r{};
  double t0 = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      t0 = bench::now_s();
      m.set_profile(&r.profile);
    }
    for (auto& t : tokens) t = int32_t(rng.next_u64() % uint64_t(c.vocab));
    std::copy(tokens.begin() + 1, tokens.end(), targets.begin());
    for (int64_t i = 0; i < B * T; ++i)
      if (double(i % T) < prompt * double(T)) targets[size_t(i)] = -1;
    m.zero_grad();
    r.loss = m.forward(tokens.data(), targets.data());
    m.backward();
    const double t_opt = bench::now_s();
    float scale = optim::clip_scale(optim::grad_global_norm(m.grads(), n), 1.0);
    optim::adamw_step(m.grad_layout(), m.params(), m.grads(), mom.data(), var.data(), s + 1, 3e-4, {}, scale);
    if (s >= warmup) r.optimizer_s += bench::now_s() - t_opt;
  }
  const double dt = bench::now_s() - t0;
  r.tokens_per_s = double(B * T * steps) / dt;
  r.seconds_per_step = dt / steps;
  r.optimizer_s /= steps;
  for (auto& phase : r.profile.seconds)
    for (double& x : phase) x /= steps;
  for (auto& halves : r.profile.layer_seconds)
    for (double& x : halves) x /= steps;
  return r;
}

void print_breakdown(const Result& r) {
  using P = model::OpProfile;
  const double step_ms = 1e3 * r.seconds_per_step;
  std::printf("  time per step by operation (all blocks), ms:\n");
  std::printf("    %-12s %9s %9s %9s %7s\n", "op", "forward", "backward", "recompute", "share");
  double accounted = 0;
  for (int op = 0; op < P::kOps; ++op) {
    const double f = 1e3 * r.profile.seconds[P::kForward][op], b = 1e3 * r.profile.seconds[P::kBackward][op],
                 rc = 1e3 * r.profile.seconds[P::kRecompute][op];
    if (f + b + rc == 0) continue;
    accounted += f + b + rc;
    std::printf("    %-12s %9.1f %9.1f %9.1f %6.1f%%\n", P::name(op), f, b, rc, 100 * (f + b + rc) / step_ms);
  }
  double gemm = 0;  // the matrix products: projections, feed-forward, adapters, head
  for (int op : {P::kQkv, P::kAttnOutput, P::kGateUp, P::kDown, P::kLora, P::kHead})
    for (int phase = 0; phase < P::kPhases; ++phase) gemm += 1e3 * r.profile.seconds[phase][op];
  const double opt = 1e3 * r.optimizer_s;
  std::printf("    %-12s %29.1f %6.1f%%\n", "optimizer", opt, 100 * opt / step_ms);
  std::printf("    %-12s %29.1f %6.1f%%  (step %.1f ms)\n", "other", step_ms - accounted - opt,
              100 * (step_ms - accounted - opt) / step_ms, step_ms);
  std::printf("    GEMM share (qkv, attn_output, gate_up, down, lora, head): %.1f%%\n", 100 * gemm / step_ms);
}

// One block's mixer half (OpProfile::layer_seconds says what it holds) by
// the mixer's kind, and its feed-forward half, mean over the blocks, every
// phase: where a model mixes kinds, they compare inside one run.
void print_block_halves(const model::Config& c, const Result& r) {
  static const char* const kinds[] = {"attention", "short_conv", "gated_deltanet"};
  double mixer[3] = {}, n[3] = {}, ffn = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const int k = int(c.mixer(l));
    mixer[k] += r.profile.layer_seconds[size_t(l)][model::kMixerHalf];
    ffn += r.profile.layer_seconds[size_t(l)][model::kFfnHalf];
    n[k] += 1;
  }
  std::printf("  time per step of one block, ms: mixer half");
  for (int k = 0; k < 3; ++k)
    if (n[k] > 0) std::printf(" %s %.1f (%g blocks),", kinds[k], 1e3 * mixer[k] / n[k], n[k]);
  std::printf(" feed-forward half %.1f\n", 1e3 * ffn / double(c.n_layers));
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const train::RunConfig rc = train::preset(a.preset);
  model::Config c = rc.model_config(a.vocab > 0 ? a.vocab : rc.data.vocab_size);
  if (a.as_llama) {  // same shape; plain RoPE, no head or post norms, SwiGLU, every layer global and attending
    c.arch = "llama";
    c.sliding_window = 0;
    c.attention_layers.clear();
    c.rope_dim = 0;
  }
  if (a.lora_rank > 0) {  // every block matrix some layer has
    std::vector<std::string> all;
    for (model::BlockMatrix m : model::model_block_matrices(c)) all.push_back(model::block_matrix_name(m));
    c.lora = {a.lora_rank, double(a.lora_rank), all};
  }
  const int64_t B = a.batch > 0 ? a.batch : rc.train.batch, T = a.seq_len > 0 ? a.seq_len : rc.train.seq_len;
  model::ModelOptions o;
  o.recompute = model::recompute_from_name(a.recompute);
  o.precision = model::precision_from_name(a.precision);
  const bool bf16 = o.precision == model::Precision::kBf16;
  const double fpt = c.flops_per_token(T);
  std::printf("%s (%s) %s recompute=%s: vocab %lld, %lld matmul params, %.1f MFLOP/token (6N + 12*L*d*T), "
              "batch %lld x %lld%s\n",
              a.preset.c_str(), c.arch.c_str(), a.precision.c_str(), a.recompute.c_str(), (long long)c.vocab,
              (long long)c.matmul_params(), fpt / 1e6, (long long)B, (long long)T,
              a.lora_rank > 0 ? fmt::format(", LoRA rank {} on all {} block matrices (MFU counts 6N all the same)",
                                            a.lora_rank, c.lora.targets.size())
                                    .c_str()
                              : "");
  std::unique_ptr<gguf::GgufFile> base_file;
  std::unique_ptr<model::QuantizedBase> held;
  if (!a.held_base.empty()) {
    if (a.lora_rank <= 0) fail("bench_train: --held-base needs --lora");
    const auto type = gguf::type_from_name(a.held_base);
    if (!type) fail("bench_train: --held-base {}: not a GGUF type name", a.held_base);
    const std::string path = fmt::format("/tmp/bench_train_base_{}.gguf", getpid());
    write_random_base(c, *type, path);
    base_file = std::make_unique<gguf::GgufFile>(path);
    std::remove(path.c_str());  // the map keeps the data
    held = std::make_unique<model::QuantizedBase>(*base_file, c, bf16);
    o.quantized = held.get();
    std::printf("base: %zu matrices held %s (%.1f MiB)\n", held->names().size(), a.held_base.c_str(),
                double(held->bytes()) / (1 << 20));
  }
  for (int threads : a.threads) {
    omp_set_num_threads(threads);
    // measured before the model exists, so that its buffers are not in the peak RSS
    const auto shapes = bench::training_gemm_shapes(B * T, c.d_model, c.d_ff, c.vocab,
                                                    model::default_logit_chunk_rows(c.vocab, threads, B * T));
    const double peak = bf16 ? bench::measure_gemm_gflops<kernels::bf16>(bench::dnnl_gemm_bf16, shapes)
                             : bench::measure_gemm_gflops(bench::dnnl_gemm, shapes);
    const Result r = run_training(c, B, T, o, 2, a.steps, a.prompt);
    const double achieved = fpt * r.tokens_per_s / 1e9;
    std::printf("threads %d: %8.1f tokens/s  %.3f s/step  %6.1f GFLOP/s  MFU %5.1f%% of %.0f "
                "GFLOP/s %s GEMM peak  loss %.3f  peak RSS %.0f MiB\n",
                threads, r.tokens_per_s, r.seconds_per_step, achieved, 100.0 * achieved / peak, peak,
                bf16 ? "bf16" : "sgemm", r.loss, bench::peak_rss_mib());
    print_breakdown(r);
    print_block_halves(c, r);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_train: %s\n", e.what());
  return 1;
}
