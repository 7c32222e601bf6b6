#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/generator.h"

namespace ggtrain::cli {

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    std::string model, prompt;
    int64_t n = 64;
    infer::SamplerConfig sampler;
    uint64_t seed = 42;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a GGUF model");
  cmd->add_option("-m,--model", o->model, "GGUF model")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("-n,--n-predict", o->n, "Tokens to generate (default 64)");
  cmd->add_option("--temp", o->sampler.temperature, "Temperature; 0 is greedy (default 0.8)");
  cmd->add_option("--top-k", o->sampler.top_k, "Top-k, 0 off (default 40)");
  cmd->add_option("--top-p", o->sampler.top_p, "Top-p, 1 off (default 0.95)");
  cmd->add_option("--min-p", o->sampler.min_p, "Min-p, 0 off (default 0.05)");
  cmd->add_option("--seed", o->seed, "Sampling seed (default 42)");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    auto m = load_model(o->model);
    auto tok = data::Tokenizer::from_gguf(gguf::GgufFile(o->model));
    auto prompt = tok.encode(o->prompt, true);
    infer::Generator gen(m.config, m.params.data());
    fmt::print("{}", o->prompt);
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    auto ids = gen.generate(prompt, o->n, o->sampler, o->seed, tok.eos_id(), [&](int32_t id) {
      if (id != tok.eos_id()) fmt::print("{}", tok.token_to_piece(id));
      std::fflush(stdout);
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("\n");
    std::fflush(stdout);
    fmt::print(stderr, "{} tokens in {:.2f} s ({:.1f} tokens/s)\n", ids.size(), dt, double(ids.size()) / dt);
    return 0;
  };
}

}  // namespace ggtrain::cli
