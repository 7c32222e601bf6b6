#pragma once
// "Did you mean ...?" for a misspelt name: the closest of the known names
// by edit distance, when it is close enough to be the likely intent.
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain {

// Edit distance: insertions, deletions, substitutions and swaps of two
// neighbours ("trian" is one edit from "train"); bytes, not characters.
int edit_distance(std::string_view a, std::string_view b);

// The one candidate that `word` abbreviates, else the candidate nearest to
// `word` if it is within a third of the word's length (at least 1, at most
// 3 edits), else "". Ties go to the first.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for closest_name, or "" when none is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ggtrain
