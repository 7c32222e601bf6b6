// train.objective = "grpo": each step samples train.grpo.group replies to
// every prompt of its windows from the weights as they are (the decoder,
// llama.cpp's sampler), scores them with train.grpo.reward, and takes one
// gradient step on GRPO's loss over the replies' tokens (train/grpo_loss.h).
// Prompts and answers are instruction records prepared as for SFT: in a
// window, each example's tokens before its first trained target are the
// prompt (the rendered template up to the assistant's turn), its first run
// of trained targets the answer. Validation replies greedily to the
// held-out prompts (val_reward) beside the answers' loss (val_loss).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "infer/generate.h"
#include "train/grpo_loss.h"
#include "train/metrics.h"
#include "train/objective.h"
#include "train/reward.h"
#include "train/run_checkpoint.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/hash.h"

namespace ggtrain::train {

namespace {

struct Prompt {
  std::vector<int32_t> ids;  // the example's tokens up to the reply's first
  std::string text;  // ids as text, what a reward command and rollouts.jsonl see
  std::string answer;  // the record's answer as text
  uint64_t key;  // its window and place there: with the step, it seeds the replies
};

struct Rollout {
  const Prompt* prompt = nullptr;
  std::vector<int32_t> reply;  // sampled, the stop token included when it came
  std::string completion;  // reply as text (score() decodes it)
  double reward = 0, advantage = 0;
  // Each reply token's log-probability under the weights that sampled it:
  // the first pass's, which later passes' ratios divide by.
  std::vector<double> old_logp;
};

// One batch of replies and the step that sampled it: with
// train.grpo.iterations > 1 it trains that step and the next ones.
struct SampledBatch {
  int64_t step = 0;
  std::vector<Prompt> prompts;
  std::vector<Rollout> rollouts;  // their prompts point into `prompts`
  std::vector<double> rewards() const {
    std::vector<double> out;
    for (const Rollout& r : rollouts) out.push_back(r.reward);
    return out;
  }
};

// Each example of one window [T] that has a trained target.
void add_prompts(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start, int64_t T, int64_t window_id,
                 const tokenizer::Tokenizer& tok, std::vector<Prompt>& out) {
  for (int64_t s = 0, e = 0; s < T; s = e) {
    e = s + 1;
    while (e < T && doc_start[e] == doc_start[s]) ++e;
    int64_t p = s;
    while (p < e && targets[p] == corpus::kNoTarget) ++p;
    if (p == e) continue;  // padding
    std::vector<int32_t> answer;
    for (int64_t i = p; i < e && targets[i] != corpus::kNoTarget; ++i) answer.push_back(targets[i]);
    std::vector<int32_t> ids(inputs + s, inputs + p + 1);
    std::string text = tok.decode(ids);
    out.push_back(
        {std::move(ids), std::move(text), tok.decode(answer), uint64_t(window_id) * uint64_t(T) + uint64_t(s)});
  }
}

// Where a rollout is trained: micro-batch, and its first token's index there.
struct Placement {
  int64_t micro, at;
};

// What one pass over the rollouts' tokens sums (this rank's).
struct PassTotals {
  double loss = 0, kl = 0, clipped = 0;
};

class GrpoObjective : public TrainingObjective {
 public:
  explicit GrpoObjective(const ObjectiveContext& ctx);
  void prepare() override;
  StepTerms step(const StepBatches& b) override;
  std::optional<ValidationResult> validate() override;

 private:
  std::vector<Rollout> sample(const std::vector<Prompt>& prompts, int64_t step, bool greedy) const;
  void score(std::vector<Rollout>& rollouts) const;
  bool draws_windows(int64_t step) const override { return (step - 1) % g_.iterations == 0; }
  void sample_batch(const StepBatches& b);
  // train.grpo.iterations > 1: the batch beside the checkpoints (each
  // rank's own), so that a run resumed between its steps trains on it.
  std::string batch_path(int64_t step) const;
  void save_batch() const;
  void load_batch(int64_t step);
  PassTotals train_on(std::vector<Rollout>& rollouts, double all_tokens, bool first_pass);
  std::vector<Placement> pack(const std::vector<Rollout>& rollouts) const;
  void fill_micro_batch(const std::vector<Rollout>& rollouts, const std::vector<Placement>& at, int64_t micro);
  void reference_logps(const Rollout& r, float* out);
  void log_rollouts(int64_t step, const std::vector<Rollout>& rollouts);

