#include "chat/conversation.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat/template.h"
#include "util/error.h"

namespace ggtrain::chat {

namespace {

using Json = nlohmann::ordered_json;

const Json* member(const Json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string string_member(const Json& o, const char* name, std::string_view where) {
  const Json* v = member(o, name);
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

// JSON text with the record's member order.
std::string json_text(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::strict); }

// An assistant's "tool_calls": each {"type": "function", "function": {"name",
// "arguments"}} or the function object itself.
std::vector<ToolCall> tool_calls_of(const Json& calls, const std::string& at) {
  if (!calls.is_array()) fail("{}: \"tool_calls\" is {}, not an array of calls", at, calls.type_name());
  std::vector<ToolCall> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string call_at = fmt::format("{}.tool_calls[{}]", at, k);
    if (!calls[k].is_object()) fail("{} is {}, not an object", call_at, calls[k].type_name());
    const Json* f = member(calls[k], "function");
    if (f && !f->is_object()) fail("{}: \"function\" is {}, not an object", call_at, f->type_name());
    const Json& fn = f ? *f : calls[k];
    const std::string name = string_member(fn, "name", call_at);
    if (trim(name).empty()) fail("{}: the function's \"name\" is empty", call_at);
    const Json* args = member(fn, "arguments");
    if (!args) fail("{}: no member \"arguments\" (give {{}} for a call without arguments)", call_at);
    out.push_back({name, json_text(*args)});
  }
  return out;
}

// A message of a "messages" list ({"role", "content"}, an assistant's
// "tool_calls") or of ShareGPT's "conversations" list ({"from", "value"}).
Message message_of(const Json& m, bool sharegpt, const std::string& at) {
  if (!sharegpt) {
    Message msg{string_member(m, "role", at), {}, {}};
    if (const Json* calls = member(m, "tool_calls")) {
      if (msg.role != "assistant") fail("{}: only an assistant turn may have \"tool_calls\"", at);
      msg.tool_calls = tool_calls_of(*calls, at);
      if (msg.tool_calls.empty()) fail("{}: \"tool_calls\" is empty", at);
    }
    // A turn that only calls tools often has "content": null.
    if (msg.tool_calls.empty() || member(m, "content")) msg.content = string_member(m, "content", at);
    return msg;
  }
  const std::string from = string_member(m, "from", at);
  const std::string role = sharegpt_role(from);
  if (role.empty())
    fail("{}: \"from\" is \"{}\"; ShareGPT turns are from system, human or gpt (for tool calls give \"messages\" "
         "in OpenAI's shape)",
         at, from);
  return {role, string_member(m, "value", at), {}};
}

}  // namespace

bool Conversation::uses_tools() const {
  return (tools && !tools->empty()) ||
         std::any_of(begin(), end(), [](const Message& m) { return m.role == "tool" || !m.tool_calls.empty(); });
}

Conversation chat_record(const Json& record, std::string_view where) {
  const bool sharegpt = !member(record, "messages") && member(record, "conversations");
  const char* list = sharegpt ? "conversations" : "messages";
  const Json* msgs = member(record, list);
  if (!msgs || !msgs->is_array()) fail("{}: member \"{}\" must be an array of messages", where, list);
  Conversation c;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string at = fmt::format("{}: {}[{}]", where, list, i);
    if (!m.is_object()) fail("{} is {}, not an object", at, m.type_name());
    c.push_back(message_of(m, sharegpt, at));
  }
  if (const Json* tools = member(record, "tools")) {
    if (!tools->is_array())
      fail("{}: member \"tools\" is {}, not an array of tool definitions", where, tools->type_name());
    c.tools.emplace();
    for (size_t k = 0; k < tools->size(); ++k) {
      if (!(*tools)[k].is_object())
        fail("{}: tools[{}] is {}, not an object (a tool definition)", where, k, (*tools)[k].type_name());
      c.tools->push_back(json_text((*tools)[k]));
    }
  }
  return c;
}

