// train.objective = "distill": the student follows a teacher's next-token
// distribution (train/distill_loss.h) on the run's data, the teacher's top
// k per position paid for once before the first step and streamed from
// beside the token files (train/teacher_topk.h). Loss and gradients are the
// mean over the step's counted targets on every rank and micro-batch split,
// as with SFT's.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "corpus/batch_loader.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/quantized_base.h"
#include "tokenizer/tokenizer.h"
#include "train/distill_loss.h"
#include "train/objective.h"
#include "train/preference_reference.h"
#include "train/teacher_topk.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// How many leading ids the student's and the teacher's vocabularies share:
// the shorter one's size, when every one of its pieces is the other's
// (the same tokenizer, or one that appends tokens, e.g. chat markers).
int64_t shared_vocabulary(const tokenizer::Tokenizer& student, const gguf::GgufFile& teacher_file) {
  const std::string& path = teacher_file.path();
  const tokenizer::Tokenizer teacher = tokenizer::Tokenizer::from_gguf(teacher_file);
  if (teacher.model() != student.model())
    fail("{}: train.teacher has a {} vocabulary and the student a {} one; distillation needs the student's "
         "vocabulary (the same tokenizer, or one that extends it)",
         path, teacher.model(), student.model());
  const int64_t n = std::min(student.vocab_size(), teacher.vocab_size());
  for (int64_t id = 0; id < n; ++id)
    if (teacher.piece(int32_t(id)) != student.piece(int32_t(id)))
      fail("{}: train.teacher's token {} is '{}' where the student's is '{}'; distillation needs the student's "
           "vocabulary (the same tokenizer, or one that extends it)",
           path, id, teacher.piece(int32_t(id)), student.piece(int32_t(id)));
  return n;
}

// The rows of one window the teacher runs at once: the whole window, or
// with documents each document alone from its start.
template <typename F>
void for_each_segment(const int32_t* doc_start, int64_t T, bool documents, F f) {
  int64_t a = 0;
  for (int64_t i = 1; i <= T; ++i)
    if (i == T || (documents && doc_start[i] == i)) {
      f(a, i);
      a = i;
    }
}

class DistillObjective : public TrainingObjective {
 public:
  explicit DistillObjective(const ObjectiveContext& ctx) : ctx_(ctx), params_(ctx.config.train.distill), val_(ctx_) {}

  void prepare() override;
  StepTerms step(const StepBatches& b) override;
  std::optional<ValidationResult> validate() override;

 private:
  struct Totals {
    double loss = 0, kl = 0, nll = 0;  // sums over the counted targets (loss: weighted)
    int64_t targets = 0;
  };
  void teacher_scores(const gguf::GgufFile& teacher, const corpus::BatchLoader& windows, int64_t n_tokens,
                      const TeacherSource& source, const std::string& path, const char* name);
  // The model's last forward_scores() rows against the teacher: the terms
  // of each counted target (window_ids: its rows' windows), and with
  // `weight` > 0 its gradient into the model (backward_logits).
  Totals score(const TeacherTopK& teacher, const int32_t* targets, const int64_t* window_ids, double weight);
  void sum_over_ranks(Totals& t);

  const ObjectiveContext ctx_;
  const DistillParams params_;
  std::unique_ptr<TeacherTopK> train_topk_, val_topk_;
  std::vector<double> row_kl_, row_nll_, row_loss_;  // a chunk's rows
  ValidationBatches val_;
};

// The teacher's top k over both streams, computed on a fresh run by rank 0
// (before the other ranks start) and read by every other rank and on resume.
void DistillObjective::prepare() {
  const auto& t = ctx_.config.train;
  const gguf::GgufFile teacher(t.teacher);
  const int64_t shared = shared_vocabulary(ctx_.tokenizer, teacher);
  const int64_t T = t.seq_len;
  TeacherSource source{model::base_fingerprint(teacher),  0,      T,
                       std::min(t.distill_top_k, shared), shared, params_.temperature};
  struct Stream {
    const corpus::TokenStream* tokens;
    const corpus::BatchLoader* windows;
    std::unique_ptr<TeacherTopK>* topk;
    const char* name;
  };
  const corpus::BatchLoader train_windows(*ctx_.tokens.train[0], T, t.seed, ctx_.tokens.train_labels());
  const Stream streams[] = {{ctx_.tokens.train[0].get(), &train_windows, &train_topk_, "train"},
                            {ctx_.tokens.val.get(), ctx_.val_loader, &val_topk_, "val"}};
  for (const Stream& s : streams) {
    if (!s.tokens || !s.windows) continue;
    const std::string path = fmt::format("{}/data/teacher-{}.bin", ctx_.run_dir, s.name);
    source.tokens = token_stream_fingerprint(*s.tokens);
    if (!ctx_.resume && ctx_.dp.root()) teacher_scores(teacher, *s.windows, s.tokens->size(), source, path, s.name);
    *s.topk = std::make_unique<TeacherTopK>(path, source, s.tokens->size());
  }
}

