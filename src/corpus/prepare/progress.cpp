#include "corpus/prepare/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "util/clock.h"

namespace ggtrain::corpus {

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

ProgressLine::ProgressLine(std::string what, uint64_t total_bytes, bool quiet)
    : what_(std::move(what)), total_(total_bytes), quiet_(quiet), tty_(::isatty(2) == 1), start_(now_seconds()) {}

std::string ProgressLine::text(uint64_t bytes, int64_t documents, int64_t tokens) const {
  const double dt = std::max(1e-9, now_seconds() - start_);
  const double rate = double(bytes) / dt;
  const double pct = total_ > 0 ? 100.0 * double(bytes) / double(total_) : 100.0;
  const double left = rate > 0 && total_ > bytes ? double(total_ - bytes) / rate : 0;
  return fmt::format("{}: {:.1f}/{:.1f} MB ({:.0f}%), {} documents, {} tokens, {:.1f} MB/s, ETA {}m{:02}s", what_,
                     double(bytes) / 1e6, double(total_) / 1e6, pct, human_count(double(documents)),
                     human_count(double(tokens)), rate / 1e6, int64_t(left) / 60, int64_t(left) % 60);
}

void ProgressLine::update(uint64_t bytes, int64_t documents, int64_t tokens) {
  if (quiet_) return;
  const double t = now_seconds();
  if (t - last_ < (tty_ ? 0.25 : 30.0)) return;
  last_ = t;
  const std::string line = text(bytes, documents, tokens);
  if (tty_) fmt::print(stderr, "\r{}\033[K", line);
  else fmt::print(stderr, "{}\n", line);
}

void ProgressLine::finish(uint64_t bytes, int64_t documents, int64_t tokens) {
  if (quiet_) return;
  fmt::print(stderr, "{}{}, {:.1f} s{}\n", tty_ ? "\r" : "", text(bytes, documents, tokens), now_seconds() - start_,
             tty_ ? "\033[K" : "");
}

}  // namespace ggtrain::corpus
