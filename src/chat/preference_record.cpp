#include "chat/preference_record.h"

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace ggtrain::chat {

namespace {

// The prompt's messages, as a "messages" array.
nlohmann::ordered_json prompt_messages(const nlohmann::ordered_json& record, std::string_view where) {
  const bool has_prompt = record.contains("prompt"), has_messages = record.contains("messages");
  if (has_prompt == has_messages)
    fail("{}: a preference record needs exactly one of \"prompt\" and \"messages\" (the conversation before the "
         "answers)",
         where);
  const nlohmann::ordered_json& p = has_prompt ? record.at("prompt") : record.at("messages");
  if (p.is_string()) return nlohmann::ordered_json::array({{{"role", "user"}, {"content", p}}});
  if (p.is_array()) return p;
  fail("{}: member \"{}\" is {}, not a string or an array of messages", where, has_prompt ? "prompt" : "messages",
       p.type_name());
}

// An answer as one assistant message.
nlohmann::ordered_json answer_message(const nlohmann::ordered_json& record, const char* name, std::string_view where) {
  auto it = record.find(name);
  if (it == record.end()) fail("{}: no member \"{}\"", where, name);
  const nlohmann::ordered_json* a = &*it;
  if (a->is_array()) {
    if (a->size() != 1)
      fail("{}: member \"{}\" holds {} messages; it must be one assistant message", where, name, a->size());
    a = &(*a)[0];
  }
  if (a->is_string()) return {{"role", "assistant"}, {"content", *a}};
  if (!a->is_object())
    fail("{}: member \"{}\" is {}, not a string or an assistant message", where, name, a->type_name());
  if (a->value("role", std::string()) != "assistant")
    fail("{}: member \"{}\" must be an assistant message (\"role\": \"assistant\")", where, name);
  return *a;
}

Conversation with_answer(nlohmann::ordered_json messages, const nlohmann::ordered_json& answer, const char* name,
                         std::string_view where) {
  messages.push_back(answer);
  const std::string at = fmt::format("{} ({})", where, name);
  return conversation_of(nlohmann::ordered_json{{"messages", std::move(messages)}}, RecordFormat::kChat, at);
}

}  // namespace

PreferencePair preference_pair_of(const nlohmann::ordered_json& record, std::string_view where) {
  if (!record.is_object()) fail("{}: a record must be a JSON object, is {}", where, record.type_name());
  const nlohmann::ordered_json prompt = prompt_messages(record, where);
  PreferencePair p{with_answer(prompt, answer_message(record, "chosen", where), "chosen", where),
                   with_answer(prompt, answer_message(record, "rejected", where), "rejected", where)};
  if (p.chosen.back().content == p.rejected.back().content)
    fail("{}: the chosen and the rejected answer are the same text", where);
  return p;
}

}  // namespace ggtrain::chat
