#include "chat/chat_tokens.h"

#include "util/error.h"

namespace ggtrain::chat {

namespace {

bool is_special(const tokenizer::Tokenizer& tok, int32_t id) {
  const int32_t t = tok.token_type(id);
  return t == tokenizer::kControl || t == tokenizer::kUserDefined || t == tokenizer::kUnknown;
}

}  // namespace

EncodedExample encode_spans(const tokenizer::Tokenizer& tok, const std::vector<Span>& spans) {
  EncodedExample e;
  if (tok.add_bos()) {
    e.ids.push_back(tok.bos_id());
    e.trained.push_back(0);
  }
  bool after_text = false;
  for (const Span& s : spans) {
    const std::vector<int32_t> ids =
        tok.encode(s.text, tokenizer::EncodeOptions{.parse_special = true, .continuation = after_text});
    e.ids.insert(e.ids.end(), ids.begin(), ids.end());
    e.trained.insert(e.trained.end(), ids.size(), s.trained ? 1 : 0);
    if (!ids.empty()) after_text = !is_special(tok, ids.back());
  }
  return e;
}

std::vector<std::string> missing_markers(const tokenizer::Tokenizer& tok, Template t) {
  std::vector<std::string> missing;
  for (std::string_view m : template_info(t).markers) {
    const int32_t id = tok.token_id(m);
    if (id < 0) {
      missing.emplace_back(m);
      continue;
    }
    if (!is_special(tok, id))
      fail("chat template {}: '{}' is token {} of the vocabulary, but a normal one: text would not turn into it",
           template_info(t).name, m, id);
  }
  return missing;
}

int32_t end_of_turn_id(const tokenizer::Tokenizer& tok, Template t) {
  const std::string_view m = template_info(t).end_of_turn;
  const int32_t id = tok.token_id(m);
  if (id < 0) fail("chat template {}: the vocabulary has no token '{}'", template_info(t).name, m);
  return id;
}

}  // namespace ggtrain::chat
