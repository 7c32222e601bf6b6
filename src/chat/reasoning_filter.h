#pragma once
// What a chat shows of a reply that streams: its reasoning block
// ("<think>...</think>", and the blank lines after it, as Qwen3 writes even
// an empty one) left out, as llama.cpp's chat leaves it out; the history
// keeps the reply whole, so the model is fed what it wrote.
#include <string>
#include <string_view>

namespace ggtrain::chat {

class ReasoningFilter {
 public:
  // in_reasoning: the prompt already opened the block (Qwen3.5's generation
  // prompt ends with "<think>\n"), so the reply starts inside it.
  explicit ReasoningFilter(bool in_reasoning = false) : state_(in_reasoning ? State::kReasoning : State::kVisible) {}
  // The visible part of the next piece (possibly empty: text that may start
  // a marker is held until the next piece says).
  std::string feed(std::string_view piece);
  // What is held at the end of the reply.
  std::string flush();

 private:
  enum class State { kVisible, kReasoning, kAfterReasoning };
  State state_;
  std::string held_;
};

}  // namespace ggtrain::chat
