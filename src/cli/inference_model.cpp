#include "cli/inference_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/threads_option.h"
#include "gguf/ollama_store.h"
#include "model/block_recipe.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::cli {

namespace {

// The model's path (an ollama name resolved), after the thread count is set
// (the decoder plans its per-thread scratch when it is built).
std::string path_with_threads_set(const InferenceOptions& o) {
  apply_threads_option(o.threads);
  return gguf::resolve_model_path(o.model);
}

// Without -c: the model's context, at most kDefaultCtx (as llama.cpp's tools
// default to 4096): the decoder plans its buffers for all of it, and a
// released model's 40960 or 131072 tokens would take tens of GB.
constexpr int64_t kDefaultCtx = 4096;
int64_t context_of(const InferenceOptions& o, const gguf::GgufFile& f) {
  if (o.ctx > 0) return o.ctx;
  return std::min(kDefaultCtx, model::config_from_gguf(f).ctx);
}

// A model file or an archive would be scored as bytes: refuse it, naming
// the first byte that is no text.
void check_is_text(const std::string& text, const std::string& path) {
  const size_t nul = text.find('\0');
  const int64_t bad = first_invalid_utf8(text.data(), text.size());
  if (nul == std::string::npos && bad < 0) return;
  const size_t at = bad >= 0 && (nul == std::string::npos || size_t(bad) < nul) ? size_t(bad) : nul;
  fail("{}: not a text file (byte {} is 0x{:02x}, {}); give a UTF-8 text file", path, at,
       static_cast<unsigned char>(text[at]), text[at] == '\0' ? "a NUL" : "not UTF-8");
}

}  // namespace

int32_t chunk_bos(const tokenizer::Tokenizer& tok) { return tok.add_bos() ? tok.bos_id() : -1; }

std::vector<int32_t> text_file_tokens(const tokenizer::Tokenizer& tok, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  check_is_text(text, path);
  return tok.encode(text, tok.add_bos());
}

void add_inference_options(CLI::App* cmd, InferenceOptions& o, bool model_required) {
  auto* model = cmd->add_option("-m,--model", o.model, "GGUF model, or ollama:NAME[:TAG] from ollama's store");

  if (model_required) model->required();
  cmd->add_option("-c,--ctx-size", o.ctx, "Context length (default: the model's, at most 4096)");
  cmd->add_option("--cache-type", o.cache_type, "KV cache type: f16 (llama.cpp's default) or f32");
  add_lora_options(cmd, o.lora);
  add_threads_option(cmd, o.threads);
}

InferenceModel::InferenceModel(const InferenceOptions& o)
    : file(path_with_threads_set(o)),
      decoder(file, context_of(o, file), infer::cache_type_from_name(o.cache_type)),
      tokenizer(tokenizer::Tokenizer::from_gguf(file)) {
  apply_lora_options(o.lora, decoder, tokenizer);
  const model::Config& c = decoder.config();
  if (o.ctx > c.ctx)  // llama.cpp warns the same way
    fmt::print(stderr,
               "warning: -c {} is longer than the {} tokens {} was trained for ({}){}; expect worse text past {}\n",
               o.ctx, c.ctx, o.model, c.key("context_length"),
               c.has_recurrent_layers() ? ": " + model::window_past_context(c, o.ctx) : "", c.ctx);
}

}  // namespace ggtrain::cli
