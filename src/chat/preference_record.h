#pragma once
// Preference records (data.format = "preference"), with TRL's field names:
//   {"prompt": "...", "chosen": "...", "rejected": "..."}
//   {"prompt": [messages], "chosen": [{"role": "assistant", ...}], "rejected": [...]}
//   {"messages": [messages], "chosen": {"role": "assistant", ...}, "rejected": {...}}
// The prompt (a string is one user turn; messages end with a user turn) is
// followed by the chosen answer in one conversation and by the rejected
// answer in the other; an answer is a string, an assistant message, or a
// list holding one.
#include <nlohmann/json_fwd.hpp>

#include <string_view>

#include "chat/conversation.h"

namespace ggtrain::chat {

struct PreferencePair {
  Conversation chosen, rejected;
};

// Error naming `where` (file:line) and the member when the record has
// another shape or breaks check_conversation's rules.
PreferencePair preference_pair_of(const nlohmann::ordered_json& record, std::string_view where);

}  // namespace ggtrain::chat
