// `ggtrain tokenizer train|import` and `ggtrain tokenize`.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_train.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_tokenizer_command(CLI::App& app) {
  struct Opts {
    std::string input, out, config;
    int vocab = 0;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenizer", "Tokenizer tools");
  cmd->require_subcommand(1);
  auto* train = cmd->add_subcommand("train", "Train a sentencepiece BPE tokenizer (byte fallback) on a text file");
  train->add_option("--input", opts->input, "Training text, one sentence per line")->required();
  train->add_option("--vocab", opts->vocab, "Vocabulary size (at least 259 + the text's distinct characters)")
      ->required();
  train->add_option("--out", opts->out, "sentencepiece model to write (FILE.model)")->required();
  auto* import = cmd->add_subcommand(
      "import", "Read a Hugging Face tokenizer.json (byte-level BPE) into a GGUF vocabulary, as llama.cpp's converter "
                "writes it; use it as data.tokenizer or tokenize -m");
  import->add_option("tokenizer_json", opts->input, "tokenizer.json")->required();
  import->add_option("--config", opts->config,
                     "its tokenizer_config.json (special tokens, add_bos_token, chat_template)");
  import->add_option("--out", opts->out, "GGUF to write (the vocabulary only)")->required();
  return [train, import, opts]() -> int {
    if (train->parsed()) {
      tokenizer::train_sentencepiece_bpe(opts->input, opts->vocab, opts->out);
      fmt::print("wrote {} (vocabulary {})\n", opts->out, opts->vocab);
      return 0;
    }
    if (!import->parsed()) return -1;
    const tokenizer::HfVocabulary v = tokenizer::read_hf_tokenizer(opts->input, opts->config);
    gguf::GgufWriter w;
    w.set("general.name", gguf::Value::str("vocabulary of " + opts->input));
    tokenizer::add_hf_vocabulary(w, v);
    w.write(opts->out);
    fmt::print("wrote {} ({} tokens, {} merges, pre-tokenizer {}{})\n", opts->out, v.tokens.size(), v.merges.size(),
               v.pre, v.chat_template.empty() ? "" : ", chat template");
    return 0;
  };
}

Runner add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, sp, lines;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids (no BOS) of each non-empty line, comma-separated");
  auto* source = cmd->add_option_group("tokenizer", "Where the tokenizer comes from");
  source->add_option("-m,--model", opts->model, "GGUF model carrying a llama (SPM) or gpt2 (byte-level BPE) tokenizer");
  source->add_option("--sp", opts->sp, "sentencepiece .model, converted as llama.cpp would");
  source->require_option(1);
  cmd->add_option("--lines", opts->lines, "Text file")->required();
  return [cmd, opts]() -> int {
    if (!cmd->parsed()) return -1;
    auto tok = opts->sp.empty() ? tokenizer::Tokenizer::from_gguf(gguf::GgufFile(opts->model))
                                : tokenizer::Tokenizer::from_sentencepiece(opts->sp);
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
