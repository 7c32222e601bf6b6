#include <fmt/core.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/sampling_options.h"
#include "cli/token_list.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "model/architecture.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the prompt file (-f)", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// -np N: the continuations decoded together, then each printed (the prompt
// text once, each continuation after its number) and the totals.
template <typename Opts>
int generate_parallel(infer::Decoder& dec, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
                      const std::vector<int32_t>& stop, const Opts& o) {
  std::vector<uint64_t> seeds;
  for (int64_t i = 0; i < o.parallel; ++i) seeds.push_back(o.seed + uint64_t(i));
  const std::vector<infer::Generation> gens = infer::generate_group(dec, prompt, o.n, o.sampler, seeds, stop);
  fmt::print("\n");
  int64_t tokens = 0;
  for (size_t i = 0; i < gens.size(); ++i) {
    std::string text;
    for (int32_t id : gens[i].tokens)
      if (id != tok.eos_id()) text += tok.token_to_piece(id);
    fmt::print("--- sequence {} (seed {}) ---\n{}\n", i, seeds[i], text);
    if (o.print_ids) fmt::print("{}\n", fmt::join(gens[i].tokens, ","));
    tokens += int64_t(gens[i].tokens.size());
  }
  std::fflush(stdout);
  const double prompt_s = gens[0].prompt_seconds, decode_s = gens[0].decode_seconds;
  fmt::print(stderr,
             "prompt: {} tokens in {:.3f} s ({:.1f} tokens/s); generated {} tokens in {} sequences in {:.3f} s ({:.1f} "
             "tokens/s)\n",
             prompt.size(), prompt_s, double(prompt.size()) / prompt_s, tokens, gens.size(), decode_s,
             double(tokens) / decode_s);
  return 0;
}

}  // namespace

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    InferenceOptions model;
    std::string prompt, prompt_file, tokens;
    int64_t n = 64;
    infer::SamplerConfig sampler;
    uint64_t seed = 42;
    int64_t parallel = 1;
    bool print_ids = false, ignore_eos = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "generate", fmt::format("Generate text from a model GGUF ({}; KV cache, streamed)", model::architecture_names()));
  add_inference_options(cmd, o->model);
  auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "Prompt text (BOS is added as the model asks)");
  auto* file = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt text from FILE");
  auto* tokens = cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids instead of text");
  prompt->excludes(file)->excludes(tokens);
  file->excludes(tokens);
  add_n_predict_option(cmd, o->n, "Tokens to generate (default 64; -1: until end of text or the context is full)");
  add_sampling_options(cmd, o->sampler, o->seed);
  cmd->add_flag("--print-ids", o->print_ids, "End with one line of the generated ids, comma-separated");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Go on after the end-of-text token (speed measurements)");
  cmd->add_option("--parallel", o->parallel,
                  "(-np) Generate N continuations of the prompt together, one batch through the model per token "
                  "(sequence i seeded SEED + i: sequence 0 is what one would give), printed after each other")
      ->check(CLI::Range(int64_t(1), int64_t(256)));
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    InferenceModel m(o->model);
    infer::Decoder& dec = m.decoder;
    const tokenizer::Tokenizer& tok = m.tokenizer;
    dec.warmup();
    const std::string text = o->prompt_file.empty() ? o->prompt : read_prompt_file(o->prompt_file);
    std::vector<int32_t> prompt = o->tokens.empty() ? tok.encode(text, tok.add_bos()) : parse_token_list(o->tokens);
    // Said before the prompt is echoed: a long file would scroll the reason away.
    if (int64_t(prompt.size()) >= dec.n_ctx())
      throw ggtrain::Error(fmt::format(
          "generate: the prompt's {} tokens leave no room in the context of {} tokens; shorten it or raise -c (up "
          "to the model's {})",
          prompt.size(), dec.n_ctx(), dec.config().ctx));
    if (o->tokens.empty()) fmt::print("{}", text);
    std::fflush(stdout);

    const std::vector<int32_t> stop = o->ignore_eos ? std::vector<int32_t>{} : std::vector<int32_t>{tok.eos_id()};
    if (o->parallel > 1) return generate_parallel(dec, tok, prompt, stop, *o);
    const infer::Generation g = infer::generate(dec, prompt, o->n, o->sampler, o->seed, stop, [&](int32_t next) {
      if (next == tok.eos_id()) return;
      fmt::print("{}", tok.token_to_piece(next));
      std::fflush(stdout);
    });
    const auto& out = g.tokens;
    const double prompt_s = g.prompt_seconds, decode_s = g.decode_seconds;
    fmt::print("\n");
    if (o->print_ids) fmt::print("{}\n", fmt::join(out, ","));
    std::fflush(stdout);
    if (g.context_full)
      fmt::print(stderr, "generate: stopped: the context of {} tokens is full (-c raises it, up to the model's {})\n",
                 dec.n_ctx(), dec.config().ctx);
    fmt::print(
        stderr, "prompt: {} tokens in {:.3f} s ({:.1f} tokens/s); generated {} tokens in {:.3f} s ({:.1f} tokens/s)\n",
        prompt.size(), prompt_s, double(prompt.size()) / prompt_s, out.size(), decode_s, double(out.size()) / decode_s);
    return 0;
  };
}

}  // namespace ggtrain::cli
