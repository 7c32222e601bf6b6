#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/lora_options.h"
#include "cli/token_list.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/sampler.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    std::string model, prompt, tokens;
    int64_t n = 64, ctx = 0;
    infer::SamplerConfig sampler;
    uint64_t seed = 42;
    bool print_ids = false;
    LoraOptions lora;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a llama GGUF (KV cache, streamed)");
  cmd->add_option("-m,--model", o->model, "GGUF model")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text (BOS is added as the model asks)");
  cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids instead of text");
  cmd->add_option("-n,--n-predict", o->n, "Tokens to generate (default 64)");
  cmd->add_option("-c,--ctx-size", o->ctx, "Context length (default: the model's)");
  cmd->add_option("--temp", o->sampler.temperature, "Temperature; 0 is greedy (default 0.8)");
  cmd->add_option("--top-k", o->sampler.top_k, "Top-k, 0 off (default 40)");
  cmd->add_option("--top-p", o->sampler.top_p, "Top-p, 1 off (default 0.95)");
  cmd->add_option("--min-p", o->sampler.min_p, "Min-p, 0 off (default 0.05)");
  cmd->add_option("--repeat-penalty", o->sampler.repeat_penalty, "Repeat penalty, 1 off (default 1)");
  cmd->add_option("--repeat-last-n", o->sampler.repeat_last_n, "History the penalty sees (default 64)");
  cmd->add_option("--seed", o->seed, "Sampling seed (default 42)");
  add_lora_options(cmd, o->lora);
  cmd->add_flag("--print-ids", o->print_ids, "End with one line of the generated ids, comma-separated");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    gguf::GgufFile f(o->model);
    infer::Decoder dec(f, o->ctx);
    apply_lora_options(o->lora, dec);
    auto tok = data::Tokenizer::from_gguf(f);
    std::vector<int32_t> prompt = o->tokens.empty() ? tok.encode(o->prompt, tok.add_bos()) : parse_token_list(o->tokens);
    if (prompt.empty()) fail("generate: the prompt is empty");
    if (o->tokens.empty()) fmt::print("{}", o->prompt);
    std::fflush(stdout);

    const auto t0 = std::chrono::steady_clock::now();
    dec.eval(prompt.data(), int64_t(prompt.size()), false);
    const double prompt_s = seconds_since(t0);
    std::vector<int32_t> history = prompt, out;
    Rng rng(o->seed);
    const auto t1 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o->n; ++i) {
      int32_t next = infer::sample_token(dec.logits(), dec.config().vocab, o->sampler, rng, history);
      out.push_back(next);
      history.push_back(next);
      if (next == tok.eos_id()) break;
      fmt::print("{}", tok.token_to_piece(next));
      std::fflush(stdout);
      if (i + 1 == o->n || dec.position() >= dec.n_ctx()) break;
      dec.eval(&next, 1, false);
    }
    const double decode_s = seconds_since(t1);
    fmt::print("\n");
    if (o->print_ids) fmt::print("{}\n", fmt::join(out, ","));
    std::fflush(stdout);
    fmt::print(stderr, "prompt: {} tokens in {:.3f} s ({:.1f} tokens/s); generated {} tokens in {:.3f} s ({:.1f} tokens/s)\n",
               prompt.size(), prompt_s, double(prompt.size()) / prompt_s, out.size(), decode_s,
               double(out.size()) / decode_s);
    return 0;
  };
}

}  // namespace ggtrain::cli
