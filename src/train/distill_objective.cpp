// train.objective = "distill": the student follows a teacher's next-token
// distribution (train/distill_loss.h) on the run's data, the teacher's top
// k per position paid for once before the first step and streamed from
// beside the token files (train/teacher_topk.h). Loss and gradients are the
// mean over the step's counted targets on every rank and micro-batch split,
// as with SFT's.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

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
  void start() override;
  StepTerms step(const StepBatches& b) override;
  std::optional<ValidationResult> validate() override;

 private:
  struct Totals {
    double loss = 0, kl = 0, nll = 0;  // sums over the counted targets (loss: weighted)
    int64_t targets = 0;
  };
  // A stream of windows the teacher scores, its file and what it is computed from.
  struct Stream {
    const corpus::TokenStream* tokens;
    const corpus::BatchLoader* windows;
    std::unique_ptr<TeacherTopK>* topk;
    const char* name;
    TeacherSource source;
    std::string path;
  };
  void teacher_pass(const Stream& s);
  void teacher_scores(const gguf::GgufFile& teacher, const Stream& s, int64_t w0, int64_t w1, TeacherTopKWriter& out);
  // The model's last forward_scores() rows against the teacher: the terms
  // of each counted target (window_ids: its rows' windows), and with
  // `weight` > 0 its gradient into the model (backward_logits).
  Totals score(const TeacherTopK& teacher, const int32_t* targets, const int64_t* window_ids, double weight);
  void sum_over_ranks(Totals& t);

  const ObjectiveContext ctx_;
  const DistillParams params_;
  std::unique_ptr<TeacherTopK> train_topk_, val_topk_;
  std::unique_ptr<corpus::BatchLoader> train_windows_;
  std::vector<Stream> streams_;
  std::vector<double> row_kl_, row_nll_, row_loss_;  // a chunk's rows
  ValidationBatches val_;
};

// What the teacher's top k of each stream is computed from; a resumed run
// opens the files its start computed (and refuses ones that no longer match).
void DistillObjective::prepare() {
  const auto& t = ctx_.config.train;
  const gguf::GgufFile teacher(t.teacher);
  const int64_t shared = shared_vocabulary(ctx_.tokenizer, teacher);
  const int64_t T = t.seq_len;
  const TeacherSource base{model::base_fingerprint(teacher),  0,      T,
                           std::min(t.distill_top_k, shared), shared, params_.temperature};
  train_windows_ = std::make_unique<corpus::BatchLoader>(*ctx_.tokens.train[0], T, t.seed, ctx_.tokens.train_labels());
  const Stream all[] = {{ctx_.tokens.train[0].get(), train_windows_.get(), &train_topk_, "train", base, ""},
                        {ctx_.tokens.val.get(), ctx_.val_loader, &val_topk_, "val", base, ""}};
  for (Stream s : all) {
    if (!s.tokens || !s.windows) continue;
    s.path = fmt::format("{}/data/teacher-{}.bin", ctx_.run_dir, s.name);
    s.source.tokens = token_stream_fingerprint(*s.tokens);
    if (ctx_.resume) *s.topk = std::make_unique<TeacherTopK>(s.path, s.source, s.tokens->size());
    streams_.push_back(s);
  }
}

// A fresh run's teacher pass, once every rank exists: each rank scores its
// share of the windows into a part file, rank 0 joins them in stream order,
// then every rank opens the whole file (the run folder is every rank's).
void DistillObjective::start() {
  if (ctx_.resume) return;
  for (const Stream& s : streams_) {
    teacher_pass(s);
    *s.topk = std::make_unique<TeacherTopK>(s.path, s.source, s.tokens->size());
  }
}

