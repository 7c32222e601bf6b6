// GRPO's rewards: the built-in verifiers on replies written here, and the
// reward command against hostile behaviour (garbage, missing lines, a
// hang, a crash, a command that is not there, one that never reads its
// input): each a clear error naming the command, never a crash or a hang.
#include <gtest/gtest.h>

#include "train/reward.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/subprocess.h"

namespace ggtrain::train {
namespace {

std::vector<double> rewards(const std::string& spec, const std::vector<RewardInput>& in, double timeout = 20) {
  return make_reward(spec, timeout)->score(in);
}

std::string error_of(const std::string& spec, const std::vector<RewardInput>& in, double timeout = 20) {
  try {
    rewards(spec, in, timeout);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Reward, ExactIgnoresSurroundingSpace) {
  EXPECT_EQ(rewards("exact", {{"p", " Genesis\n", "Genesis"}, {"p", "Genesis 1", "Genesis"}, {"p", "", "x"}}),
            (std::vector<double>{1, 0, 0}));
}

TEST(Reward, NumberTakesTheLastNumberOfEach) {
  double v = 0;
  ASSERT_TRUE(last_number("so 3 + 4 = 1,024.5 apples", v));
  EXPECT_EQ(v, 1024.5);
  EXPECT_FALSE(last_number("no digits", v));
  EXPECT_EQ(rewards("number", {{"p", "3 + 4 is 7", "#### 7"},
                               {"p", "7 then 8", "7"},
                               {"p", "-12", "-12"},
                               {"p", "none", "5"},
                               {"p", "2.50", "2.5"}}),
            (std::vector<double>{1, 0, 1, 0, 1}));
}

TEST(Reward, RegexSearchesTheReply) {
  EXPECT_EQ(rewards("regex:^<think>.*</think>", {{"p", "<think>a</think> b", ""}, {"p", "b <think></think>", ""}}),
            (std::vector<double>{1, 0}));
  EXPECT_NE(error_of("regex:([", {}).find("not a valid pattern"), std::string::npos);
}

TEST(Reward, ChoiceComparesTheFirstStandaloneLetter) {
  EXPECT_EQ(rewards("choice", {{"p", "The answer is (B).", "B"},
                               {"p", "Because A is wrong, C", "C"},
                               {"p", "B", "answer: B"},
                               {"p", "Apples", "A"}}),
            (std::vector<double>{1, 0, 1, 0}));
}

TEST(Reward, UnknownSpecNamesTheKey) {
  const std::string e = error_of("exactly", {});
  EXPECT_NE(e.find("train.grpo.reward"), std::string::npos) << e;
  EXPECT_NE(e.find("cmd:COMMAND"), std::string::npos) << e;
}

// The protocol: one JSON object per rollout in, one number per line out.
TEST(RewardCommand, ReadsOneNumberPerRollout) {
  const std::vector<RewardInput> in{{"p1", "yes", "a"}, {"p2", "no", "b"}, {"p3", "yes \"quoted\"\n", "c"}};
  // 1 when the completion member starts with "yes", else 0.5: the command sees the JSON.
  EXPECT_EQ(
      rewards(R"(cmd:while IFS= read -r l; do case "$l" in *'"completion":"yes'*) echo 1;; *) echo 0.5;; esac; done)",
              in),
      (std::vector<double>{1, 0.5, 1}));
}

TEST(RewardCommand, HostileOutputIsAClearError) {
  const std::vector<RewardInput> in{{"p", "c", "a"}, {"p", "c", "a"}};
  std::string e = error_of("cmd:cat > /dev/null; echo 1; echo banana", in);
  EXPECT_NE(e.find("line 2 is 'banana', not a finite number"), std::string::npos) << e;
  e = error_of("cmd:cat > /dev/null; echo 1", in);
  EXPECT_NE(e.find("printed 1 rewards for 2 rollouts"), std::string::npos) << e;
  e = error_of("cmd:cat > /dev/null; echo nan; echo 1", in);
  EXPECT_NE(e.find("not a finite number"), std::string::npos) << e;
  e = error_of("cmd:echo 'bad input' >&2; exit 3", in);
  EXPECT_NE(e.find("exited with status 3: bad input"), std::string::npos) << e;
  e = error_of("cmd:kill -SEGV $$", in);
  EXPECT_NE(e.find("killed by signal 11"), std::string::npos) << e;
  e = error_of("cmd:/no/such/reward-script", in);
  EXPECT_NE(e.find("exited with status 127"), std::string::npos) << e;
  EXPECT_NE(e.find("/no/such/reward-script"), std::string::npos) << e;
}

// A hang is killed at the deadline, the shell's children with it.
TEST(RewardCommand, HangIsKilledAtTheTimeout) {
  const double t0 = now_seconds();
  const std::string e = error_of("cmd:sleep 30; echo 1", {{"p", "c", "a"}}, 0.5);
  EXPECT_LT(now_seconds() - t0, 10.0);
  EXPECT_NE(e.find("did not answer 1 rollouts within 0.5 s"), std::string::npos) << e;
}

// A command that exits without reading megabytes of input: no SIGPIPE in
// the caller, the missing rewards reported.
TEST(RewardCommand, CommandThatIgnoresItsInput) {
  std::vector<RewardInput> in(2000, {"p", std::string(2000, 'x'), "a"});
  const std::string e = error_of("cmd:echo 1", in);
  EXPECT_NE(e.find("printed 1 rewards for 2000 rollouts"), std::string::npos) << e;
}

TEST(Subprocess, EndlessOutputIsCapped) {
  const CommandResult r = run_command("yes", "", 20, size_t(1) << 20);
  EXPECT_TRUE(r.output_capped);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace ggtrain::train
