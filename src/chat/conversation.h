#pragma once
// A conversation as training and `ggtrain chat` see it, and the JSONL record
// shapes it comes from: chat ({"messages": [{"role", "content"}, ...]}),
// alpaca ({"instruction", "input"?, "output"}) and completion ({"prompt",
// "completion"}, or GRPO's {"prompt", "answer"}).
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::chat {

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};
using Conversation = std::vector<Message>;

enum class RecordFormat { kChat, kAlpaca, kCompletion };

// "chat", "alpaca", "completion" (the names data.format gives them).
std::string_view record_format_name(RecordFormat f);

// The format a record has: "messages" (or ShareGPT's "conversations" of
// {"from": "system"|"human"|"gpt", "value"}) -> chat; "instruction" and "output"
// -> alpaca; "prompt" and "completion" (or "answer") -> completion. Error naming `where`
// (file:line) when it has none of these shapes.
RecordFormat detect_record_format(const nlohmann::json& record, std::string_view where);

// The record as a conversation. Alpaca: the user turn is the instruction,
// then a blank line and the input when there is one; completion: one user
// turn (the prompt) and one assistant turn. Error naming `where` and the
// member when the record lacks a member, holds a non-string, or breaks the
// rules of check_conversation(.., true).
Conversation conversation_of(const nlohmann::json& record, RecordFormat f, std::string_view where);

// The members of a record (of format `f`, or a preference record) that no
// conversation takes in, so that none is dropped without a word: top-level
// ones as their name ("tools"), a message's as "messages[].NAME"
// ("messages[].reasoning_content"), each once.
std::vector<std::string> ignored_members(const nlohmann::json& record, std::optional<RecordFormat> f);

// The rules every conversation follows: roles are system, user and
// assistant; at most one system message, and only first; then user and
// assistant turns alternate, from user; no content is empty (or only
// white space). With `for_training`, the last turn is an assistant's (the
// answer the loss is on); else (a prompt) it is a user's. Error naming
// `where`, the message index and the rule.
void check_conversation(const Conversation& c, bool for_training, std::string_view where);

}  // namespace ggtrain::chat
