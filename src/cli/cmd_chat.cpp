#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "chat/chat_session.h"
#include "cli/commands.h"
#include "cli/lora_options.h"
#include "cli/sampling_options.h"
#include "cli/threads_option.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct ChatOptions {
  std::string model, system, prompt_file, chat_template;
  int64_t n = 256, ctx = 0, threads = 0;
  infer::SamplerConfig sampler;
  uint64_t seed = 42;
  bool json = false;
  LoraOptions lora;
};

// Ctrl-C while a reply streams ends that reply; at the prompt it drops the
// line typed so far. Ctrl-D (end of input) quits.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

void install_sigint() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns, and the loop offers a fresh prompt
  sigaction(SIGINT, &sa, nullptr);
}

// --prompt-file: each non-empty line a new conversation, answered in turn.
int answer_file(const ChatOptions& o, chat::ChatSession& s) {
  std::ifstream in(o.prompt_file);
  if (!in) fail("{}: cannot read (--prompt-file)", o.prompt_file);
  std::string line;
  int64_t n = 0, stopped = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    s.clear();
    const chat::Reply r = s.reply(line, o.n, o.sampler, o.seed);
    ++n;
    stopped += r.stopped;
    if (o.json)
      fmt::print("{}\n", nlohmann::json{{"prompt", line}, {"prompt_ids", r.prompt}, {"reply", r.text}, {"ids", r.tokens},
                                      {"stopped", r.stopped}}
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      fmt::print("{}\n", r.text);
    std::fflush(stdout);
  }
  fmt::print(stderr, "chat: {} prompts answered, {} replies ended at the end of their turn\n", n, stopped);
  return 0;
}

int converse(const ChatOptions& o, chat::ChatSession& s) {
  const bool tty = ::isatty(0) == 1;
  install_sigint();
  if (tty) fmt::print(stderr, "chat: Enter sends, Ctrl-C ends a reply, Ctrl-D quits\n");
  for (;;) {
    if (tty) fmt::print("> ");
    std::fflush(stdout);
    std::string line;
    g_interrupted = false;
    if (!std::getline(std::cin, line)) {
      if (!g_interrupted) break;  // Ctrl-D (end of input)
      std::cin.clear();           // Ctrl-C at the prompt: the line is dropped, a fresh prompt
      fmt::print("\n");
      continue;
    }
    if (line.empty()) continue;
    const chat::Reply r = s.reply(line, o.n, o.sampler, o.seed, [](const std::string& piece) {
      fmt::print("{}", piece);
      std::fflush(stdout);
    }, [] { return g_interrupted.load(); });
    fmt::print("\n");
    if (r.dropped_turns > 0)
      fmt::print(stderr, "chat: the context was full; the oldest {} turn(s) were dropped\n", r.dropped_turns);
    if (r.cancelled) fmt::print(stderr, "chat: reply interrupted\n");
    else if (!r.stopped) fmt::print(stderr, "chat: reply cut at {} tokens (-n)\n", r.tokens.size());
  }
  fmt::print("\n");
  return 0;
}

}  // namespace

Runner add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model in the terminal, with the model's chat template");
  cmd->add_option("-m,--model", o->model, "GGUF model")->required();
  cmd->add_option("--system-prompt", o->system, "System message (also -sys, as llama.cpp spells it)");
  cmd->add_option("-n,--n-predict", o->n, "Most tokens per reply (default 256)");
  cmd->add_option("-c,--ctx-size", o->ctx, "Context length (default: the model's)");
  cmd->add_option("--prompt-file", o->prompt_file, "Answer each line of FILE as a new conversation, then exit");
  cmd->add_option("--chat-template", o->chat_template,
                  "chatml, llama3, llama2, mistral, gemma, phi3 or zephyr (default: the model's)");
  cmd->add_flag("--json", o->json, "With --prompt-file: one JSON line per reply (prompt, prompt_ids, reply, ids, stopped)");
  add_sampling_options(cmd, o->sampler, o->seed);
  add_lora_options(cmd, o->lora);
  add_threads_option(cmd, o->threads);
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    apply_threads_option(o->threads);
    gguf::GgufFile f(o->model);
    infer::Decoder dec(f, o->ctx);
    apply_lora_options(o->lora, dec);
    dec.warmup();
    const auto tok = data::Tokenizer::from_gguf(f);
    std::string warning;
    const chat::Template t = chat::template_for_model(tok, o->chat_template, &warning);
    if (!warning.empty()) fmt::print(stderr, "warning: {}\n", warning);
    chat::ChatSession s(dec, tok, t, o->system);
    return o->prompt_file.empty() ? converse(*o, s) : answer_file(*o, s);
  };
}

}  // namespace ggtrain::cli