  const ObjectiveContext ctx_;
  const GrpoSection& g_;
  const GrpoParams params_;
  const std::unique_ptr<RewardFunction> reward_;
  std::vector<int32_t> stops_;  // EOS and the template's end of turn
  ValidationBatches val_;
  std::vector<int32_t> inputs_, targets_, doc_start_;  // a micro-batch of rollout rows [local batch, T]
  std::vector<float> d_nll_, ref_logp_;
  // train.grpo.beta > 0: the reference, init.from's weights.
  std::unique_ptr<gguf::GgufFile> ref_file_;
  std::unique_ptr<infer::Decoder> ref_;
  std::unique_ptr<StepRecordFile> rollouts_log_;
  SampledBatch batch_;  // the replies the steps train on now
  double rollout_seconds_ = 0;
};

GrpoParams params_of(const GrpoSection& g) {
  return {g.epsilon, g.epsilon_high < 0 ? g.epsilon : g.epsilon_high, g.beta, g.scale_rewards};
}

GrpoObjective::GrpoObjective(const ObjectiveContext& ctx)
    : ctx_(ctx),
      g_(ctx.config.grpo),
      params_(params_of(ctx.config.grpo)),
      reward_(make_reward(g_.reward, g_.reward_timeout)),
      val_(ctx_) {
  for (int32_t id : {ctx.tokenizer.eos_id(), ctx.tokenizer.eot_id()})
    if (id >= 0) stops_.push_back(id);
  const int64_t rows = ctx.model.batch() * ctx.config.train.seq_len;
  inputs_.resize(size_t(rows));
  targets_.resize(size_t(rows));
  doc_start_.resize(size_t(rows));
  d_nll_.resize(size_t(rows));
  ref_logp_.resize(size_t(rows));
}

void GrpoObjective::prepare() {
  // Only rank 0 writes the samples; on resume, those of steps past the checkpoint go.
  const int64_t resumed = ctx_.resume ? latest_step(ctx_.run_dir) : -1;
  rollouts_log_ = std::make_unique<StepRecordFile>(ctx_.run_dir + "/rollouts.jsonl", resumed, ctx_.dp.root());
  // Resumed between a batch's steps: the replies its next step trains on again.
  if (resumed > 0 && resumed % g_.iterations != 0) load_batch(resumed - resumed % g_.iterations + 1);
  if (params_.beta <= 0) return;
  ref_file_ = std::make_unique<gguf::GgufFile>(ctx_.config.init.from);
  ref_ = std::make_unique<infer::Decoder>(*ref_file_, ctx_.config.train.seq_len);
  if (ref_->config().vocab != ctx_.model.config().vocab)
    fail("train.grpo.beta: the reference (init.from, {}) has {} tokens, the run's model {} (the chat template's "
         "tokens were added); the KL needs the run's vocabulary: start from a model that has them (one this run's "
         "template trained, e.g. an SFT run's), or set train.grpo.beta = 0",
         ctx_.config.init.from, ref_->config().vocab, ctx_.model.config().vocab);
}

// The replies to each prompt: `group` sampled ones (greedy: one), each
// seeded by (train.seed, step, prompt, reply) so that a resumed run draws
// the same, as do the ranks whatever their number.
std::vector<Rollout> GrpoObjective::sample(const std::vector<Prompt>& prompts, int64_t step, bool greedy) const {
  const int64_t T = ctx_.config.train.seq_len;
  infer::SamplerConfig s{greedy ? 0.0 : g_.temperature, g_.top_k, g_.top_p, g_.min_p, 1.0, 64};
  const int64_t n = greedy ? 1 : g_.group;
  std::vector<Rollout> out;
  ctx_.with_decoder(T, [&](infer::Decoder& dec) {
    infer::GenerateControl keep_prompt;
    keep_prompt.reuse_cache = true;  // consecutive prompts of a window share the template's start
    for (const Prompt& p : prompts) {
      // A row holds the prompt and the reply but the reply's last token.
      const int64_t room = std::min(g_.max_tokens, T + 1 - int64_t(p.ids.size()));
      std::vector<uint64_t> seeds;
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t words[] = {ctx_.config.train.seed, uint64_t(step), p.key, uint64_t(i)};
        seeds.push_back(fnv1a(words, sizeof words));
      }
      // The group decoded together: one batch per token of its replies.
      for (infer::Generation& gen : infer::generate_group(dec, p.ids, room, s, seeds, stops_, keep_prompt)) {
        Rollout& r = out.emplace_back();
        r.prompt = &p;
        r.reply = std::move(gen.tokens);
      }
    }
  });
  return out;
}

// Each reply decoded once, then scored.
void GrpoObjective::score(std::vector<Rollout>& rollouts) const {
  if (rollouts.empty()) return;  // a rank whose windows hold no prompt runs no reward command
  std::vector<RewardInput> in;
  for (Rollout& r : rollouts) {
    r.completion = ctx_.tokenizer.decode(r.reply);
    in.push_back({r.prompt->text, r.completion, r.prompt->answer});
  }
  const std::vector<double> rewards = reward_->score(in);
  for (size_t i = 0; i < rollouts.size(); ++i) rollouts[i].reward = rewards[i];
}

// Rollouts packed into rows of the model's micro-batches, each a document
// of its own (attention and recurrent state stop at it): prompt and reply
// as one sequence but the reply's last token, which is only a target.
// Positions start at the row's, not at 0 as the decoder sampled them; RoPE
// sees only differences of positions, so the log-probabilities differ by
// rounding.
std::vector<Placement> GrpoObjective::pack(const std::vector<Rollout>& rollouts) const {
  const int64_t B = ctx_.model.batch(), T = ctx_.config.train.seq_len;
  std::vector<Placement> at;
  int64_t row = 0, pos = 0;
  for (const Rollout& r : rollouts) {
    const int64_t n = int64_t(r.prompt->ids.size() + r.reply.size()) - 1;
    if (pos + n > T) ++row, pos = 0;
    at.push_back({row / B, (row % B) * T + pos});
    pos += n;
  }
  return at;
}

void GrpoObjective::fill_micro_batch(const std::vector<Rollout>& rollouts, const std::vector<Placement>& at,
                                     int64_t micro) {
  const int64_t T = ctx_.config.train.seq_len;
  std::fill(inputs_.begin(), inputs_.end(), 0);
  std::fill(targets_.begin(), targets_.end(), corpus::kNoTarget);
  // Padding: each position its own document, so every row's starts never decrease.
  for (size_t i = 0; i < doc_start_.size(); ++i) doc_start_[i] = int32_t(int64_t(i) % T);
  for (size_t k = 0; k < rollouts.size(); ++k) {
    if (at[k].micro != micro) continue;
    const auto& prompt = rollouts[k].prompt->ids;
    const auto& reply = rollouts[k].reply;
    const int64_t P = int64_t(prompt.size()), n = P + int64_t(reply.size()) - 1, first = at[k].at;
    std::copy(prompt.begin(), prompt.end(), inputs_.begin() + first);
    std::copy(reply.begin(), reply.end() - 1, inputs_.begin() + first + P);
    std::copy(reply.begin(), reply.end(), targets_.begin() + first + P - 1);
    std::fill(doc_start_.begin() + first, doc_start_.begin() + first + n, int32_t(first % T));
  }
}

// The reference's log-probability of each reply token of `r`, at the
// positions fill_micro_batch gives them (out: the rollout's first token).
void GrpoObjective::reference_logps(const Rollout& r, float* out) {
  const auto& prompt = r.prompt->ids;
  const int64_t P = int64_t(prompt.size()), V = ref_->config().vocab;
  const auto& cached = ref_->cached_tokens();
  const bool same_prompt =
      int64_t(cached.size()) >= P - 1 && std::equal(prompt.begin(), prompt.end() - 1, cached.begin());
  ref_->truncate(same_prompt ? P - 1 : 0);
  if (!same_prompt) ref_->eval(prompt.data(), P - 1, false);
  std::vector<int32_t> rest{prompt.back()};
  rest.insert(rest.end(), r.reply.begin(), r.reply.end() - 1);
  ref_->eval(rest.data(), int64_t(rest.size()), true);
  for (size_t i = 0; i < r.reply.size(); ++i) {
    const float* z = ref_->logits() + int64_t(i) * V;
    const float zmax = *std::max_element(z, z + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v] - zmax));
    out[P - 1 + int64_t(i)] = float(double(z[r.reply[i]] - zmax) - std::log(sum));
  }
}

