#pragma once
// train.grpo.reward: how GRPO scores a reply against its record's answer.
//   exact       1 when the reply equals the answer (spaces around either ignored), else 0
//   number      1 when the last number in the reply equals the answer's last number
//   regex:P     1 when the reply contains a match of the ECMAScript pattern P
//   choice      1 when the reply's first standalone capital letter (A, B, ...)
//               is the answer's first letter
//   cmd:C       the shell command C reads one JSON object per rollout on
//               stdin ({"prompt", "completion", "answer"}) and writes one
//               number per line on stdout, in order; it must exit 0 within
//               train.grpo.reward_timeout seconds (docs/guide.md)
#include <memory>
#include <string>
#include <vector>

namespace ggtrain::train {

struct RewardInput {
  std::string prompt, completion, answer;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  virtual std::vector<double> score(const std::vector<RewardInput>& rollouts) const = 0;
  // Whether the reward reads the answer (the data must then give one).
  virtual bool reads_answer() const { return true; }
};

// From its spec; a spec it cannot read fails naming the config key.
std::unique_ptr<RewardFunction> make_reward(const std::string& spec, double timeout_s);

// The last number written in `text` ("-3", "1,024", "2.5"), if any.
bool last_number(const std::string& text, double& value);

}  // namespace ggtrain::train
