#include "model/freeze.h"

#include <charconv>
#include <regex>

#include "util/error.h"

namespace ggtrain::model {

namespace {

std::string strip_weight(const std::string& s) {
  const std::string suffix = ".weight";
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0
             ? s.substr(0, s.size() - suffix.size())
             : s;
}

bool parse_u64(const std::string& s, int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && v >= 0;
}

// Does the pattern name tensor `name` ("blk.3.attn_q" form, without .weight)?
bool matches(const std::string& pattern, const std::string& name) {
  if (pattern == name) return true;
  static const std::regex block_tensor(R"(blk\.([0-9]+)\.(.+))");
  std::smatch nm;
  if (!std::regex_match(name, nm, block_tensor)) return false;
  const int64_t layer = std::stoll(nm[1]);
  const std::string kind = nm[2];
  if (pattern == kind) return true;  // "attn_q": every block
  static const std::regex block_range(R"(blk\.([0-9]+)(?:-([0-9]+))?(?:\.(.+))?)");
  std::smatch pm;
  if (!std::regex_match(pattern, pm, block_range)) return false;
  int64_t lo = 0, hi = 0;
  if (!parse_u64(pm[1], lo)) return false;
  hi = lo;
  if (pm[2].matched && !parse_u64(pm[2], hi)) return false;
  return layer >= lo && layer <= hi && (!pm[3].matched || pm[3] == kind);
}

}  // namespace

std::set<std::string> frozen_tensors(const ParamLayout& layout, const std::vector<std::string>& patterns,
                                     const std::string& key) {
  std::set<std::string> out;
  for (const auto& raw : patterns) {
    const std::string pattern = strip_weight(raw);
    bool any = false;
    for (const auto& t : layout.tensors()) {
      if (!matches(pattern, strip_weight(t.name))) continue;
      out.insert(t.name);
      any = true;
    }
    if (!any)
      fail("config: {}: '{}' names no parameter of this model (e.g. token_embd, output, blk.0-3, "
           "blk.2.ffn_up, attn_norm)",
           key, raw);
  }
  return out;
}

std::set<std::string> frozen_in_run(const Config& c, const std::vector<std::string>& patterns, const std::string& key) {
  if (c.lora.rank > 0) return ParamLayout(c.without_lora()).names();
  return frozen_tensors(ParamLayout(c), patterns, key);
}

}  // namespace ggtrain::model