// Forward and backward over this rank's rollouts, in as many micro-batches
// as the rank with the most needs (a rank with fewer runs empty ones: the
// gradient reduction is collective). The loss is the sum over reply tokens
// divided by all ranks' reply tokens ("dapo").
PassTotals GrpoObjective::train_on(std::vector<Rollout>& rollouts, double all_tokens, bool first_pass) {
  auto& model = ctx_.model;
  auto& dp = ctx_.dp;
  const std::vector<Placement> at = pack(rollouts);
  const int64_t micro = dp.max_over_ranks(at.empty() ? 1 : at.back().micro + 1);
  PassTotals t;
  for (int64_t k = 0; k < micro; ++k) {
    fill_micro_batch(rollouts, at, k);
    dp.begin_micro_batch(k + 1 == micro);
    model.forward_scores(inputs_.data(), targets_.data(), doc_start_.data());
    std::fill(d_nll_.begin(), d_nll_.end(), 0.f);
    const float* nll = model.token_losses();
    for (size_t j = 0; j < rollouts.size(); ++j) {
      if (at[j].micro != k) continue;
      Rollout& r = rollouts[j];
      if (first_pass) r.old_logp.assign(r.reply.size(), 0.0);
      const int64_t first = at[j].at + int64_t(r.prompt->ids.size()) - 1;  // the reply's first target
      if (ref_) reference_logps(r, ref_logp_.data() + at[j].at);
      for (int64_t i = first; i < first + int64_t(r.reply.size()); ++i) {
        const double logp = -double(nll[i]);
        // The first pass is the sampling policy's: r = 1.
        double& old = r.old_logp[size_t(i - first)];
        if (first_pass) old = logp;
        const GrpoToken tok = grpo_token(logp, old, ref_ ? ref_logp_[size_t(i)] : 0.0, r.advantage, params_);
        d_nll_[size_t(i)] = float(-tok.d_logp / all_tokens);
        t.loss += tok.loss;
        t.kl += tok.kl;
        t.clipped += tok.clipped ? 1 : 0;
      }
    }
    model.backward_weighted(d_nll_.data());
  }
  return t;
}

