// Distillation runs end to end (train.objective = "distill"): a teacher
// equal to the student starts at zero KL and zero gradient, a student from
// scratch moves toward its teacher, the loss is the mean over the step's
// targets however the step is split, a LoRA student and a student on chat
// data with a vocabulary grown past the teacher's train,
// a run resumes exactly, and a changed teacher or a teacher with another
// vocabulary is refused naming the file.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/files.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace ggtrain;
using test_support::last_eval;
using test_support::step_record;
using test_support::TempDir;

namespace {

// The tiny preset trained `steps` steps on the synthetic corpus in tmp/name.
std::string trained_model(TempDir& tmp, const std::string& name, int64_t steps) {
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", steps);
  c.checkpoint.every = steps;
  c.train.eval_every = 0;
  test_support::run_quiet(tmp / name, c, false);
  return train::weights_path(tmp / name, steps);
}

// Distillation on the synthetic corpus from `teacher`: a continued model
// when init_from is set, else a new tiny model on the teacher's vocabulary.
train::RunConfig distill_config(TempDir& tmp, const std::string& teacher, const std::string& init_from, int64_t steps) {
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", steps);
  if (!init_from.empty()) c.init.from = init_from;
  else c.data.tokenizer = tmp / "teacher/tokenizer.model";
  train::apply_override(c, "train.objective=distill");
  c.train.teacher = teacher;
  c.train.distill_top_k = 16;  // of 512 tokens: the other bucket carries real mass
  c.train.distill.temperature = 1.5;
  c.train.steps = steps;
  c.train.eval_every = steps;
  c.train.eval_batches = 2;
  c.train.warmup_steps = 2;
  c.checkpoint.every = steps;
  return c;
}

// The student is the teacher: the first step's KL is zero (the decoder that
// scored the teacher and the training forward agree to float rounding) and
// so is its gradient; a different teacher gives a real KL and gradient.
TEST(DistillRun, TeacherEqualToStudentStartsAtZero) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 30);
  const std::string other = trained_model(tmp, "other", 10);
  auto same = distill_config(tmp, teacher, teacher, 1);
  test_support::run_quiet(tmp / "same", same, false);
  auto differs = distill_config(tmp, other, teacher, 1);
  test_support::run_quiet(tmp / "differs", differs, false);
  const auto a = step_record(tmp / "same", 1), b = step_record(tmp / "differs", 1);
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(b.is_null());
  std::printf("teacher = student: kl %.3g grad_norm %.3g; other teacher: kl %.3g grad_norm %.3g\n",
              a["kl"].get<double>(), a["grad_norm"].get<double>(), b["kl"].get<double>(), b["grad_norm"].get<double>());
  ASSERT_TRUE(std::isfinite(a["kl"].get<double>()) && std::isfinite(a["grad_norm"].get<double>()));
  EXPECT_LT(std::fabs(a["kl"].get<double>()), 1e-6);
  EXPECT_GT(b["kl"].get<double>(), 0.05);
  EXPECT_LT(a["grad_norm"].get<double>(), 1e-3 * b["grad_norm"].get<double>());
  EXPECT_TRUE(std::filesystem::exists(tmp / "same/data/teacher-train.bin"));
}

// A new student distilled for 40 steps ends closer to its teacher on the
// held-out text than it started.
TEST(DistillRun, StudentMovesTowardTheTeacher) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 60);
  auto c = distill_config(tmp, teacher, "", 40);
  c.train.eval_every = 20;
  test_support::run_quiet(tmp / "run", c, false);
  const auto first = step_record(tmp / "run", 1), v = last_eval(tmp / "run");
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(v.is_null());
  std::printf("kl: first step %.4f, held out at the end %.4f (nll %.4f)\n", first["kl"].get<double>(),
              v["val_kl"].get<double>(), v["val_nll"].get<double>());
  EXPECT_LT(v["val_kl"].get<double>(), 0.5 * first["kl"].get<double>());
  for (const char* key : {"val_loss", "val_kl", "val_nll", "val_ppl"}) EXPECT_TRUE(v.contains(key)) << key;
}