// Window w's targets are the stream's tokens w*T+1 .. w*T+T: the teacher
// runs each window (each of its documents) from an empty cache and keeps
// every counted target's top k, in stream order.
void DistillObjective::teacher_scores(const gguf::GgufFile& teacher, const corpus::BatchLoader& windows,
                                      int64_t n_tokens, const TeacherSource& source, const std::string& path,
                                      const char* name) {
  const double t0 = now_seconds();
  double last_report = t0;
  const int64_t T = source.seq_len, k = source.k;
  infer::Decoder dec(teacher, T, kernels::CacheType::kF32);
  const int64_t V = dec.config().vocab;
  if (source.vocab > V)
    fail("{}: train.teacher's vocabulary lists {} tokens but its output has {} rows", teacher.path(), source.vocab, V);
  TeacherTopKWriter out(path, source, n_tokens);
  std::vector<int32_t> in(static_cast<size_t>(T)), tg(in.size()), ds(in.size());
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> logp(size_t(T * k)), log_other(in.size());
  out.add_empty();  // stream token 0 is no window's target
  for (int64_t w = 0; w < windows.n_windows(); ++w) {
    windows.window(w, in.data(), tg.data(), ds.data());
    for_each_segment(ds.data(), T, ctx_.documents, [&](int64_t a, int64_t b) {
      dec.reset();
      dec.eval(in.data() + a, b - a, true);
      const float* logits = dec.logits();
#pragma omp parallel for schedule(dynamic, 8)
      for (int64_t i = a; i < b; ++i)
        if (tg[size_t(i)] != corpus::kNoTarget)
          teacher_top_k(logits + (i - a) * V, V, source.vocab, k, source.temperature, ids.data() + i * k,
                        logp.data() + i * k, &log_other[size_t(i)]);
    });
    for (int64_t i = 0; i < T; ++i)
      if (tg[size_t(i)] == corpus::kNoTarget) out.add_empty();
      else out.add(ids.data() + i * k, logp.data() + i * k, log_other[size_t(i)]);
    if (!ctx_.quiet && now_seconds() - last_report >= 10) {  // a long pass says where it is
      last_report = now_seconds();
      const double rate = double((w + 1) * T) / (last_report - t0);
      fmt::print(stderr, "teacher: {} of {} windows of {} ({:.0f} tokens/s, ETA {:.0f} s)\n", w + 1,
                 windows.n_windows(), name, rate, double((windows.n_windows() - w - 1) * T) / rate);
    }
  }
  out.add_empty(n_tokens - 1 - windows.n_windows() * T);  // the stream's tail no window reaches
  out.commit();
  if (!ctx_.quiet)
    fmt::print(stderr,
               "teacher: top {} of {} tokens' distributions over {} tokens of {} in {:.1f} s ({}, {:.1f} MiB)\n", k, V,
               n_tokens, name, now_seconds() - t0, path, double(n_tokens) * double(out.record_bytes()) / (1 << 20));
}

