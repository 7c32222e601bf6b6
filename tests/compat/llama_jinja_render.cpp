// Test helper for llama_cpp_chat_check.sh, built there from the llama.cpp
// source node-llama-cpp ships (llama/gitRelease.bundle): llama.cpp's own
// Jinja engine (common/jinja, what `llama-cli --jinja` and llama-server run)
// on each line of a JSONL file ({"jinja": TEMPLATE, "vars": {"messages",
// "add_generation_prompt", "bos_token", ...}}), printed as one JSON string
// per line. The variables are passed as common_chat_template_direct_apply
// passes them, without input marking.
#include <cstdio>
#include <fstream>
#include <string>

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"
#include "json.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: llama_jinja_render INPUT.jsonl\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    try {
      const common_json j = common_json::parse(line);
      const std::string tmpl = j.at("jinja").get<std::string>();
      jinja::lexer lexer;
      const auto tokens = lexer.tokenize(tmpl);
      jinja::program program = jinja::parse_from_tokens(tokens);
      jinja::context ctx(tmpl);
      jinja::global_from_json(ctx, j.at("vars"), false);
      jinja::runtime runtime(ctx);
      const std::string out = jinja::runtime::gather_string_parts(runtime.execute(program))->as_string().str();
      std::printf("%s\n", common_json::make(out).dump().c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "llama_jinja_render: line %d: %s\n", n, e.what());
      return 1;
    }
  }
  return 0;
}
