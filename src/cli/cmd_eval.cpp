#include <fmt/core.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/token_list.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/perplexity.h"
#include "kernels/cross_entropy.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::cli {

namespace {

int eval_tokens(infer::Decoder& dec, const std::string& csv, const std::string& dump) {
  auto ids = parse_token_list(csv);
  dec.eval(ids.data(), int64_t(ids.size()), true);
  const int64_t V = dec.config().vocab;
  if (ids.size() > 1) {
    double nll = 0;  // mean next-token loss over the given tokens
    for (size_t i = 0; i + 1 < ids.size(); ++i) nll += kernels::token_nll(dec.logits() + int64_t(i) * V, V, ids[i + 1]);
    nll /= double(ids.size() - 1);
    fmt::print("{} tokens: mean next-token loss {:.6f}, perplexity {:.4f}\n", ids.size(), nll, std::exp(nll));
  }
  if (!dump.empty()) {
    write_file_atomic(dump, dec.logits(), ids.size() * size_t(V) * sizeof(float));
    fmt::print("wrote logits [{}, {}] to {}\n", ids.size(), V, dump);
  }
  return 0;
}

// A model file or an archive given to --text would be scored as bytes:
// refuse it, naming the first byte that is no text.
void check_is_text(const std::string& text, const std::string& path) {
  const size_t nul = text.find('\0');
  const int64_t bad = first_invalid_utf8(text.data(), text.size());
  if (nul == std::string::npos && bad < 0) return;
  const size_t at = bad >= 0 && (nul == std::string::npos || size_t(bad) < nul) ? size_t(bad) : nul;
  fail("{}: not a text file (byte {} is 0x{:02x}, {}); eval --text scores UTF-8 text", path, at,
       static_cast<unsigned char>(text[at]), text[at] == '\0' ? "a NUL" : "not UTF-8");
}

int eval_text(const data::Tokenizer& tok, infer::Decoder& dec, const std::string& path, int64_t ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  check_is_text(text, path);
  // As llama.cpp: BOS first and at each chunk start only when the vocabulary asks for it.
  auto tokens = tok.encode(text, tok.add_bos());
  const bool tty = ::isatty(2);
  auto r = infer::perplexity(dec, tokens, ctx, tok.add_bos() ? tok.bos_id() : -1, [&](int64_t c, double ppl) {
    if (tty) fmt::print(stderr, "\rchunk {}: perplexity {:.4f}", c + 1, ppl);
  });
  if (tty) fmt::print(stderr, "\n");
  fmt::print("perplexity {:.4f} over {} chunks of {} tokens ({} tokens scored, {} in the text), {:.1f} tokens/s\n",
             r.ppl, r.chunks, ctx, r.scored, tokens.size(), double(r.chunks * ctx) / r.seconds);
  return 0;
}

}  // namespace

Runner add_eval_command(CLI::App& app) {
  struct Opts {
    InferenceOptions model;
    std::string tokens, text, dump_logits;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("eval", "Logits of given tokens, or perplexity of a text, with a GGUF model");
  add_inference_options(cmd, o->model);  // -c: the chunk length of --text
  auto* tokens = cmd->add_option("--tokens", o->tokens, "Comma-separated token ids (evaluated as given)");
  auto* text = cmd->add_option("--text", o->text, "Text file: perplexity as llama.cpp's perplexity tool");
  tokens->excludes(text);
  cmd->add_option("--dump-logits", o->dump_logits, "With --tokens: write float32 logits [n_tokens, vocab]");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->tokens.empty() == o->text.empty()) fail("eval: give exactly one of --tokens and --text");
    InferenceModel m(o->model);
    if (!o->tokens.empty()) return eval_tokens(m.decoder, o->tokens, o->dump_logits);
    m.decoder.warmup();  // perplexity reports tokens/s
    return eval_text(m.tokenizer, m.decoder, o->text, m.decoder.n_ctx());
  };
}

}  // namespace ggtrain::cli
