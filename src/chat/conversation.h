#pragma once
// A conversation as training and `ggtrain chat` see it, and the JSONL record
// shapes it comes from: chat ({"messages": [{"role", "content"}, ...]}),
// alpaca ({"instruction", "input"?, "output"}) and completion ({"prompt",
// "completion"}, or GRPO's {"prompt", "answer"}).
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ggtrain::chat {

// A function call in an assistant turn, as OpenAI's and Hugging Face's
// records give it ({"type": "function", "function": {"name", "arguments"}},
// or the function object itself).
struct ToolCall {
  std::string name;
  // JSON text with the record's member order (an object, or a string that
  // templates print as it is).
  std::string arguments;
};

struct Message {
  Message() = default;
  Message(std::string r, std::string c, std::vector<ToolCall> calls = {})
      : role(std::move(r)), content(std::move(c)), tool_calls(std::move(calls)) {}

  std::string role;  // "system", "user", "assistant" or "tool" (a tool's output)
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant turns only
};

// The messages, and the tools the record offers the model (each definition
// as JSON text, members in the record's order): templates that render tools
// print them, in a system or first user turn. A record's "tools": [] is
// kept as an empty list: Llama 3.1's template tells the model it has tools
// then, and Qwen3's does not.
struct Conversation : std::vector<Message> {
  using std::vector<Message>::vector;
  std::optional<std::vector<std::string>> tools;

  // Whether anything here needs a template that renders tools (an empty
  // list of them does not).
  bool uses_tools() const;
};

enum class RecordFormat { kChat, kAlpaca, kCompletion };

// "chat", "alpaca", "completion" (the names data.format gives them).
std::string_view record_format_name(RecordFormat f);

// The format a record has: "messages" (or ShareGPT's "conversations" of
// {"from": "system"|"human"|"gpt", "value"}) -> chat; "instruction" and "output"
// -> alpaca; "prompt" and "completion" (or "answer") -> completion. Error naming `where`
// (file:line) when it has none of these shapes.
RecordFormat detect_record_format(const nlohmann::ordered_json& record, std::string_view where);

// The record as a conversation. Alpaca: the user turn is the instruction,
// then a blank line and the input when there is one; completion: one user
// turn (the prompt) and one assistant turn. Error naming `where` and the
// member when the record lacks a member, holds a non-string, or breaks the
// rules of check_conversation(.., true).
Conversation conversation_of(const nlohmann::ordered_json& record, RecordFormat f, std::string_view where);

// A chat record's messages and tools without the rules of
// check_conversation (a prompt or a finished conversation). Chat records
// may carry "tools" (a list of definitions), assistant "tool_calls" (then
// "content" may be empty or null) and "tool" turns (a call's output).
Conversation chat_record(const nlohmann::ordered_json& record, std::string_view where);

// The members of a record (of format `f`, or a preference record) that no
// conversation takes in, so that none is dropped without a word: top-level
// ones as their name ("tools"), a message's as "messages[].NAME"
// ("messages[].reasoning_content"), each once.
std::vector<std::string> ignored_members(const nlohmann::ordered_json& record, std::optional<RecordFormat> f);

// The rules every conversation follows: roles are system, user, assistant
// and tool; at most one system message, and only first; then user and
// assistant turns alternate, from user, but that an assistant turn with
// tool calls is followed by one or more tool turns (the calls' outputs) and
// then an assistant turn; no content is empty (or only white space) but
// that of an assistant turn with calls. With `for_training`, the last turn
// is an assistant's (the answer the loss is on); else (a prompt) it is a
// user's or a tool's. Error naming `where`, the message index and the rule.
void check_conversation(const Conversation& c, bool for_training, std::string_view where);

}  // namespace ggtrain::chat
