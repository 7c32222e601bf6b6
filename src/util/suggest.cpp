#include "util/suggest.h"

#include <algorithm>
#include <numeric>

namespace ggtrain {

int edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: three rows, the oldest for transpositions.
  std::vector<int> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  std::iota(prev.begin(), prev.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    before.swap(prev);
    prev.swap(row);
  }
  return prev[b.size()];
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  // A unique abbreviation ("prep" for "prepare") is the likely intent too.
  std::string prefixed;
  int starts = 0;
  for (const auto& c : candidates)
    if (word.size() >= 2 && c.size() > word.size() && c.compare(0, word.size(), word) == 0) prefixed = c, ++starts;
  if (starts == 1) return prefixed;
  const int limit = std::clamp(int(word.size()) / 3, 1, 3);
  std::string best;
  int best_distance = limit + 1;
  for (const auto& c : candidates) {
    const int d = edit_distance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(word, candidates);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

}  // namespace ggtrain
