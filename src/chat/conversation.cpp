#include "chat/conversation.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat/template.h"
#include "util/error.h"

namespace ggtrain::chat {

namespace {

const nlohmann::json* member(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string string_member(const nlohmann::json& o, const char* name, std::string_view where) {
  const nlohmann::json* v = member(o, name);
  if (!v) fail("{}: no member \"{}\"", where, name);
  if (!v->is_string()) fail("{}: member \"{}\" is {}, not a string", where, name, v->type_name());
  return v->get<std::string>();
}

// ShareGPT's speakers ("from") as chat roles; "" for one it does not have.
std::string sharegpt_role(const std::string& from) {
  if (from == "human" || from == "user") return "user";
  if (from == "gpt" || from == "assistant" || from == "model") return "assistant";
  if (from == "system") return "system";
  return "";
}

// A message of a "messages" list ({"role", "content"}) or of ShareGPT's
// "conversations" list ({"from", "value"}).
Message message_of(const nlohmann::json& m, bool sharegpt, const std::string& at) {
  if (!sharegpt) return {string_member(m, "role", at), string_member(m, "content", at)};
  const std::string from = string_member(m, "from", at);
  const std::string role = sharegpt_role(from);
  if (role.empty())
    fail("{}: \"from\" is \"{}\"; ShareGPT turns are from system, human or gpt (tool turns are not supported yet)", at,
         from);
  return {role, string_member(m, "value", at)};
}

Conversation chat_record(const nlohmann::json& record, std::string_view where) {
  const bool sharegpt = !member(record, "messages") && member(record, "conversations");
  const char* list = sharegpt ? "conversations" : "messages";
  const nlohmann::json* msgs = member(record, list);
  if (!msgs || !msgs->is_array()) fail("{}: member \"{}\" must be an array of messages", where, list);
  Conversation c;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const nlohmann::json& m = (*msgs)[i];
    const std::string at = fmt::format("{}: {}[{}]", where, list, i);
    if (!m.is_object()) fail("{} is {}, not an object", at, m.type_name());
    // Silently dropping the calls would train the answer without them.
    if (member(m, "tool_calls"))
      fail("{} has \"tool_calls\": tool calls are not supported yet (only system, user and assistant turns with "
           "text content); leave such records out",
           at);
    c.push_back(message_of(m, sharegpt, at));
  }
  return c;
}

}  // namespace

std::string_view record_format_name(RecordFormat f) {
  switch (f) {
    case RecordFormat::kChat: return "chat";
    case RecordFormat::kAlpaca: return "alpaca";
    case RecordFormat::kCompletion: return "completion";
  }
  return "?";
}

RecordFormat detect_record_format(const nlohmann::json& record, std::string_view where) {
  if (!record.is_object()) fail("{}: a record must be a JSON object, is {}", where, record.type_name());
  if (record.contains("messages") || record.contains("conversations")) return RecordFormat::kChat;
  if (record.contains("instruction") && record.contains("output")) return RecordFormat::kAlpaca;
  if (record.contains("prompt") && (record.contains("completion") || record.contains("answer")))
    return RecordFormat::kCompletion;
  fail("{}: not a chat record (\"messages\", or ShareGPT's \"conversations\"), an alpaca one (\"instruction\", "
       "\"output\") or a completion one "
       "(\"prompt\", \"completion\" or GRPO's \"answer\")",
       where);
}

Conversation conversation_of(const nlohmann::json& record, RecordFormat f, std::string_view where) {
  if (!record.is_object()) fail("{}: a record must be a JSON object, is {}", where, record.type_name());
  Conversation c;
  switch (f) {
    case RecordFormat::kChat: c = chat_record(record, where); break;
    case RecordFormat::kAlpaca: {
      std::string user = string_member(record, "instruction", where);
      if (member(record, "input")) {
        const std::string input = string_member(record, "input", where);
        if (!trim(input).empty()) user += "\n\n" + input;
      }
      c = {{"user", user}, {"assistant", string_member(record, "output", where)}};
      break;
    }
    case RecordFormat::kCompletion:
      // GRPO's prompt files name the reply "answer" (what a reward checks).
      c = {{"user", string_member(record, "prompt", where)},
           {"assistant", string_member(record, record.contains("completion") ? "completion" : "answer", where)}};
      break;
  }
  check_conversation(c, true, where);
  return c;
}

std::vector<std::string> ignored_members(const nlohmann::json& record, std::optional<RecordFormat> f) {
  std::vector<std::string> out;
  if (!record.is_object()) return out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  // What each shape reads; a preference record (no format) reads its prompt
  // or messages and two answers.
  const bool sharegpt = f == RecordFormat::kChat && !record.contains("messages") && record.contains("conversations");
  std::vector<std::string_view> read;
  if (!f) read = {"prompt", "messages", "chosen", "rejected"};
  else if (*f == RecordFormat::kChat) read = {sharegpt ? "conversations" : "messages"};
  else if (*f == RecordFormat::kAlpaca) read = {"instruction", "input", "output"};
  else read = {"prompt", record.contains("completion") ? "completion" : "answer"};
  for (const auto& [name, value] : record.items())
    if (std::find(read.begin(), read.end(), name) == read.end()) add(name);
  // A message's members beyond its speaker and text (a reasoning trace, a
  // name): in a chat list, or the prompt's messages and the answers of a
  // preference record.
  const std::vector<std::string_view> message_reads =
      sharegpt ? std::vector<std::string_view>{"from", "value"} : std::vector<std::string_view>{"role", "content"};
  auto check_message = [&](const nlohmann::json& m, std::string_view list) {
    if (!m.is_object()) return;
    for (const auto& [name, value] : m.items())
      if (std::find(message_reads.begin(), message_reads.end(), name) == message_reads.end())
        add(fmt::format("{}[].{}", list, name));
  };
  if (f && *f != RecordFormat::kChat) return out;
  for (const char* list : {"messages", "conversations", "chosen", "rejected"}) {
    if (!record.contains(list) || (f && std::string_view(list) != (sharegpt ? "conversations" : "messages"))) continue;
    const nlohmann::json& v = record.at(list);
    if (v.is_array())
      for (const auto& m : v) check_message(m, list);
    else check_message(v, list);
  }
  return out;
}

void check_conversation(const Conversation& c, bool for_training, std::string_view where) {
  if (c.empty()) fail("{}: the conversation has no messages", where);
  size_t first_turn = 0;
  if (c[0].role == "system") first_turn = 1;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string& role = c[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      fail("{}: message {} has role \"{}\" (system, user or assistant)", where, i, role);
    if (role == "system" && i > 0) fail("{}: message {} is a system message; only the first may be one", where, i);
    if (i >= first_turn) {
      const char* expected = (i - first_turn) % 2 == 0 ? "user" : "assistant";
      if (role != expected)
        fail("{}: message {} is a{} {} turn where a{} {} turn belongs (turns alternate from user)", where, i,
             role == "assistant" ? "n" : "", role, expected[0] == 'a' ? "n" : "", expected);
    }
    if (trim(c[i].content).empty()) fail("{}: message {} ({}) has empty content", where, i, role);
  }
  const std::string& last = c.back().role;
  if (for_training && last != "assistant")
    fail("{}: the conversation ends without an assistant turn (nothing to learn from)", where);
  if (!for_training && last != "user") fail("{}: the conversation must end with a user turn", where);
}

}  // namespace ggtrain::chat
