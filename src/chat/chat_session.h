#pragma once
// A conversation with a model, turn by turn, as `ggtrain chat` holds it: the
// history rendered with the model's template and tokenized as llama.cpp
// tokenizes it (parse_special), the reply generated until an end-of-turn
// (or end-of-text) token, the cache keeping whatever prefix the next
// prompt shares with the last one, and the oldest turns dropped when the
// context would overflow.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chat/template.h"
#include "infer/decoder.h"
#include "infer/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::chat {

struct Reply {
  std::vector<int32_t> prompt;  // the whole conversation's ids the reply continued
  std::string text;  // the assistant's turn as it goes into the history
  std::vector<int32_t> tokens;  // generated, the end-of-turn token included when it came
  bool stopped = false;  // ended on an end-of-turn / end-of-text token
  bool cancelled = false;
  bool context_full = false;  // cut because the context had no room left
  int64_t dropped_turns = 0;  // user+assistant pairs dropped to make room for this one
  int64_t reused_tokens = 0;  // of `prompt`, already in the decoder's cache (not computed again)
};

class ChatSession {
 public:
  // `system`: a system message ("" for none).
  ChatSession(infer::Decoder& dec, const tokenizer::Tokenizer& tok, Template t, std::string system);

  // Answers `user`, with room for n_predict tokens (at most what the
  // context leaves; -1: all it leaves); on_piece sees the reply's text as
  // it streams.
  Reply reply(const std::string& user, int64_t n_predict, const infer::SamplerConfig& sampler, uint64_t seed,
              const std::function<void(const std::string&)>& on_piece = {},
              const std::function<bool()>& cancelled = {});
  // Starts a new conversation (the system message stays).
  void clear();
  const Conversation& history() const { return history_; }
  // Whether each reply starts inside a reasoning block its prompt opened.
  bool replies_start_reasoning() const { return prompt_opens_reasoning(template_); }
  int64_t context_size() const;
  // The ids that end a reply: the template's end of turn, and EOS.
  const std::vector<int32_t>& stop_tokens() const { return stop_; }

 private:
  std::vector<int32_t> prompt_ids(const Conversation& c) const;

  infer::Decoder& dec_;
  const tokenizer::Tokenizer& tok_;
  Template template_;
  Conversation history_;  // the system message (if any), then complete turns
  std::vector<int32_t> stop_;
};

// The template a model's GGUF asks for: `name` when given, else the one
// llama.cpp recognises in its tokenizer.chat_template, else chatml (with a
// warning into *warning).
Template template_for_model(const tokenizer::Tokenizer& tok, const std::string& name, std::string* warning);

}  // namespace ggtrain::chat