std::string_view record_format_name(RecordFormat f) {
  switch (f) {
    case RecordFormat::kChat: return "chat";
    case RecordFormat::kAlpaca: return "alpaca";
    case RecordFormat::kCompletion: return "completion";
  }
  return "?";
}

RecordFormat detect_record_format(const Json& record, std::string_view where) {
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

Conversation conversation_of(const Json& record, RecordFormat f, std::string_view where) {
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

std::vector<std::string> ignored_members(const Json& record, std::optional<RecordFormat> f) {
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
  else if (*f == RecordFormat::kChat) read = {sharegpt ? "conversations" : "messages", "tools"};
  else if (*f == RecordFormat::kAlpaca) read = {"instruction", "input", "output"};
  else read = {"prompt", record.contains("completion") ? "completion" : "answer"};
  for (const auto& [name, value] : record.items())
    if (std::find(read.begin(), read.end(), name) == read.end()) add(name);
  // A message's members beyond its speaker and text (a reasoning trace, a
  // name): in a chat list, or the prompt's messages and the answers of a
  // preference record.
  const std::vector<std::string_view> message_reads =
      sharegpt ? std::vector<std::string_view>{"from", "value"}
               : std::vector<std::string_view>{"role", "content", "tool_calls"};
  auto check_message = [&](const Json& m, std::string_view list) {
    if (!m.is_object()) return;
    for (const auto& [name, value] : m.items())
      if (std::find(message_reads.begin(), message_reads.end(), name) == message_reads.end())
        add(fmt::format("{}[].{}", list, name));
  };
  if (f && *f != RecordFormat::kChat) return out;
  for (const char* list : {"messages", "conversations", "chosen", "rejected"}) {
    if (!record.contains(list) || (f && std::string_view(list) != (sharegpt ? "conversations" : "messages"))) continue;
    const Json& v = record.at(list);
    if (v.is_array())
      for (const auto& m : v) check_message(m, list);
    else check_message(v, list);
  }
  return out;
}

void check_conversation(const Conversation& c, bool for_training, std::string_view where) {
  if (c.empty()) fail("{}: the conversation has no messages", where);
  const size_t first_turn = c[0].role == "system" ? 1 : 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const Message& m = c[i];
    const std::string& role = m.role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      fail("{}: message {} has role \"{}\" (system, user, assistant or tool)", where, i, role);
    if (role == "tool" && i == 0) fail("{}: message 0 is a tool turn; a tool's output follows a call", where);
    if (role == "system" && i > 0) fail("{}: message {} is a system message; only the first may be one", where, i);
    if (i >= first_turn) {
      const Message* prev = i > first_turn ? &c[i - 1] : nullptr;
      if (prev && !prev->tool_calls.empty()) {
        if (role != "tool")
          fail("{}: message {} is a{} {} turn where the output of message {}'s tool calls (a tool turn) belongs", where,
               i, role == "assistant" ? "n" : "", role, i - 1);
      } else if (prev && prev->role == "tool") {
        if (role != "tool" && role != "assistant")
          fail("{}: message {} is a {} turn where another tool output or an assistant turn belongs", where, i, role);
      } else {
        const char* expected = (!prev || prev->role == "assistant") ? "user" : "assistant";
        if (role != expected)
          fail("{}: message {} is a{} {} turn where a{} {} turn belongs (turns alternate from user{})", where, i,
               role == "assistant" ? "n" : "", role, expected[0] == 'a' ? "n" : "", expected,
               role == "tool" ? "; a tool turn follows an assistant turn with tool calls" : "");
      }
    }
    if (trim(m.content).empty() && m.tool_calls.empty()) fail("{}: message {} ({}) has empty content", where, i, role);
  }
  const std::string& last = c.back().role;
  if (for_training && last != "assistant")
    fail("{}: the conversation ends without an assistant turn (nothing to learn from)", where);
  if (!for_training && last != "user" && last != "tool")
    fail("{}: the conversation must end with a user turn (or a tool's output)", where);
}

}  // namespace ggtrain::chat