void GrpoObjective::log_rollouts(int64_t step, const std::vector<Rollout>& rollouts) {
  for (const Rollout& r : rollouts)
    rollouts_log_->append({{"step", step},
                           {"prompt", r.prompt->text},
                           {"answer", r.prompt->answer},
                           {"completion", r.completion},
                           {"tokens", r.reply.size()},
                           {"reward", r.reward},
                           {"advantage", r.advantage}});
}

std::string GrpoObjective::batch_path(int64_t step) const {
  return fmt::format("{}/grpo/replies-step{}-rank{}of{}.json", ctx_.run_dir, step, ctx_.dp.rank(), ctx_.dp.size());
}

// JSON, its numbers printed so that they read back as the same doubles;
// written atomically, the batch before the last one removed then. Token
// ids only: the texts (which may end inside a UTF-8 sequence) are decoded
// again, and the answers served the rewards, which are kept.
void GrpoObjective::save_batch() const {
  nlohmann::json prompts = nlohmann::json::array(), rollouts = nlohmann::json::array();
  for (const Prompt& p : batch_.prompts) prompts.push_back({{"ids", p.ids}, {"key", p.key}});
  for (const Rollout& r : batch_.rollouts)
    rollouts.push_back({{"prompt", r.prompt - batch_.prompts.data()},
                        {"reply", r.reply},
                        {"reward", r.reward},
                        {"advantage", r.advantage},
                        {"old_logp", r.old_logp}});
  const nlohmann::json j = {{"format", 1}, {"step", batch_.step}, {"prompts", prompts}, {"rollouts", rollouts}};
  std::filesystem::create_directories(ctx_.run_dir + "/grpo");
  const std::string text = j.dump();
  write_file_atomic(batch_path(batch_.step), text.data(), text.size());
  std::error_code ignored;
  std::filesystem::remove(batch_path(batch_.step - 2 * g_.iterations), ignored);
}

