#include "chat/reasoning_filter.h"

namespace ggtrain::chat {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// How many characters at the end of `s` begin `marker` (a marker that may
// be completed by the next piece).
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string ReasoningFilter::feed(std::string_view piece) {
  held_ += piece;
  std::string out;
  for (;;) {
    if (state_ == State::kVisible) {
      const size_t open = held_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_marker(held_, kOpen);
        out += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      out += held_.substr(0, open);
      held_.erase(0, open + kOpen.size());
      state_ = State::kReasoning;
    } else if (state_ == State::kReasoning) {
      const size_t close = held_.find(kClose);
      if (close == std::string::npos) {
        held_.erase(0, held_.size() - partial_marker(held_, kClose));
        return out;
      }
      held_.erase(0, close + kClose.size());
      state_ = State::kAfterReasoning;
    } else {  // the blank lines after the block
      const size_t text = held_.find_first_not_of("\n\r ");
      if (text == std::string::npos) {
        held_.clear();
        return out;
      }
      held_.erase(0, text);
      state_ = State::kVisible;
    }
  }
}

std::string ReasoningFilter::flush() {
  std::string out = state_ == State::kVisible ? held_ : "";
  held_.clear();
  state_ = State::kVisible;
  return out;
}

}  // namespace ggtrain::chat