// The loss and gradient are the mean over the step's targets: a batch of 4
// and two micro-batches of 2 agree; half the batch does not.
TEST(DistillRun, BatchEqualsMicroBatches) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 20);
  auto one = distill_config(tmp, teacher, "", 2), two = one;
  one.train.batch = 4;
  two.train.batch = 2;
  two.train.grad_accum = 2;
  test_support::run_quiet(tmp / "one", one, false);
  test_support::run_quiet(tmp / "two", two, false);
  for (int64_t step : {1, 2}) {
    const auto a = step_record(tmp / "one", step), b = step_record(tmp / "two", step);
    const double l1 = a["loss"], l2 = b["loss"], g1 = a["grad_norm"], g2 = b["grad_norm"];
    ASSERT_TRUE(std::isfinite(l1) && std::isfinite(l2) && std::isfinite(g1) && g1 > 0 && std::isfinite(g2));
    std::printf("step %lld: loss %.9g vs %.9g, grad_norm %.9g vs %.9g\n", (long long)step, l1, l2, g1, g2);
    EXPECT_NEAR(l1, l2, 1e-5 * std::abs(l1)) << step;
    EXPECT_NEAR(g1, g2, 1e-5 * g1) << step;
  }
  auto half = one;
  half.train.batch = 2;
  test_support::run_quiet(tmp / "half", half, false);
  EXPECT_GT(std::abs(double(step_record(tmp / "half", 2)["loss"]) - double(step_record(tmp / "one", 2)["loss"])), 1e-4);
}

// The teacher's file and the first steps do not depend on the thread
// count: the top k per position and the loss sums are taken in order.
TEST(DistillRun, SameAtAnyThreadCount) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 20);
  auto one = distill_config(tmp, teacher, "", 2), two = one;
  two.train.threads = 2;
  test_support::run_quiet(tmp / "one", one, false);
  test_support::run_quiet(tmp / "two", two, false);
  EXPECT_EQ(test_support::slurp(tmp / "one/data/teacher-train.bin"),
            test_support::slurp(tmp / "two/data/teacher-train.bin"));
  for (int64_t step : {1, 2}) {
    const double l1 = step_record(tmp / "one", step)["loss"], l2 = step_record(tmp / "two", step)["loss"];
    ASSERT_TRUE(std::isfinite(l1) && std::isfinite(l2));
    EXPECT_NEAR(l1, l2, 1e-6 * l1) << step;
  }
}

TEST(DistillRun, ResumesExactly) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 20);
  auto c = distill_config(tmp, teacher, "", 10);
  c.train.distill.alpha = 0.25;
  c.train.distill.divergence = train::Divergence::kReverse;
  c.train.threads = 2;
  c.checkpoint.every = 5;
  c.train.eval_every = 5;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
}

// Chat data on a base without the template's markers: the student's
// vocabulary grows past the teacher's (a prefix-compatible copy), prompt
// tokens carry no target, and the KL falls.
TEST(DistillRun, ChatDataOnAGrownVocabulary) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 30);
  const std::string student = trained_model(tmp, "student", 5);
  {
    std::ofstream out(tmp / "chat.jsonl");
    for (int i = 0; i < 200; ++i)
      out << fmt::format(R"({{"prompt": "the {} of the day", "completion": "and the night {} came"}})", i % 7, i % 5)
          << "\n";
  }
  auto c = distill_config(tmp, teacher, student, 30);
  c.data.corpus = {tmp / "chat.jsonl"};
  train::apply_override(c, "data.format=completion");
  c.train.distill.alpha = 0.3;  // the teacher has no end-of-turn marker to teach
  c.train.lr_max = 3e-3;
  c.train.seq_len = 32;
  test_support::run_quiet(tmp / "run", c, false);
  const auto first = step_record(tmp / "run", 1), last = step_record(tmp / "run", 30);
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(last.is_null());
  std::printf("chat data, grown vocabulary: kl %.4f -> %.4f\n", first["kl"].get<double>(), last["kl"].get<double>());
  EXPECT_LT(last["kl"].get<double>(), 0.7 * first["kl"].get<double>());
}

