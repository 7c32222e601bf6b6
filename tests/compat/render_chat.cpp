// Test helper for llama_cpp_chat_check.sh: renders each conversation of a
// JSONL file ({"template": NAME, "messages": [...], "add_generation_prompt":
// bool}) with ggtrain's chat templates and prints one JSON line per input,
// {"jinja": the template's tokenizer.chat_template, "ollama": its Modelfile
// TEMPLATE, "llama_cpp": llama.cpp's built-in name for it (empty for a model
// family's own template), "rendered": the text}, so
// that @huggingface/jinja and llama.cpp can render the same input. With a
// MODEL.gguf, also "ids": the rendered text tokenized by that model's
// vocabulary as llama.cpp's tokenize(add_special, parse_special = true), and
// "model_template": the template ggtrain recognises in that model's
// tokenizer.chat_template.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <string>

#include "chat/template.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

int main(int argc, char** argv) {
  using namespace ggtrain;
  if (argc != 2 && argc != 3) {
    fmt::print(stderr, "usage: render_chat CONVERSATIONS.jsonl [MODEL.gguf]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::string line;
  try {
    std::optional<tokenizer::Tokenizer> tok;
    if (argc == 3) tok = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(argv[2]));
    for (int64_t n = 1; std::getline(in, line); ++n) {
      const auto j = nlohmann::json::parse(line);
      const chat::Template t = chat::template_named(j.at("template").get<std::string>(), "template");
      chat::Conversation c;
      for (const auto& m : j.at("messages")) c.push_back({m.at("role"), m.at("content")});
      const bool gen = j.at("add_generation_prompt");
      chat::check_conversation(c, !gen, fmt::format("{}:{}", argv[1], n));
      nlohmann::json out{{"jinja", chat::template_info(t).jinja},
                         {"ollama", chat::template_info(t).ollama},
                         {"llama_cpp", chat::template_info(t).llama_cpp_name},
                         {"rendered", chat::render(t, c, gen)}};
      if (tok) {
        out["ids"] = tok->encode(out["rendered"].get<std::string>(),
                                 tokenizer::EncodeOptions{.add_bos = tok->add_bos(), .parse_special = true});
        const auto known = chat::detect_template(tok->chat_template());
        out["model_template"] = known ? chat::template_info(*known).name : "";
      }
      fmt::print("{}\n", out.dump());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "render_chat: {}\n", e.what());
    return 1;
  }
  return 0;
}
