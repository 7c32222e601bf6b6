#include <fmt/core.h>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/ollama_modelfile.h"
#include "cli/commands.h"
#include "convert/export.h"
#include "model/architecture.h"
#include "quant/recipe.h"
#include "util/error.h"
#include "util/suggest.h"

namespace ggtrain::cli {

namespace {

// The output's folder must exist: say so before any work, not as a failed
// temporary file after minutes of quantizing.
void check_output_folder(const std::string& out) {
  const std::filesystem::path dir = std::filesystem::path(out).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    fail("export: the folder of {} does not exist ({}); create it first (mkdir -p {})", out, dir.string(),
         dir.string());
}

// llama-quantize names each tensor it found no importance for: so does this,
// in one line.
void report_importance(const convert::QuantizeReport& r, const std::string& path) {
  fmt::print("{} of {} quantized tensors used the importance matrix {}{}\n", r.weighted, r.quantized, path,
             r.weighted + int(r.without_importance.size()) < r.quantized
                 ? " (the others' types, Q8_0 or F16, take none, as in llama-quantize)"
                 : "");
  if (!r.without_importance.empty())  // the embedding always: llama-imatrix sees no product with it
    fmt::print("note: no entry for {} ({}), quantized without one as llama-quantize does\n",
               fmt::join(r.without_importance, ", "), r.without_importance.size());
}

}  // namespace

Runner add_export_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string type, imatrix;
    bool ollama = false, merge_lora = false;
    double lora_scale = 1.0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "export", fmt::format("Convert a model GGUF ({}) to F32, F16 or BF16 weights or quantize it as llama-quantize "
                            "does (q8_0, q4_k_m, ...), or merge a LoRA adapter into its base",
                            model::architecture_names()));
  cmd->add_option("files", o->files, "IN.gguf OUT.gguf, or with --merge-lora BASE.gguf ADAPTER.gguf OUT.gguf")
      ->required()
      ->expected(2, 3);
  cmd->add_option("--type", o->type,
                  "f32, f16, bf16, or a llama.cpp file type: " + quant::quantized_file_type_names() +
                      " (default f16; f32 with --merge-lora)");
  cmd->add_option("--imatrix", o->imatrix,
                  "Quantize against this importance matrix (from `ggtrain imatrix` or llama-imatrix, GGUF or .dat), "
                  "as llama-quantize --imatrix does");
  cmd->add_flag("--merge-lora", o->merge_lora, "Merge ADAPTER (a LoRA GGUF) into BASE: a standard model");
  cmd->add_option("--lora-scale", o->lora_scale, "With --merge-lora: the adapter's scale (default 1)");
  cmd->add_flag("--ollama", o->ollama, "Also write OUT.Modelfile beside OUT.gguf for `ollama create`");
  // Every --type it takes, for the "did you mean" of a misspelt one.
  auto type_names = [] {
    std::vector<std::string> names{"f32", "f16", "bf16"};
    std::string all = quant::quantized_file_type_names();
    for (size_t at = 0; at < all.size();) {
      const size_t end = std::min(all.find(", ", at), all.size());
      names.push_back(all.substr(at, end - at));
      at = end + 2;
    }
    return names;
  };
  return [cmd, o, type_names]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->files.size() != (o->merge_lora ? 3u : 2u))
      fail("export: expected {} (got {} files)",
           o->merge_lora ? "BASE.gguf ADAPTER.gguf OUT.gguf with --merge-lora" : "IN.gguf OUT.gguf", o->files.size());
    const std::string type_name = o->type.empty() ? (o->merge_lora ? "f32" : "f16") : o->type;
    const std::string& out = o->files.back();
    check_output_folder(out);
    const auto ft = quant::quantized_file_type(type_name);
    if (!o->imatrix.empty() && !ft)
      fail("export: --imatrix applies to a quantized --type ({}), not {}", quant::quantized_file_type_names(),
           type_name);
    if (ft) {
      std::optional<convert::ImatrixInput> imatrix;
      if (!o->imatrix.empty()) imatrix = convert::load_imatrix_input(o->imatrix);
      const convert::ImatrixInput* im = imatrix ? &*imatrix : nullptr;
      const convert::QuantizeReport r =
          o->merge_lora ? convert::merge_lora_quantized(o->files[0], o->files[1], o->lora_scale, out, *ft, im)
                        : convert::export_quantized(o->files[0], out, *ft, im);
      if (im) report_importance(r, o->imatrix);
      if (r.fallbacks > 0)  // llama-quantize says the same
        fmt::print("note: {} of {} quantized tensors have rows that are not a multiple of the {} block size and were "
                   "stored in a fallback type (Q5_0, Q5_1, Q8_0 or F16), as llama-quantize does; `ggtrain inspect {}` "
                   "lists each tensor's type\n",
                   r.fallbacks, r.quantized, type_name, out);
    } else {
      const auto type = gguf::type_from_name(type_name);
      if (!type ||
          (*type != gguf::TensorType::F32 && *type != gguf::TensorType::F16 && *type != gguf::TensorType::BF16))
        fail("export: --type {}{} is not one of f32, f16, bf16, {}", type_name, did_you_mean(type_name, type_names()),
             quant::quantized_file_type_names());
      if (o->merge_lora) convert::merge_lora_model(o->files[0], o->files[1], o->lora_scale, out, *type);
      else convert::export_model(o->files[0], out, *type);
    }
    fmt::print("wrote {} ({}, {} bytes)\n", out, type_name, std::filesystem::file_size(out));
    if (o->ollama) {
      const chat::WrittenModelfile mf = chat::write_ollama_modelfile(out);
      fmt::print("wrote {}\n", mf.path);
      if (!mf.approximated.empty())
        fmt::print("note: its TEMPLATE renders the {} turns ggtrain trains with, not the model's own chat template "
                   "(ollama does not run Jinja): tool calls and reasoning blocks that template handles are not "
                   "rendered; edit the TEMPLATE if you serve them\n",
                   mf.approximated);
      fmt::print("next: ollama create NAME -f {}   (then: ollama run NAME)\n", mf.path);
    } else {
      fmt::print("next: ggtrain chat -m {}   or llama.cpp: llama-cli -m {}\n", out, out);
    }
    return 0;
  };
}

}  // namespace ggtrain::cli
