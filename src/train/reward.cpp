#include "train/reward.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "util/error.h"
#include "util/subprocess.h"

namespace ggtrain::train {

namespace {

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

class PerRollout : public RewardFunction {
 public:
  std::vector<double> score(const std::vector<RewardInput>& rollouts) const override {
    std::vector<double> r;
    for (const RewardInput& x : rollouts) r.push_back(one(x) ? 1.0 : 0.0);
    return r;
  }

 private:
  virtual bool one(const RewardInput& x) const = 0;
};

class ExactReward : public PerRollout {
  bool one(const RewardInput& x) const override { return trimmed(x.completion) == trimmed(x.answer); }
};

class NumberReward : public PerRollout {
  bool one(const RewardInput& x) const override {
    double got = 0, want = 0;
    if (!last_number(x.completion, got) || !last_number(x.answer, want)) return false;
    return std::abs(got - want) <= 1e-9 * std::max(1.0, std::abs(want));
  }
};

class RegexReward : public PerRollout {
 public:
  explicit RegexReward(const std::string& pattern) : re_(compile(pattern)) {}
  bool reads_answer() const override { return false; }

 private:
  static std::regex compile(const std::string& pattern) {
    // libstdc++ compiles and matches by recursion: a pattern of thousands of
    // characters can exhaust the stack instead of failing.
    if (pattern.size() > 1000)
      fail("config: train.grpo.reward: a regex: pattern of {} characters; at most 1000", pattern.size());
    try {
      return std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail("config: train.grpo.reward = \"regex:{}\": not a valid pattern ({})", pattern, e.what());
    }
  }
  bool one(const RewardInput& x) const override { return std::regex_search(x.completion, re_); }
  std::regex re_;
};

// The first capital letter that stands alone: "B", "(B)", "B." or "B)".
char first_choice_letter(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 'A' || c > 'Z') continue;
    const bool left = i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]));
    const bool right = i + 1 == s.size() || !std::isalnum(static_cast<unsigned char>(s[i + 1]));
    if (left && right) return char(c);
  }
  return 0;
}

class ChoiceReward : public PerRollout {
  bool one(const RewardInput& x) const override {
    const char want = first_choice_letter(x.answer);
    return want != 0 && first_choice_letter(x.completion) == want;
  }
};

class CommandReward : public RewardFunction {
 public:
  CommandReward(std::string command, double timeout_s) : command_(std::move(command)), timeout_s_(timeout_s) {}
  bool reads_answer() const override { return false; }
  std::vector<double> score(const std::vector<RewardInput>& rollouts) const override;

 private:
  std::string command_;
  double timeout_s_;
};

std::vector<double> CommandReward::score(const std::vector<RewardInput>& rollouts) const {
  std::string input;
  for (const RewardInput& x : rollouts)
    input += nlohmann::json{{"prompt", x.prompt}, {"completion", x.completion}, {"answer", x.answer}}.dump(
                 -1, ' ', false, nlohmann::json::error_handler_t::replace) +
             "\n";
  const std::string what = fmt::format("train.grpo.reward command '{}'", command_);
  const CommandResult res = run_command(command_, input, timeout_s_);
  if (res.timed_out)
    fail("{} did not answer {} rollouts within {} s (train.grpo.reward_timeout); it was killed", what, rollouts.size(),
         timeout_s_);
  if (!res.ok()) fail("{} {}", what, res.failure());
  std::vector<double> r;
  std::istringstream lines(res.out);
  int64_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    const std::string t = trimmed(line);
    size_t used = 0;
    double v = NAN;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size() || !std::isfinite(v))
      fail("{}: stdout line {} is '{}', not a finite number (one reward per line, in input order)", what, n,
           t.substr(0, 80));
    r.push_back(v);
  }
  if (r.size() != rollouts.size())
    fail("{}: printed {} rewards for {} rollouts (one number per input line, in order)", what, r.size(),
         rollouts.size());
  return r;
}

}  // namespace

bool last_number(const std::string& text, double& value) {
  static const std::regex number(R"(-?\d[\d,]*(\.\d+)?)");
  std::string last;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it)
    last = it->str();
  if (last.empty()) return false;
  std::erase(last, ',');
  value = std::stod(last);
  return std::isfinite(value);
}

std::unique_ptr<RewardFunction> make_reward(const std::string& spec, double timeout_s) {
  if (spec == "exact") return std::make_unique<ExactReward>();
  if (spec == "number") return std::make_unique<NumberReward>();
  if (spec == "choice") return std::make_unique<ChoiceReward>();
  if (spec.starts_with("regex:") && spec.size() > 6) return std::make_unique<RegexReward>(spec.substr(6));
  if (spec.starts_with("cmd:") && !trimmed(spec.substr(4)).empty())
    return std::make_unique<CommandReward>(spec.substr(4), timeout_s);
  fail("config: train.grpo.reward = \"{}\" is not a reward: use exact, number, choice, regex:PATTERN or cmd:COMMAND",
       spec);
}

}  // namespace ggtrain::train