// alpha = 1 is the hard-label loss alone: the same step-1 loss and
// gradient as an SFT run on the same batch, for a full finetune and LoRA.
TEST(DistillRun, AlphaOneIsSft) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 30);
  const std::string student = trained_model(tmp, "student", 5);
  for (int64_t rank : {0, 8}) {
    auto d = distill_config(tmp, teacher, student, 1);
    d.train.distill.alpha = 1.0;
    d.train.lora.rank = rank;
    auto s = d;
    train::apply_override(s, "train.objective=sft");
    s.train.teacher.clear();
    const std::string name = fmt::format("rank{}", rank);
    test_support::run_quiet(tmp / (name + "-distill"), d, false);
    test_support::run_quiet(tmp / (name + "-sft"), s, false);
    const auto a = step_record(tmp / (name + "-distill"), 1), b = step_record(tmp / (name + "-sft"), 1);
    const double la = a["loss"], lb = b["loss"], ga = a["grad_norm"], gb = b["grad_norm"];
    std::printf("LoRA rank %lld: loss %.9g vs SFT %.9g, grad_norm %.9g vs %.9g\n", (long long)rank, la, lb, ga, gb);
    ASSERT_TRUE(std::isfinite(la) && std::isfinite(ga) && gb > 0);
    EXPECT_NEAR(la, lb, 1e-6 * lb) << rank;
    EXPECT_NEAR(ga, gb, 1e-5 * gb) << rank;
  }
}

// A LoRA student (rank 8 on every block matrix of a 5-step base) against a
// 30-step teacher: the adapters reach the best the frozen embeddings and
// head allow (measured: KL 0.210 -> 0.209, gradient norm 0.23 -> 0.004;
// what the teacher learned beyond is mostly in those frozen tables).
// AlphaOneIsSft above checks the LoRA gradient itself.
TEST(DistillRun, LoraStudentConverges) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 30);
  const std::string student = trained_model(tmp, "student", 5);
  auto c = distill_config(tmp, teacher, student, 30);
  c.train.lora.rank = 8;
  c.train.lora.targets = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  c.train.lr_max = 4e-2;
  test_support::run_quiet(tmp / "run", c, false);
  const auto first = step_record(tmp / "run", 1), last = step_record(tmp / "run", 30), v = last_eval(tmp / "run");
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(last.is_null());
  ASSERT_FALSE(v.is_null());
  std::printf("LoRA student: kl %.4f -> held out %.4f, grad_norm %.4f -> %.4f\n", first["kl"].get<double>(),
              v["val_kl"].get<double>(), first["grad_norm"].get<double>(), last["grad_norm"].get<double>());
  EXPECT_LT(last["grad_norm"].get<double>(), 0.1 * first["grad_norm"].get<double>());
  EXPECT_LT(v["val_kl"].get<double>(), first["kl"].get<double>());
}

// The teacher's file records what it came from: a resume whose teacher
// now holds other weights is refused, naming the file.
TEST(DistillRun, RefusedWhenTheTeacherChanged) {
  TempDir tmp;
  const std::string teacher = trained_model(tmp, "teacher", 20);
  const std::string other = trained_model(tmp, "other", 10);
  const std::string copy = tmp / "teacher-copy.gguf";
  std::filesystem::copy_file(teacher, copy);
  const auto c = distill_config(tmp, copy, "", 10);
  test_support::run_quiet(tmp / "run", c, false, 5);
  std::filesystem::copy_file(other, copy, std::filesystem::copy_options::overwrite_existing);
  const std::string err = test_support::error_of([&] { test_support::run_quiet(tmp / "run", c, true); });
  EXPECT_NE(err.find("teacher-train.bin"), std::string::npos) << err;
  EXPECT_NE(err.find("another train.teacher"), std::string::npos) << err;
}

}  // namespace