DistillObjective::Totals DistillObjective::score(const TeacherTopK& teacher, const int32_t* targets,
                                                 const int64_t* window_ids, double weight) {
  auto& model = ctx_.model;
  const int64_t T = ctx_.config.train.seq_len, V = model.config().vocab;
  Totals sums;
  const auto chunk = [&](int64_t r0, int64_t rows, float* logits) {
    row_kl_.assign(size_t(rows), 0.0);
    row_nll_.assign(size_t(rows), 0.0);
    row_loss_.assign(size_t(rows), 0.0);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = r0 + r;
      float* z = logits + r * V;
      if (targets[row] == corpus::kNoTarget) {
        if (weight > 0) std::fill(z, z + V, 0.f);
        continue;
      }
      const TeacherRow t = teacher.row(window_ids[row / T] * T + row % T + 1);
      const DistillTerms d = distill_row(z, weight > 0 ? z : nullptr, V, t, targets[row], params_, weight);
      row_kl_[size_t(r)] = d.kl;
      row_nll_[size_t(r)] = double(model.token_losses()[row]);  // forward_scores' -log p(target)
      row_loss_[size_t(r)] = d.loss(params_);
    }
    for (int64_t r = 0; r < rows; ++r) {  // in order: the same sums whatever the thread count
      if (targets[r0 + r] == corpus::kNoTarget) continue;
      sums.kl += row_kl_[size_t(r)];
      sums.nll += row_nll_[size_t(r)];
      sums.loss += row_loss_[size_t(r)];
      ++sums.targets;
    }
  };
  if (weight > 0) model.backward_logits(chunk);
  else model.visit_logits(chunk);
  return sums;
}

void DistillObjective::sum_over_ranks(Totals& t) {
  auto& dp = ctx_.dp;
  if (dp.size() == 1) return;
  for (double* x : {&t.loss, &t.kl, &t.nll}) *x = dp.sum_over_ranks(*x);
  t.targets = int64_t(dp.sum_over_ranks(double(t.targets)) + 0.5);
}

StepTerms DistillObjective::step(const StepBatches& b) {
  const auto& t = ctx_.config.train;
  auto& dp = ctx_.dp;
  const int64_t micro = t.batch * t.seq_len;
  const double weight = 1.0 / double(std::max<int64_t>(1, counted_targets(b, t)));
  Totals mine;
  for (int64_t k = 0; k < t.grad_accum; ++k) {
    dp.begin_micro_batch(k + 1 == t.grad_accum);
    const int32_t* targets = dp.local(b.targets + k * micro);
    ctx_.model.forward_scores(dp.local(b.inputs + k * micro), targets,
                              ctx_.documents ? dp.local(b.doc_start + k * micro) : nullptr);
    const Totals s = score(*train_topk_, targets, b.window_ids + k * t.batch + dp.first_row(), weight);
    mine.loss += s.loss;
    mine.kl += s.kl;
    mine.nll += s.nll;
    mine.targets += s.targets;
  }
  StepTerms r;
  r.loss = mine.loss * weight;  // this rank's share; the trainer sums the shares
  Totals all = mine;
  sum_over_ranks(all);
  if (all.targets > 0) {
    const double n = double(all.targets);
    r.metrics["kl"] = all.kl / n;
    r.metrics["nll"] = all.nll / n;
    r.progress = fmt::format(" | kl {:.4f} nll {:.4f}", all.kl / n, all.nll / n);
  }
  return r;
}

// The objective, its KL and the hard-label loss (with perplexity) over the
// first train.eval_batches batches of held-out windows.
std::optional<ValidationResult> DistillObjective::validate() {
  if (!val_topk_) return std::nullopt;
  Totals all;
  for (int64_t i = 0; i < val_.count(); ++i) {
    val_.load(i);
    ctx_.model.forward_scores(val_.inputs(), val_.targets(), val_.documents());
    const Totals s = score(*val_topk_, val_.targets(), val_.window_ids(), 0.0);
    all.loss += s.loss;
    all.kl += s.kl;
    all.nll += s.nll;
    all.targets += s.targets;
  }
  sum_over_ranks(all);
  if (all.targets == 0) return std::nullopt;
  const double n = double(all.targets);
  ValidationResult v;
  v.loss = all.loss / n;
  if (!std::isfinite(v.loss)) return std::nullopt;
  v.metrics = {
      {"val_loss", v.loss}, {"val_kl", all.kl / n}, {"val_nll", all.nll / n}, {"val_ppl", std::exp(all.nll / n)}};
  v.best_candidates = {{"val_loss", v.loss}};
  v.line = fmt::format("loss {:.4f}, KL to the teacher {:.4f}, hard-label loss {:.4f} (perplexity {:.2f})", v.loss,
                       all.kl / n, all.nll / n, std::exp(all.nll / n));
  return v;
}

}  // namespace

std::unique_ptr<TrainingObjective> make_distill_objective(const ObjectiveContext& ctx) {
  return std::make_unique<DistillObjective>(ctx);
}

}  // namespace ggtrain::train