// The file is read as hostile: any field missing, of another type or out
// of range is one line naming the file and the field.
void GrpoObjective::load_batch(int64_t step) {
  const std::string path = batch_path(step);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("{}: missing; the run stopped between the {} steps that train one batch of replies "
         "(train.grpo.iterations), and resuming there needs that batch, which each rank keeps: resume with the "
         "same number of ranks, or from a checkpoint at the step before a batch is sampled",
         path, g_.iterations);
  const int64_t V = ctx_.model.config().vocab;
  auto tokens = [&](const nlohmann::json& a, const char* field) {
    std::vector<int32_t> out = a.get<std::vector<int32_t>>();
    for (int32_t id : out)
      if (id < 0 || id >= V) fail("{}: {}: token {} is outside the vocabulary of {}", path, field, id, V);
    return out;
  };
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("format").get<int>() != 1 || j.at("step").get<int64_t>() != step)
      fail("{}: format or step: not the batch of step {} this version writes", path, step);
    batch_ = SampledBatch{step, {}, {}};
    for (const auto& p : j.at("prompts")) {
      std::vector<int32_t> ids = tokens(p.at("ids"), "prompts.ids");
      std::string text = ctx_.tokenizer.decode(ids);
      batch_.prompts.push_back({std::move(ids), std::move(text), "", p.at("key").get<uint64_t>()});
    }
    for (const auto& r : j.at("rollouts")) {
      Rollout& x = batch_.rollouts.emplace_back();
      const int64_t prompt = r.at("prompt").get<int64_t>();
      if (prompt < 0 || prompt >= int64_t(batch_.prompts.size()))
        fail("{}: rollouts.prompt: {} is not one of its {} prompts", path, prompt, batch_.prompts.size());
      x.prompt = &batch_.prompts[size_t(prompt)];
      x.reply = tokens(r.at("reply"), "rollouts.reply");
      x.completion = ctx_.tokenizer.decode(x.reply);
      x.reward = r.at("reward").get<double>();
      x.advantage = r.at("advantage").get<double>();
      x.old_logp = r.at("old_logp").get<std::vector<double>>();
      if (x.reply.empty() || x.old_logp.size() != x.reply.size() ||
          int64_t(x.prompt->ids.size() + x.reply.size()) > ctx_.config.train.seq_len + 1)
        fail("{}: rollouts.reply / old_logp: lengths {} and {} do not fit a window of {}", path, x.reply.size(),
             x.old_logp.size(), ctx_.config.train.seq_len);
    }
    if (batch_.rollouts.size() != batch_.prompts.size() * size_t(g_.group))
      fail("{}: rollouts: {} replies to {} prompts, not train.grpo.group = {} each", path, batch_.rollouts.size(),
           batch_.prompts.size(), g_.group);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a batch of replies ggtrain wrote ({}); resume from a checkpoint at the step before a batch is "
         "sampled",
         path, e.what());
  }
}

// The step's prompts, `group` replies to each, their rewards and advantages.
void GrpoObjective::sample_batch(const StepBatches& b) {
  const auto& t = ctx_.config.train;
  auto& dp = ctx_.dp;
  const int64_t T = t.seq_len, micro = t.batch * T;
  batch_ = SampledBatch{b.step, {}, {}};
  std::vector<Prompt>& prompts = batch_.prompts;
  for (int64_t k = 0; k < t.grad_accum; ++k)
    for (int64_t row = 0; row < dp.local_batch(); ++row) {
      const int64_t at = row * T;
      add_prompts(dp.local(b.inputs + k * micro) + at, dp.local(b.targets + k * micro) + at,
                  dp.local(b.doc_start + k * micro) + at, T, b.window_ids[k * t.batch + dp.first_row() + row],
                  ctx_.tokenizer, prompts);
    }
  const double t0 = now_seconds();
  batch_.rollouts = sample(prompts, b.step, false);
  rollout_seconds_ = now_seconds() - t0;
  std::vector<Rollout>& rollouts = batch_.rollouts;
  score(rollouts);
  if (rollouts.empty()) return;
  const std::vector<double> a = group_advantages(batch_.rewards(), g_.group, params_.scale_rewards);
  for (size_t i = 0; i < rollouts.size(); ++i) rollouts[i].advantage = a[i];
}

