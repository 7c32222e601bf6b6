// Test helper for llama_cpp_chat_check.sh: renders each conversation of a
// JSONL file ({"template": NAME, "messages": [...], "tools"?: [...],
// "add_generation_prompt": bool}) with ggtrain's chat templates and prints one JSON line per input,
// {"jinja": the template's tokenizer.chat_template, "ollama": its Modelfile
// TEMPLATE, "llama_cpp": llama.cpp's built-in name for it (empty for a model
// family's own template), "rendered": the text, "trained": the texts of the
// spans that carry the loss}, so
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
      const auto j = nlohmann::ordered_json::parse(line);
      const chat::Template t = chat::template_named(j.at("template").get<std::string>(), "template");
      const std::string where = fmt::format("{}:{}", argv[1], n);
      const chat::Conversation c = chat::chat_record(j, where);  // with "tools", when the line has them
      const bool gen = j.at("add_generation_prompt");
      chat::check_conversation(c, !gen, where);
      nlohmann::json out{{"jinja", chat::template_info(t).jinja},
                         {"ollama", chat::template_info(t).ollama},
                         {"llama_cpp", chat::template_info(t).llama_cpp_name},
                         {"rendered", chat::render(t, c, gen)},
                         {"trained", nlohmann::json::array()}};
      for (const chat::Span& s : chat::render_spans(t, c, gen))
        if (s.trained) out["trained"].push_back(s.text);
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
