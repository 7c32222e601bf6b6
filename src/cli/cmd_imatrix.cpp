#include <fmt/core.h>

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "chat/chat_session.h"
#include "chat/rendered_records.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "infer/imatrix.h"
#include "quant/importance_matrix.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_imatrix_command(CLI::App& app) {
  struct Opts {
    InferenceOptions model;
    std::string text, out = "imatrix.gguf", chat_template;
    std::vector<std::string> in_files;
    int64_t chunks = 0;
    bool process_output = false;
  };
  auto o = std::make_shared<Opts>();
  o->model.ctx = 512;  // llama-imatrix's default chunk
  auto* cmd = app.add_subcommand(
      "imatrix", "Collect an importance matrix as llama-imatrix does (for `export --imatrix` or llama-quantize "
                 "--imatrix): the squared activations each weight matrix multiplies, over a text");
  add_inference_options(cmd, o->model, false);
  cmd->get_option("-c")->description("Tokens per chunk (default 512, as llama-imatrix)");
  cmd->add_option("-f,--file", o->text,
                  "UTF-8 text to collect over (at least 2 chunks of tokens), or chat JSONL (.jsonl: each record "
                  "rendered by the chat template, one after another)");
  cmd->add_option("--in-file", o->in_files,
                  "Combine importance matrices (GGUF or .dat, repeat the option) into -o as llama-imatrix --in-file "
                  "does, with -c their chunk size (no -f)");
  cmd->add_option("--chat-template", o->chat_template,
                  "With a .jsonl file: chatml, llama3, qwen3, gemma3, ... (default: the model's)");
  cmd->add_option("-o,--output-file", o->out, "Where to write the matrix (GGUF; default imatrix.gguf)");
  cmd->add_option("--chunks", o->chunks, "Use at most this many chunks (default: all)");
  cmd->add_flag("--process-output", o->process_output, "Also collect output.weight's inputs");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    if (!o->in_files.empty()) {
      // -m may be given, as llama-imatrix asks for one; combining never reads it.
      if (!o->text.empty())
        fail("imatrix: --in-file combines matrices; give it without -f (collecting on top of them is not "
             "supported: collect, then combine)");
      std::vector<quant::ImportanceMatrix> parts;
      for (const std::string& f : o->in_files) parts.push_back(quant::read_importance_matrix(f));
      const auto merged = quant::merge_importance_matrices(parts, o->in_files, o->model.ctx);
      quant::write_importance_matrix(merged, o->out);
      fmt::print("wrote {}: {} matrices from {} files, {} chunks of {} tokens\n", o->out, merged.entries.size(),
                 parts.size(), merged.chunk_count, merged.chunk_size);
      return 0;
    }
    if (o->model.model.empty() || o->text.empty())
      fail("imatrix: give -m MODEL.gguf and -f TEXT to collect (or --in-file FILE... to combine matrices)");
    // llama.cpp runs a chunk in micro-batches of 512 and skips products of
    // fewer than 16 rows: a shorter chunk would collect nothing.
    if (o->model.ctx < 16) fail("imatrix: -c {} is too short; a chunk needs at least 16 tokens", o->model.ctx);
    InferenceModel m(o->model);
    const bool chat = o->text.size() >= 6 && o->text.compare(o->text.size() - 6, 6, ".jsonl") == 0;
    if (!chat && !o->chat_template.empty())
      fail("imatrix: --chat-template applies to chat JSONL (-f FILE.jsonl), not {}", o->text);
    std::vector<int32_t> tokens;
    if (chat) {
      std::string warning;
      const chat::Template t = chat::template_for_model(m.tokenizer, o->chat_template, &warning);
      if (!warning.empty()) fmt::print(stderr, "warning: {}\n", warning);
      tokens = chat::rendered_record_tokens(o->text, m.tokenizer, t);
      fmt::print("{}: rendered with the {} template, {} tokens\n", o->text, chat::template_info(t).name, tokens.size());
    } else {
      tokens = text_file_tokens(m.tokenizer, o->text);
    }
    const bool progress = ::isatty(2);
    const auto r = infer::collect_imatrix(m.decoder, tokens, o->model.ctx, chunk_bos(m.tokenizer), o->chunks,
                                          o->process_output, o->text, [&](int64_t c, double ppl) {
                                            if (progress)
                                              fmt::print(stderr, "\rchunk {}: perplexity {:.4f}", c + 1, ppl);
                                          });
    if (progress) fmt::print(stderr, "\n");
    quant::write_importance_matrix(r.matrix, o->out);
    fmt::print("wrote {}: {} matrices over {} chunks of {} tokens; perplexity {:.4f}\n", o->out,
               r.matrix.entries.size(), r.matrix.chunk_count, r.matrix.chunk_size, r.perplexity.ppl);
    return 0;
  };
}

}  // namespace ggtrain::cli
