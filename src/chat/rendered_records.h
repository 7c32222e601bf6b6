#pragma once
// Chat JSONL as one token stream: each record (chat, alpaca or completion,
// chat/conversation.h) rendered by a chat template whole, as training
// renders it (chat/chat_tokens.h: BOS when the vocabulary adds one, markers
// as their control tokens), one after another. What a model sees of
// conversations, for text-only consumers such as `ggtrain imatrix`
// (calibrating on the chat data a model will serve).
#include <cstdint>
#include <string>
#include <vector>

#include "chat/template.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::chat {

// Error naming FILE:LINE for a record that is not JSON, has no known shape
// or breaks check_conversation's rules; and naming FILE when it holds no records.
std::vector<int32_t> rendered_record_tokens(const std::string& path, const tokenizer::Tokenizer& tok, Template t);

}  // namespace ggtrain::chat
