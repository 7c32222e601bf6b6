#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/sampling_options.h"
#include "cli/token_list.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    InferenceOptions model;
    std::string prompt, tokens;
    int64_t n = 64;
    infer::SamplerConfig sampler;
    uint64_t seed = 42;
    bool print_ids = false, ignore_eos = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a llama GGUF (KV cache, streamed)");
  add_inference_options(cmd, o->model);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text (BOS is added as the model asks)");
  cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids instead of text");
  cmd->add_option("-n,--n-predict", o->n, "Tokens to generate (default 64)");
  add_sampling_options(cmd, o->sampler, o->seed);
  cmd->add_flag("--print-ids", o->print_ids, "End with one line of the generated ids, comma-separated");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Go on after the end-of-text token (speed measurements)");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    InferenceModel m(o->model);
    infer::Decoder& dec = m.decoder;
    const data::Tokenizer& tok = m.tokenizer;
    dec.warmup();
    std::vector<int32_t> prompt = o->tokens.empty() ? tok.encode(o->prompt, tok.add_bos()) : parse_token_list(o->tokens);
    if (o->tokens.empty()) fmt::print("{}", o->prompt);
    std::fflush(stdout);

    const infer::Generation g =
        infer::generate(dec, prompt, o->n, o->sampler, o->seed, o->ignore_eos ? std::vector<int32_t>{} : std::vector<int32_t>{tok.eos_id()}, [&](int32_t next) {
          if (next == tok.eos_id()) return;
          fmt::print("{}", tok.token_to_piece(next));
          std::fflush(stdout);
        });
    const auto& out = g.tokens;
    const double prompt_s = g.prompt_seconds, decode_s = g.decode_seconds;
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
