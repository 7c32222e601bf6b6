// Test helper for llama_cpp_chat_check.sh, built there against the
// libllama of node-llama-cpp's prebuilt package: llama.cpp's own
// llama_chat_apply_template (its template detection and built-in renderer)
// on each line of a JSONL file ({"jinja", "messages", "add_generation_prompt"}),
// printed as one JSON string per line.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

// From llama.h (the release node-llama-cpp ships): only these two are used.
extern "C" {
struct llama_chat_message {
  const char* role;
  const char* content;
};
int32_t llama_chat_apply_template(const char* tmpl, const llama_chat_message* chat, size_t n_msg, bool add_ass,
                                  char* buf, int32_t length);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: llama_chat_render INPUT.jsonl\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    const std::string tmpl = j.at("jinja");
    std::vector<std::string> roles, contents;
    for (const auto& m : j.at("messages")) {
      roles.push_back(m.at("role"));
      contents.push_back(m.at("content"));
    }
    std::vector<llama_chat_message> msgs;
    for (size_t i = 0; i < roles.size(); ++i) msgs.push_back({roles[i].c_str(), contents[i].c_str()});
    std::vector<char> buf(4096);
    int32_t r = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), j.at("add_generation_prompt"),
                                          buf.data(), int32_t(buf.size()));
    if (r > int32_t(buf.size())) {
      buf.resize(size_t(r));
      r = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), j.at("add_generation_prompt"), buf.data(),
                                    int32_t(buf.size()));
    }
    if (r < 0) {
      std::fprintf(stderr, "llama_chat_render: line %d: llama.cpp does not recognise the template (%d)\n", n, r);
      return 1;
    }
    std::cout << nlohmann::json(std::string(buf.data(), size_t(r))).dump() << "\n";
  }
  return 0;
}
