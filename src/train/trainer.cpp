#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "data/batch_loader.h"
#include "data/corpus.h"
#include "data/sentencepiece_train.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/generator.h"
#include "model/init.h"
#include "model/llama.h"
#include "train/adamw.h"
#include "train/metrics.h"
#include "train/run_checkpoint.h"
#include "train/schedule.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::train {

namespace fs = std::filesystem;

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string new_run_id() {
  Rng rng(uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) ^ uint64_t(::getpid()));
  return fmt::format("{:016x}", rng.next_u64());
}

data::Tokenizer load_or_train_tokenizer(const std::string& run_dir, const RunConfig& c, bool quiet) {
  const std::string& t = c.data.tokenizer;
  if (t.size() > 5 && t.substr(t.size() - 5) == ".gguf") return data::Tokenizer::from_gguf(gguf::GgufFile(t));
  if (!t.empty()) return data::Tokenizer::from_sentencepiece(t);
  const std::string own = run_dir + "/tokenizer.model";
  if (!fs::exists(own)) {
    if (!quiet) fmt::print(stderr, "training a {}-token BPE tokenizer on {}\n", c.data.vocab_size, c.data.corpus);
    data::train_sentencepiece_bpe(c.data.corpus, int(c.data.vocab_size), own);
  }
  return data::Tokenizer::from_sentencepiece(own);
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

class Run {
 public:
  explicit Run(const TrainOptions& o);
  TrainSummary loop();

 private:
  double evaluate();
  void sample(int64_t step);
  void checkpoint(int64_t step);

  TrainOptions opts_;
  const RunConfig& c_;
  std::string run_id_;
  int64_t start_step_ = 0;
  std::unique_ptr<data::Tokenizer> tok_;
  std::unique_ptr<data::TokenFile> train_tokens_, val_tokens_;
  std::unique_ptr<data::BatchLoader> loader_, val_loader_;
  model::LlamaConfig mc_;
  std::unique_ptr<model::LlamaModel<float>> model_;
  std::vector<float> m_, v_;
  std::vector<int32_t> inputs_, targets_;
  std::unique_ptr<MetricsLog> metrics_;
};

Run::Run(const TrainOptions& o) : opts_(o), c_(opts_.config) {
  c_.validate();
  const std::string& dir = opts_.run_dir;
  if (!opts_.resume && latest_step(dir) >= 0)
    fail("{}: this run folder already has checkpoints; use --resume to continue it", dir);
  if (c_.data.corpus.empty()) fail("config: data.corpus is not set (a UTF-8 text file)");
  fs::create_directories(dir + "/data");
  if (c_.train.threads > 0) omp_set_num_threads(int(c_.train.threads));

  tok_ = std::make_unique<data::Tokenizer>(load_or_train_tokenizer(dir, c_, opts_.quiet));
  const std::string train_path = dir + "/data/train.tok", val_path = dir + "/data/val.tok";
  if (!opts_.resume || !fs::exists(train_path) || !fs::exists(val_path)) {
    auto st = data::prepare_corpus(c_.data.corpus, *tok_, c_.data.val_fraction, c_.train.seed,
                                   train_path, val_path);
    if (!opts_.quiet)
      fmt::print(stderr, "corpus: {} documents, {} bytes -> {} train / {} validation tokens\n",
                 st.documents, st.bytes, st.train_tokens, st.val_tokens);
  }
  train_tokens_ = std::make_unique<data::TokenFile>(train_path);
  val_tokens_ = std::make_unique<data::TokenFile>(val_path);
  if (train_tokens_->vocab() != tok_->vocab_size())
    fail("{}: token file vocabulary {} differs from the tokenizer's {}", train_path,
         train_tokens_->vocab(), tok_->vocab_size());
  const int64_t T = c_.train.seq_len;
  loader_ = std::make_unique<data::BatchLoader>(*train_tokens_, T, c_.train.seed);
  if (val_tokens_->size() > T) val_loader_ = std::make_unique<data::BatchLoader>(*val_tokens_, T, c_.train.seed);

  mc_ = c_.llama(tok_->vocab_size());
  model_ = std::make_unique<model::LlamaModel<float>>(mc_, c_.train.batch, T);
  m_.assign(size_t(model_->n_params()), 0.f);
  v_.assign(size_t(model_->n_params()), 0.f);
  inputs_.resize(size_t(c_.train.batch * T));
  targets_.resize(size_t(c_.train.batch * T));
  if (opts_.resume) {
    CheckpointData d{&mc_, &model_->layout(), tok_.get(), model_->params(), m_.data(), v_.data()};
    CheckpointMeta meta = load_latest(dir, d);
    start_step_ = meta.step;
    run_id_ = meta.run_id;
    loader_->set_state(meta.loader);
    if (!opts_.quiet) fmt::print(stderr, "resuming run {} at step {}\n", run_id_, start_step_);
  } else {
    run_id_ = new_run_id();
    model::init_params(mc_, model_->layout(), model_->params(), c_.train.seed);
    const std::string cfg = to_toml(c_);
    write_file_atomic(dir + "/config.toml", cfg.data(), cfg.size());
  }
  metrics_ = std::make_unique<MetricsLog>(dir, opts_.resume ? start_step_ : -1);
}

double Run::evaluate() {
  if (!val_loader_) return NAN;
  const int64_t B = c_.train.batch, T = c_.train.seq_len;
  const int64_t n_batches = std::min(c_.train.eval_batches, val_loader_->n_windows() / B);
  if (n_batches == 0) return NAN;
  double sum = 0;
  for (int64_t i = 0; i < n_batches; ++i) {
    for (int64_t b = 0; b < B; ++b)
      val_loader_->window(i * B + b, inputs_.data() + b * T, targets_.data() + b * T);
    sum += model_->forward(inputs_.data(), targets_.data());
  }
  return sum / double(n_batches);
}

void Run::sample(int64_t step) {
  infer::Generator gen(mc_, model_->params());
  std::vector<int32_t> prompt{tok_->bos_id()};
  auto ids = gen.generate(prompt, c_.train.sample_tokens, {}, c_.train.seed ^ uint64_t(step), tok_->eos_id());
  if (!opts_.quiet) fmt::print(stderr, "\nsample at step {}: {}\n", step, tok_->decode(ids));
}

void Run::checkpoint(int64_t step) {
  CheckpointMeta meta{step, run_id_, to_toml(c_), loader_->state()};
  CheckpointData d{&mc_, &model_->layout(), tok_.get(), model_->params(), m_.data(), v_.data()};
  save_checkpoint(opts_.run_dir, meta, d, c_.checkpoint.keep_last);
  metrics_->write_plot();
}

TrainSummary Run::loop() {
  const auto& t = c_.train;
  LrSchedule sched{schedule_kind_from_name(t.schedule), t.lr_max, t.lr_min, t.warmup_steps, t.steps, 0.2};
  AdamWConfig adamw{float(t.beta1), float(t.beta2), float(t.eps), float(t.weight_decay)};
  const int64_t tokens_per_step = t.batch * t.seq_len * t.grad_accum;
  const bool tty = ::isatty(2);
  TrainSummary sum;
  sum.first_step = start_step_;
  const double t_start = now_s();
  double train_seconds = 0;  // step time only: evaluation, samples and checkpoints excluded
  for (int64_t step = start_step_; step < t.steps; ++step) {
    const double t0 = now_s();
    const double lr = sched.lr_at(step);
    model_->zero_grad();
    double loss = 0;
    for (int64_t k = 0; k < t.grad_accum; ++k) {
      loader_->next(t.batch, inputs_.data(), targets_.data());
      loss += model_->forward(inputs_.data(), targets_.data()) / double(t.grad_accum);
      model_->backward(1.0f / float(t.grad_accum));
    }
    const double norm = grad_global_norm(model_->grads(), model_->n_params());
    if (!std::isfinite(loss) || !std::isfinite(norm))
      fail("step {}: loss {} / gradient norm {} is not finite; stopping (last checkpoint kept)", step + 1, loss, norm);
    adamw_step(model_->layout(), model_->params(), model_->grads(), m_.data(), v_.data(), step + 1,
               lr, adamw, clip_scale(norm, t.grad_clip));
    const double dt = now_s() - t0, tps = double(tokens_per_step) / dt;
    train_seconds += dt;
    const int64_t done = step + 1;
    metrics_->log_step({{"step", done}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm},
                        {"tokens_per_s", tps}, {"elapsed_s", now_s() - t_start}});
    if (step == start_step_) sum.first_loss = loss;
    sum.last_loss = loss;
    sum.tokens_per_s = double(tokens_per_step * (done - start_step_)) / train_seconds;
    if (!opts_.quiet && (tty || done % 10 == 0 || done == t.steps)) {
      const double eta = (now_s() - t_start) / double(done - start_step_) * double(t.steps - done);
      fmt::print(stderr, "{}step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}{}",
                 tty ? "\r" : "", done, t.steps, loss, lr, norm, tps, duration_text(eta), tty ? "   " : "\n");
    }
    if (t.eval_every > 0 && (done % t.eval_every == 0 || done == t.steps)) {
      const double vl = evaluate();
      if (std::isfinite(vl)) {
        metrics_->log_eval({{"step", done}, {"val_loss", vl}, {"val_ppl", std::exp(vl)}});
        sum.last_val_loss = vl;
        if (!opts_.quiet) fmt::print(stderr, "{}validation at step {}: loss {:.4f}, perplexity {:.2f}\n", tty ? "\n" : "", done, vl, std::exp(vl));
      }
    }
    if (t.sample_every > 0 && done % t.sample_every == 0) sample(done);
    const bool stop_here = opts_.stop_at > 0 && done == opts_.stop_at;
    if ((c_.checkpoint.every > 0 && done % c_.checkpoint.every == 0) || done == t.steps || stop_here)
      checkpoint(done);
    if (stop_here) break;
  }
  if (tty && !opts_.quiet) fmt::print(stderr, "\n");
  sum.last_step = latest_step(opts_.run_dir);
  sum.final_weights = weights_path(opts_.run_dir, latest_step(opts_.run_dir));
  return sum;
}

}  // namespace

TrainSummary run_training(const TrainOptions& opts) {
  Run run(opts);
  return run.loop();
}

RunConfig saved_run_config(const std::string& run_dir) {
  CheckpointMeta meta = read_latest_meta(run_dir);
  RunConfig c;
  apply_toml(c, meta.config_toml, run_dir + " (saved config)");
  return c;
}

}  // namespace ggtrain::train
