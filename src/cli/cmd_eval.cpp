#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "infer/generator.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_eval_command(CLI::App& app) {
  struct Opts {
    std::string model, tokens, dump_logits;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("eval", "Run the forward pass of a GGUF model on given tokens");
  cmd->add_option("-m,--model", o->model, "GGUF model")->required();
  cmd->add_option("--tokens", o->tokens, "Comma-separated token ids")->required();
  cmd->add_option("--dump-logits", o->dump_logits, "Write float32 logits [n_tokens, vocab] here");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    auto m = load_model(o->model);
    auto ids = parse_token_list(o->tokens);
    for (auto id : ids)
      if (id < 0 || id >= m.config.vocab) fail("--tokens: id {} is outside the vocabulary of {}", id, m.config.vocab);
    infer::Generator gen(m.config, m.params.data());
    auto logits = gen.logits(ids);
    const int64_t V = m.config.vocab;
    double nll = 0;  // mean next-token loss over the given tokens
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const float* row = logits.data() + int64_t(i) * V;
      double mx = row[0], s = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(row[v]) - mx);
      nll += mx + std::log(s) - row[ids[i + 1]];
    }
    if (ids.size() > 1) {
      nll /= double(ids.size() - 1);
      fmt::print("{} tokens: mean next-token loss {:.6f}, perplexity {:.4f}\n", ids.size(), nll, std::exp(nll));
    }
    if (!o->dump_logits.empty()) {
      write_file_atomic(o->dump_logits, logits.data(), logits.size() * sizeof(float));
      fmt::print("wrote logits [{}, {}] to {}\n", ids.size(), V, o->dump_logits);
    }
    return 0;
  };
}

}  // namespace ggtrain::cli
