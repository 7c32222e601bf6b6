#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>

#include "chat/chat_session.h"
#include "chat/reasoning_filter.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/sampling_options.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct ChatOptions {
  InferenceOptions model;
  std::string system, prompt_file, chat_template;
  int64_t n = 256;
  infer::SamplerConfig sampler;
  uint64_t seed = 42;
  bool json = false;
  bool show_reasoning = false;  // the reply's <think> block as the model wrote it
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
      fmt::print(
          "{}\n",
          nlohmann::json{
              {"prompt", line}, {"prompt_ids", r.prompt}, {"reply", r.text}, {"ids", r.tokens}, {"stopped", r.stopped}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    else if (o.show_reasoning) fmt::print("{}\n", r.text);
    else {
      chat::ReasoningFilter shown(s.replies_start_reasoning());
      fmt::print("{}\n", shown.feed(r.text) + shown.flush());
    }
    std::fflush(stdout);
  }
  fmt::print(stderr, "chat: {} prompts answered, {} replies ended at the end of their turn\n", n, stopped);
  return 0;
}

enum class LineRead { kLine, kInterrupted, kEnd };

// One line of standard input (without its newline). Polls, so that a
// Ctrl-C at any moment, also just before the read begins, ends the wait
// (kInterrupted); kEnd at the end of input (Ctrl-D at an empty line).
LineRead read_line(std::string* line) {
  line->clear();
  for (;;) {
    if (g_interrupted) return LineRead::kInterrupted;
    pollfd p{0, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready <= 0) continue;  // a timeout, or EINTR: the flag is looked at again
    char c;
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return LineRead::kEnd;
    }
    if (n == 0) return line->empty() ? LineRead::kEnd : LineRead::kLine;
    if (c == '\n') return LineRead::kLine;
    *line += c;
  }
}

int converse(const ChatOptions& o, chat::ChatSession& s) {
  const bool tty = ::isatty(0) == 1;
  install_sigint();
  if (tty) fmt::print(stderr, "chat: Enter sends, Ctrl-C ends a reply, Ctrl-D quits\n");
  for (;;) {
    g_interrupted = false;  // before the prompt: a Ctrl-C after it is seen
    if (tty) fmt::print("> ");
    std::fflush(stdout);
    std::string line;
    const LineRead read = read_line(&line);
    if (read == LineRead::kEnd) break;
    if (read == LineRead::kInterrupted) {  // Ctrl-C at the prompt: the line is dropped, a fresh prompt
      fmt::print("\n");
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    chat::ReasoningFilter shown(s.replies_start_reasoning());  // what the model is fed keeps the block
    const chat::Reply r = s.reply(
        line, o.n, o.sampler, o.seed,
        [&](const std::string& piece) {
          fmt::print("{}", o.show_reasoning ? piece : shown.feed(piece));
          std::fflush(stdout);
        },
        [] { return g_interrupted.load(); });
    if (!o.show_reasoning) fmt::print("{}", shown.flush());
    fmt::print("\n");
    if (r.dropped_turns > 0)
      fmt::print(stderr, "chat: the context was full; the oldest {} turn(s) were dropped\n", r.dropped_turns);
    if (r.cancelled) fmt::print(stderr, "chat: reply interrupted\n");
    else if (r.context_full)
      fmt::print(stderr,
                 "chat: reply cut: the context of {} tokens is full (-c raises it; the oldest turns make room "
                 "for the next reply)\n",
                 s.context_size());
    else if (!r.stopped) fmt::print(stderr, "chat: reply cut at {} tokens (-n)\n", r.tokens.size());
  }
  fmt::print("\n");
  return 0;
}

}  // namespace

Runner add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model in the terminal, with the model's chat template");
  add_inference_options(cmd, o->model);
  cmd->add_option("--system-prompt", o->system, "System message (also -sys, as llama.cpp spells it)");
  add_n_predict_option(cmd, o->n,
                       "Most tokens per reply (default 256; -1: until the turn ends or the context is full)");
  cmd->add_option("--prompt-file", o->prompt_file, "Answer each line of FILE as a new conversation, then exit");
  cmd->add_option("--chat-template", o->chat_template, chat::template_names_text() + " (default: the model's)");
  cmd->add_flag("--show-reasoning", o->show_reasoning,
                "Show the replies' reasoning (<think>...</think>), which chat leaves out as llama.cpp does");
  cmd->add_flag("--json", o->json,
                "With --prompt-file: one JSON line per reply (prompt, prompt_ids, reply, ids, stopped)");
  add_sampling_options(cmd, o->sampler, o->seed);
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    InferenceModel m(o->model);
    m.decoder.warmup();
    std::string warning;
    const chat::Template t = chat::template_for_model(m.tokenizer, o->chat_template, &warning);
    if (!warning.empty()) fmt::print(stderr, "warning: {}\n", warning);
    // What is talking: the model, its adapter, the template, the context.
    fmt::print(stderr, "chat: {}{}, template {}, context {} tokens\n", o->model.model,
               o->model.lora.path.empty()
                   ? ""
                   : fmt::format(" with adapter {} (scale {})", o->model.lora.path, o->model.lora.scale),
               chat::template_info(t).name, m.decoder.n_ctx());
    chat::ChatSession s(m.decoder, m.tokenizer, t, o->system);
    return o->prompt_file.empty() ? converse(*o, s) : answer_file(*o, s);
  };
}

}  // namespace ggtrain::cli
