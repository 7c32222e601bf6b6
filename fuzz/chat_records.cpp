// Fuzz target: instruction records (src/chat). The input is a JSONL file;
// its first byte picks the record format (chat, alpaca, completion, or
// detected). Each line is parsed, checked and turned into a conversation or
// rejected with a ggtrain::Error; every accepted conversation is rendered
// with every template, and the rendering must hold together: the spans
// concatenate to render(), the trained spans are exactly the answers (as
// the template writes them: trimmed, or with Qwen3's or Qwen3.5's reasoning
// split off)
// with their end-of-turn marker, and each template is detected in its own
// Jinja string.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <string_view>

#include "chat/conversation.h"
#include "chat/template.h"
#include "fuzz_util.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

// Python's str methods, as the templates' Jinja uses them.
std::string_view lstrip_nl(std::string_view s) { return s.substr(std::min(s.size(), s.find_first_not_of('\n'))); }
std::string_view rstrip_nl(std::string_view s) { return s.substr(0, s.find_last_not_of('\n') + 1); }
std::string_view before_first(std::string_view s, std::string_view sep) { return s.substr(0, s.find(sep)); }
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// Qwen3's template, transcribed: an answer holding "</think>" splits into its
// reasoning and its reply; the reasoning is written (in a <think> block,
// empty for the last answer when it has none) only after the last user query
// that is not a lone tool response.
std::string qwen3_answer(const chat::Conversation& c, size_t i) {
  std::string_view content = c[i].content, reasoning;
  if (content.find("</think>") != std::string_view::npos) {
    reasoning = lstrip_nl(after_last(rstrip_nl(before_first(content, "</think>")), "<think>"));
    content = lstrip_nl(after_last(content, "</think>"));
  }
  size_t last_query = c.size() - 1;
  for (size_t j = c.size(); j-- > 0;) {
    const std::string& q = c[j].content;
    if (c[j].role == "user" && !(q.starts_with("<tool_response>") && q.ends_with("</tool_response>"))) {
      last_query = j;
      break;
    }
  }
  if (i > last_query && (i + 1 == c.size() || !reasoning.empty()))
    return "<think>\n" + std::string(rstrip_nl(lstrip_nl(reasoning))) + "\n</think>\n\n" +
           std::string(lstrip_nl(content));
  return std::string(content);
}

// Qwen3.5's template, transcribed: every message trimmed, the reasoning
// split off as Qwen3's, and written (trimmed, in a <think> block) on every
// answer after the last question.
std::string qwen35_answer(const chat::Conversation& c, size_t i) {
  std::string content = chat::trim(c[i].content), reasoning;
  if (content.find("</think>") != std::string::npos) {
    reasoning = chat::trim(lstrip_nl(after_last(rstrip_nl(before_first(content, "</think>")), "<think>")));
    content = std::string(lstrip_nl(after_last(content, "</think>")));
  }
  size_t last_query = c.size();
  for (size_t j = c.size(); j-- > 0 && last_query == c.size();) {
    const std::string q = chat::trim(c[j].content);
    if (c[j].role == "user" && !(q.starts_with("<tool_response>") && q.ends_with("</tool_response>"))) last_query = j;
  }
  return i > last_query ? "<think>\n" + reasoning + "\n</think>\n\n" + content : content;
}

// LFM2.5's answers: all but the last reduced to their text after the last
// "</think>", trimmed.
std::string lfm25_answer(const chat::Conversation& c, size_t i) {
  size_t last = i;
  for (size_t j = i + 1; j < c.size(); ++j)
    if (c[j].role == "assistant") last = j;
  const std::string& content = c[i].content;
  if (last == i || content.find("</think>") == std::string::npos) return content;
  return chat::trim(after_last(content, "</think>"));
}

// Answer i of c as template t writes it (before its end-of-turn marker).
std::string answer_as_written(chat::Template t, const chat::Conversation& c, size_t i) {
  switch (t) {
    case chat::Template::kLlama3:
    case chat::Template::kLlama31:
    case chat::Template::kGemma:
    case chat::Template::kGemma3: return chat::trim(c[i].content);
    case chat::Template::kMistral: return " " + c[i].content;
    case chat::Template::kQwen3: return qwen3_answer(c, i);
    case chat::Template::kQwen35: return qwen35_answer(c, i);
    case chat::Template::kLfm25: return lfm25_answer(c, i);
    case chat::Template::kSmolLm3: {  // without its leading newlines
      const std::string& s = c[i].content;
      return s.substr(std::min(s.size(), s.find_first_not_of('\n')));
    }
    default: return c[i].content;
  }
}

// Conversations with tools are left to llama_cpp_chat_check, which renders
// them with the real templates; most templates refuse them.
void check_rendering(const chat::Conversation& c) {
  if (c.uses_tools()) return;
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
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].role == "assistant") answers += answer_as_written(t.id, c, i) + std::string(t.end_of_turn);
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