// Window w's targets are the stream's tokens w*T+1 .. w*T+T: rank r scores
// windows [r n / R, (r + 1) n / R) of the n; the file holds token 0 (no
// window's target), the windows' records, then the tail no window reaches.
void DistillObjective::teacher_pass(const Stream& s) {
  auto& dp = ctx_.dp;
  const double t0 = now_seconds();
  const gguf::GgufFile teacher(ctx_.config.train.teacher);
  const int64_t n = s.windows->n_windows(), R = dp.size(), T = s.source.seq_len, n_tokens = s.tokens->size();
  const auto first = [&](int64_t r) { return n * r / R; };
  const auto part_path = [&](int64_t r) { return fmt::format("{}.part{}of{}", s.path, r, R); };
  // The whole file around the windows' records that `windows` writes.
  const auto write_whole = [&](const std::function<void(TeacherTopKWriter&)>& windows) {
    TeacherTopKWriter out(s.path, s.source, n_tokens);
    out.add_empty();
    windows(out);
    out.add_empty(n_tokens - 1 - n * T);
    out.commit();
  };
  if (R == 1) {
    write_whole([&](TeacherTopKWriter& out) { teacher_scores(teacher, s, 0, n, out); });
  } else {
    const int64_t w0 = first(dp.rank()), w1 = first(dp.rank() + 1);
    TeacherTopKWriter part(part_path(dp.rank()), s.source, (w1 - w0) * T, true);
    teacher_scores(teacher, s, w0, w1, part);
    part.commit();
    dp.barrier();
    if (dp.root()) {
      write_whole([&](TeacherTopKWriter& out) {
        for (int64_t r = 0; r < R; ++r) out.append_part(part_path(r), (first(r + 1) - first(r)) * T);
      });
      for (int64_t r = 0; r < R; ++r) std::filesystem::remove(part_path(r));
    }
    dp.barrier();
  }
  if (!ctx_.quiet)
    fmt::print(stderr, "teacher: top {} of its distributions over {} tokens of {} in {:.1f} s ({} rank{}; {})\n",
               s.source.k, n_tokens, s.name, now_seconds() - t0, R, R > 1 ? "s" : "", s.path);
}

// Windows [w0, w1): the teacher runs each window (each of its documents)
// from an empty cache and keeps every counted target's top k, in stream
// order; rank 0 reports its share's progress.
void DistillObjective::teacher_scores(const gguf::GgufFile& teacher, const Stream& s, int64_t w0, int64_t w1,
                                      TeacherTopKWriter& out) {
  const double t0 = now_seconds();
  double last_report = t0;
  const int64_t T = s.source.seq_len, k = s.source.k;
  infer::Decoder dec(teacher, T, kernels::CacheType::kF32);
  const int64_t V = dec.config().vocab;
  if (s.source.vocab > V)
    fail("{}: train.teacher's vocabulary lists {} tokens but its output has {} rows", teacher.path(), s.source.vocab,
         V);
  std::vector<int32_t> in(static_cast<size_t>(T)), tg(in.size()), ds(in.size());
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> logp(size_t(T * k)), log_other(in.size());
  for (int64_t w = w0; w < w1; ++w) {
    s.windows->window(w, in.data(), tg.data(), ds.data());
    for_each_segment(ds.data(), T, ctx_.documents, [&](int64_t a, int64_t b) {
      dec.reset();
      dec.eval(in.data() + a, b - a, true);
      const float* logits = dec.logits();
#pragma omp parallel for schedule(dynamic, 8)
      for (int64_t i = a; i < b; ++i)
        if (tg[size_t(i)] != corpus::kNoTarget)
          teacher_top_k(logits + (i - a) * V, V, s.source.vocab, k, s.source.temperature, ids.data() + i * k,
                        logp.data() + i * k, &log_other[size_t(i)]);
    });
    for (int64_t i = 0; i < T; ++i)
      if (tg[size_t(i)] == corpus::kNoTarget) out.add_empty();
      else out.add(ids.data() + i * k, logp.data() + i * k, log_other[size_t(i)]);
    if (!ctx_.quiet && now_seconds() - last_report >= 10) {  // a long pass says where it is
      last_report = now_seconds();
      const double rate = double((w - w0 + 1) * T) / (last_report - t0);
      fmt::print(stderr, "teacher: {} of {} windows of {} ({:.0f} tokens/s, ETA {:.0f} s)\n", w - w0 + 1, w1 - w0,
                 s.name, rate, double((w1 - w - 1) * T) / rate);
    }
  }
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