// A step that draws windows samples replies to them; the next
// train.grpo.iterations - 1 steps train on the same replies again, their
// ratios against the first pass's log-probabilities. The reward metrics
// belong to the sampling step.
StepTerms GrpoObjective::step(const StepBatches& b) {
  auto& dp = ctx_.dp;
  const bool first_pass = draws_windows(b.step);
  if (first_pass) sample_batch(b);
  else if (batch_.step == 0) fail("grpo: step {} reuses replies that were never sampled", b.step);
  std::vector<Rollout>& rollouts = batch_.rollouts;
  double reward_sum = 0, tokens = 0;
  for (const Rollout& r : rollouts) reward_sum += r.reward, tokens += double(r.reply.size());
  const double all_tokens = std::max(1.0, dp.sum_over_ranks(tokens));
  const double t2 = now_seconds();
  const PassTotals pass = train_on(rollouts, all_tokens, first_pass);
  const double t3 = now_seconds();
  if (first_pass && g_.iterations > 1) save_batch();

  const double all_prompts = dp.sum_over_ranks(double(batch_.prompts.size()));
  const double all_rollouts = all_prompts * double(g_.group);
  const double kl = dp.sum_over_ranks(pass.kl) / all_tokens, clip = dp.sum_over_ranks(pass.clipped) / all_tokens;
  StepTerms r;
  r.loss = pass.loss / all_tokens;
  r.metrics = {{"completion_length", all_tokens / std::max(1.0, all_rollouts)},
               {"clip_ratio", clip},
               {"prompts", int64_t(all_prompts)},
               {"train_s", t3 - t2}};
  if (params_.beta > 0) r.metrics["kl"] = kl;
  if (!first_pass) {
    r.metrics["replies_of_step"] = batch_.step;
    r.progress = fmt::format(" | replies of step {} again | clipped {:.3f}", batch_.step, clip);
    return r;
  }
  if (dp.root()) log_rollouts(b.step, rollouts);
  const double std_sum =
      rollouts.empty() ? 0.0 : mean_group_std(batch_.rewards(), g_.group) * double(batch_.prompts.size());
  const double reward = dp.sum_over_ranks(reward_sum) / std::max(1.0, all_rollouts);
  const double reward_std = dp.sum_over_ranks(std_sum) / std::max(1.0, all_prompts);
  r.metrics["reward"] = reward;
  r.metrics["reward_std"] = reward_std;
  r.metrics["rollout_s"] = rollout_seconds_;
  r.progress = fmt::format(" | reward {:.3f} (std {:.3f}) | reply {:.1f} tokens", reward, reward_std,
                           all_tokens / std::max(1.0, all_rollouts));
  return r;
}

// The answers' mean loss over the held-out windows (as SFT validates) and
// the mean reward of one greedy reply to each of their prompts.
std::optional<ValidationResult> GrpoObjective::validate() {
  if (val_.count() == 0) return std::nullopt;
  auto& dp = ctx_.dp;
  const int64_t T = ctx_.config.train.seq_len;
  double nll = 0, counted = 0, reward = 0, replies = 0;
  for (int64_t i = 0; i < val_.count(); ++i) {
    val_.load(i);
    nll += double(ctx_.model.evaluate(val_.inputs(), val_.targets(), val_.documents())) *
           double(ctx_.model.counted_targets());
    counted += double(ctx_.model.counted_targets());
    std::vector<Prompt> prompts;
    for (int64_t row = 0; row < dp.local_batch(); ++row)
      add_prompts(val_.inputs() + row * T, val_.targets() + row * T, val_.doc_start() + row * T, T,
                  val_.window_ids()[row], ctx_.tokenizer, prompts);
    std::vector<Rollout> rollouts = sample(prompts, 0, true);
    score(rollouts);
    for (const Rollout& r : rollouts) reward += r.reward;
    replies += double(rollouts.size());
  }
  const double all = dp.sum_over_ranks(counted), all_replies = dp.sum_over_ranks(replies);
  if (all <= 0 || all_replies <= 0) return std::nullopt;
  const double loss = dp.sum_over_ranks(nll) / all, val_reward = dp.sum_over_ranks(reward) / all_replies;
  ValidationResult v;
  v.loss = loss;
  v.metrics = {{"val_loss", loss}, {"val_reward", val_reward}, {"val_prompts", int64_t(all_replies)}};
  v.best_candidates = {{"val_loss", loss}};
  v.line =
      fmt::format("answers' loss {:.4f}, greedy reward {:.4f} over {} prompts", loss, val_reward, int64_t(all_replies));
  return v;
}

}  // namespace

std::unique_ptr<TrainingObjective> make_grpo_objective(const ObjectiveContext& ctx) {
  return std::make_unique<GrpoObjective>(ctx);
}

}  // namespace ggtrain::train
