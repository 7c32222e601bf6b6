#pragma once
// The progress line of a long preparation: bytes read of the total,
// documents, tokens, MB/s and the time left. On a terminal it redraws one
// line; elsewhere (a log file) it prints a line every 30 s.
#include <cstdint>
#include <string>

namespace ggtrain::corpus {

class ProgressLine {
 public:
  ProgressLine(std::string what, uint64_t total_bytes, bool quiet);
  void update(uint64_t bytes, int64_t documents, int64_t tokens);
  void finish(uint64_t bytes, int64_t documents, int64_t tokens);

 private:
  std::string text(uint64_t bytes, int64_t documents, int64_t tokens) const;
  std::string what_;
  uint64_t total_;
  bool quiet_, tty_;
  double start_, last_ = 0;
};

std::string human_count(double n);  // 1234567 -> "1.23M"

}  // namespace ggtrain::corpus
