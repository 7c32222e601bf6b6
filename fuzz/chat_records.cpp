// Fuzz target: instruction records (src/chat). The input is a JSONL file;
// its first byte picks the record format (chat, alpaca, completion, or
// detected). Each line is parsed, checked and turned into a conversation or
// rejected with a ggtrain::Error; every accepted conversation is rendered
// with every template, and the rendering must hold together: the spans
// concatenate to render(), the trained spans are exactly the answers (as
// the template writes them) with their end-of-turn marker, and llama.cpp's
// detection finds each template in its own Jinja string.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "chat/conversation.h"
#include "chat/template.h"
#include "fuzz_util.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

void check_rendering(const chat::Conversation& c) {
  for (const chat::TemplateInfo& t : chat::all_templates()) {
    if (chat::detect_template(t.jinja) != t.id) ggtrain_fuzz::finding("a template is not detected in its own Jinja");
    const auto spans = chat::render_spans(t.id, c, false);
    std::string all, trained;
    for (const chat::Span& s : spans) {
      all += s.text;
      if (s.trained) trained += s.text;
    }
    if (all != chat::render(t.id, c, false)) ggtrain_fuzz::finding("spans do not concatenate to render()");
    std::string answers;
    for (const chat::Message& m : c) {
      if (m.role != "assistant") continue;
      const bool trims = t.id == chat::Template::kLlama3 || t.id == chat::Template::kGemma;
      answers += (t.id == chat::Template::kMistral ? " " : "") + (trims ? chat::trim(m.content) : m.content) +
                 std::string(t.end_of_turn);
    }
    if (trained != answers) ggtrain_fuzz::finding("trained spans are not the answers and their end markers");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const std::string line(text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string where = "fuzz:" + std::to_string(++line_no);
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) continue;
    try {
      const chat::RecordFormat f = mode < 3 ? chat::RecordFormat(mode) : chat::detect_record_format(record, where);
      const chat::Conversation c = chat::conversation_of(record, f, where);
      check_rendering(c);
      ggtrain_fuzz::sink(c.size());
    } catch (const Error&) {
    }
  }
  return 0;
}
