#include "corpus/prepare/window_packer.h"

#include <algorithm>

#include "corpus/batch_loader.h"

namespace ggtrain::corpus {

namespace {

constexpr size_t kOpenWindows = 64;

bool any_trained(const std::vector<uint8_t>& t, size_t from, size_t to) {
  for (size_t i = from + 1; i < to; ++i)  // the first token of a piece is never a target within it
    if (t[i]) return true;
  return false;
}

// The example's pieces of at most seq_len tokens as the overflow rule says
// (none: skipped); each piece must hold a trained target.
std::vector<std::pair<size_t, size_t>> pieces_of(const Example& e, const WindowPacking& p, PackCounts& c) {
  const size_t n = e.ids.size(), w = size_t(p.seq_len);
  std::vector<std::pair<size_t, size_t>> out;
  if (n <= w) {
    out.emplace_back(0, n);
  } else if (p.overflow == Overflow::kTruncate) {
    out.emplace_back(0, w);
    ++c.truncated;
  } else if (p.overflow == Overflow::kSplit) {
    for (size_t b = 0; b < n; b += w) out.emplace_back(b, std::min(n, b + w));
    ++c.split;
  } else {
    ++c.too_long_skipped;
    return {};
  }
  std::erase_if(out, [&](const auto& piece) { return !any_trained(e.trained, piece.first, piece.second); });
  if (out.empty()) ++c.too_long_skipped;
  return out;
}

}  // namespace

PackCounts& PackCounts::operator+=(const PackCounts& o) {
  examples += o.examples;
  val_examples += o.val_examples;
  bad_skipped += o.bad_skipped;
  too_long_skipped += o.too_long_skipped;
  truncated += o.truncated;
  split += o.split;
  train_windows += o.train_windows;
  val_windows += o.val_windows;
  tokens += o.tokens;
  trained_tokens += o.trained_tokens;
  padding += o.padding;
  return *this;
}

WindowPacker::WindowPacker(TokenFileWriter& tokens, TokenFileWriter& flags, WindowPacking packing, int32_t pad)
    : tokens_(tokens), flags_(flags), packing_(packing), pad_(pad) {}

bool WindowPacker::add(const std::vector<Example>& examples, PackCounts& c) {
  if (examples.size() > 1) {
    size_t n = 0;
    std::vector<const Example*> all;
    for (const Example& e : examples) {
      n += e.ids.size();
      all.push_back(&e);
    }
    if (n > size_t(packing_.seq_len)) {
      ++c.too_long_skipped;
      return false;
    }
    add_together(all, n, c);
    return true;
  }
  if (examples.empty()) return false;
  const Example& e = examples[0];
  const auto pieces = pieces_of(e, packing_, c);
  for (const auto& [b, end] : pieces) {
    Example piece{{e.ids.begin() + long(b), e.ids.begin() + long(end)},
                  {e.trained.begin() + long(b), e.trained.begin() + long(end)}};
    add_together({&piece}, piece.ids.size(), c);
  }
  return !pieces.empty();
}

void WindowPacker::add_together(const std::vector<const Example*>& examples, size_t n, PackCounts& c) {
  Window& w = window_with_room(n, c);
  for (const Example* e : examples) {
    for (size_t i = 0; i < e->ids.size(); ++i) {
      w.ids.push_back(e->ids[i]);
      w.flags.push_back((i == 0 ? kFlagExampleStart : 0) | (e->trained[i] ? kFlagTrained : 0));
      c.trained_tokens += e->trained[i];
    }
  }
  c.tokens += int64_t(n);
}

int64_t WindowPacker::flush(PackCounts& c) {
  for (Window& w : open_) write(w, c);
  open_.clear();
  return windows_;
}

WindowPacker::Window& WindowPacker::window_with_room(size_t n, PackCounts& c) {
  Window* best = nullptr;
  for (Window& w : open_)
    if (room(w) >= n && (!best || room(w) < room(*best))) best = &w;
  if (best) return *best;
  if (open_.size() == kOpenWindows) {
    auto fullest = std::min_element(open_.begin(), open_.end(),
                                    [&](const Window& a, const Window& b) { return room(a) < room(b); });
    write(*fullest, c);
    open_.erase(fullest);
  }
  return open_.emplace_back();
}

void WindowPacker::write(Window& w, PackCounts& c) {
  for (bool first = true; w.ids.size() < size_t(packing_.seq_len); first = false) {
    w.ids.push_back(pad_);
    w.flags.push_back(first ? kFlagExampleStart : 0);
    ++c.padding;
  }
  tokens_.append(w.ids.data(), w.ids.size());
  flags_.append(w.flags.data(), w.flags.size());
  ++windows_;
}

void end_packed_stream(TokenFileWriter& tokens, TokenFileWriter& flags, int32_t pad) {
  const int32_t start = kFlagExampleStart;
  tokens.append(&pad, 1);
  flags.append(&start, 1);
}

}  // namespace ggtrain::corpus
