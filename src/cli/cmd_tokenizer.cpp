// `ggtrain tokenizer train` and `ggtrain tokenize`.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "data/sentencepiece_train.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_tokenizer_command(CLI::App& app) {
  struct Opts {
    std::string input, out;
    int vocab = 0;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenizer", "Tokenizer tools");
  cmd->require_subcommand(1);
  auto* train = cmd->add_subcommand(
      "train", "Train a sentencepiece BPE tokenizer (byte fallback) on a text file");
  train->add_option("--input", opts->input, "Training text, one sentence per line")->required();
  train->add_option("--vocab", opts->vocab, "Vocabulary size (at least 259 + the text's distinct characters)")
      ->required();
  train->add_option("--out", opts->out, "sentencepiece model to write (FILE.model)")->required();
  return [train, opts]() -> int {
    if (!train->parsed()) return -1;
    data::train_sentencepiece_bpe(opts->input, opts->vocab, opts->out);
    fmt::print("wrote {} (vocabulary {})\n", opts->out, opts->vocab);
    return 0;
  };
}

Runner add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, sp, lines;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Print the token ids (no BOS) of each non-empty line, comma-separated");
  auto* source = cmd->add_option_group("tokenizer", "Where the tokenizer comes from");
  source->add_option("-m,--model", opts->model,
                     "GGUF model carrying a llama (SPM) or gpt2 (byte-level BPE) tokenizer");
  source->add_option("--sp", opts->sp, "sentencepiece .model, converted as llama.cpp would");
  source->require_option(1);
  cmd->add_option("--lines", opts->lines, "Text file")->required();
  return [cmd, opts]() -> int {
    if (!cmd->parsed()) return -1;
    auto tok = opts->sp.empty()
                   ? data::Tokenizer::from_gguf(gguf::GgufFile(opts->model))
                   : data::Tokenizer::from_sentencepiece(opts->sp);
    std::ifstream in(opts->lines, std::ios::binary);
    if (!in) fail("{}: cannot open: {}", opts->lines, errno_text(errno));
    fmt::memory_buffer buf;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      fmt::format_to(std::back_inserter(buf), "{}\n", fmt::join(tok.encode(line, false), ","));
      if (buf.size() > (1 << 20)) {
        std::fwrite(buf.data(), 1, buf.size(), stdout);
        buf.clear();
      }
    }
    if (in.bad()) fail("{}: read error", opts->lines);
    std::fwrite(buf.data(), 1, buf.size(), stdout);
    return 0;
  };
}

}  // namespace ggtrain::cli
