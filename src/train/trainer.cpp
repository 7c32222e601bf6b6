#include "train/trainer.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "data/batch_loader.h"
#include "data/mixture_loader.h"
#include "data/tokenizer.h"
#include "gguf/reader.h"
#include "infer/generator.h"
#include "kernels/gemm_bf16.h"
#include "model/donor.h"
#include "model/checkpoint.h"
#include "model/freeze.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/llama.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/finetune.h"
#include "train/metrics.h"
#include "train/run_checkpoint.h"
#include "train/run_data.h"
#include "train/schedule.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::train {

namespace fs = std::filesystem;

namespace {

// SIGINT/SIGTERM during a run, without a signal handler. oneDNN 2.6's JIT
// sgemm kernels (Debian 12) point rsp at heap memory while they run, so a
// signal handler invoked during a GEMM pushes its frame onto the heap and
// corrupts it (oneDNN issue #4845, fixed upstream in PR #4855; reproduced
// here: "corrupted size vs. prev_size" about once in 20 interrupted runs).
// So the two signals are blocked in every thread for the whole run (the
// calling thread, OpenMP's pool, and every thread started later, which
// inherit the mask) and taken by a thread of our own with sigtimedwait():
// no handler frame is ever pushed anywhere.
//  - Before arm() (tokenizer training, corpus preparation) and after the
//    first signal once armed, a signal acts as it would have without us
//    (the previous disposition: by default the process ends).
//  - Once armed, the first signal only sets the flag that the step loop
//    reads after each step: finish the step, checkpoint, exit 0.
// A signal the process was started with ignored (nohup, `cmd &`) stays
// ignored. The calling thread's mask is restored at the end.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM}) {
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaddset(&set_, sig);
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
    // OpenMP threads that already exist were started with the old mask.
    const sigset_t* set = &set_;
#pragma omp parallel num_threads(std::max(omp_get_max_threads(), omp_get_num_procs()))
    ::pthread_sigmask(SIG_BLOCK, set, nullptr);
    waiter_ = std::thread([this] { wait_loop(); });
  }
  ~StopSignals() {
    stop_ = true;
    waiter_.join();
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);  // a pending signal acts now
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  void arm() { armed_ = true; }
  int caught() const { return caught_; }

 private:
  void wait_loop() {
    const struct timespec tick {0, 50 * 1000 * 1000};
    while (!stop_) {
      siginfo_t info;
      const int sig = ::sigtimedwait(&set_, &info, &tick);
      if (sig <= 0) continue;
      if (armed_ && caught_ == 0) {
        caught_ = sig;
        continue;
      }
      // As if we had never blocked it: the disposition decides (by default
      // the process ends, killed by that signal).
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(sig);
      ::pthread_sigmask(SIG_BLOCK, &one, nullptr);  // a handler ran and returned
    }
  }

  sigset_t set_{}, old_mask_{};
  std::thread waiter_;
  std::atomic<bool> stop_{false}, armed_{false};
  std::atomic<int> caught_{0};
};

// GGTRAIN_INJECT_NAN_AT_STEP: "5", "3,4,7-9" (steps counted from 1).
std::set<int64_t> injected_steps() {
  const char* env = std::getenv("GGTRAIN_INJECT_NAN_AT_STEP");
  std::set<int64_t> steps;
  if (!env || !*env) return steps;
  const std::string s(env);
  auto bad = [&]() {
    fail("GGTRAIN_INJECT_NAN_AT_STEP='{}': expected step numbers such as 5 or 3,4,7-9", s);
  };
  auto number = [&](std::string_view t) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size() || v < 1) bad();
    return v;
  };
  for (size_t pos = 0; pos <= s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string_view item(s.data() + pos, end - pos);
    const size_t dash = item.find('-');
    const int64_t a = number(item.substr(0, dash));
    const int64_t b = dash == std::string_view::npos ? a : number(item.substr(dash + 1));
    if (b < a || b - a > 1000000) bad();
    for (int64_t x = a; x <= b; ++x) steps.insert(x);
    pos = end + 1;
  }
  return steps;
}

bool inject_into_grad() {
  const char* env = std::getenv("GGTRAIN_INJECT_NAN_INTO");
  if (!env || !*env || std::string(env) == "loss") return false;
  if (std::string(env) == "grad") return true;
  fail("GGTRAIN_INJECT_NAN_INTO='{}': expected loss or grad", env);
}

std::string signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : fmt::format("signal {}", sig);
}

// The run folder as a shell word, for the "resume with" line.
std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./+:@%,=") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Removes the temporary files of writes that never completed (a SIGKILL or
// power loss during an atomic write leaves NAME.tmp.XXXXXX or .latest.tmp):
// they are never read, but would pile up.
void remove_stale_temp_files(const std::string& run_dir, bool quiet) {
  static const std::regex tmp_name(R"((.*\.tmp\.[A-Za-z0-9]{6})|(\.latest\.tmp))");
  int removed = 0;
  for (const char* sub : {"", "/weights", "/state", "/data"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir + sub, ec)) {
      if (!std::regex_match(e.path().filename().string(), tmp_name)) continue;
      std::error_code rm;
      if (fs::remove(e.path(), rm)) ++removed;
    }
  }
  if (removed > 0 && !quiet)
    fmt::print(stderr, "removed {} temporary file(s) left by an interrupted write in {}\n", removed, run_dir);
}

// The latest checkpoint of a run, for messages: "RUN/weights/step_N.gguf" or
// a sentence saying there is none yet.
std::string last_checkpoint_text(const std::string& run_dir) {
  int64_t step = -1;
  try {
    step = latest_step(run_dir);
  } catch (const Error&) {
  }
  return step < 0 ? std::string("there is no checkpoint yet")
                  : fmt::format("the last checkpoint {} is intact", weights_path(run_dir, step));
}

// On resume every model.* value must equal the checkpoint's: --set may change
// how training continues, never the model it continues.
void check_same_model(const RunConfig& now, const RunConfig& saved, const std::string& run_dir,
                      int64_t step) {
  std::vector<std::string> diffs;
  auto cmp = [&](const char* key, auto a, auto b) {
    if (a != b) diffs.push_back(fmt::format("{} is {} but the checkpoint has {}", key, a, b));
  };
  cmp("model.d_model", now.model.d_model, saved.model.d_model);
  cmp("model.n_layers", now.model.n_layers, saved.model.n_layers);
  cmp("model.n_heads", now.model.n_heads, saved.model.n_heads);
  cmp("model.n_kv_heads", now.model.n_kv_heads, saved.model.n_kv_heads);
  cmp("model.d_ff", now.model.d_ff, saved.model.d_ff);
  cmp("model.ctx", now.model.ctx, saved.model.ctx);
  cmp("model.tied", now.model.tied, saved.model.tied);
  cmp("model.rope_freq_base", now.model.rope_freq_base, saved.model.rope_freq_base);
  cmp("model.rms_eps", now.model.rms_eps, saved.model.rms_eps);
  if (!diffs.empty())
    fail("{}: cannot resume step {} with a different model: {} (on --resume, --set may change "
         "train.* and checkpoint.* keys, not model.*; start a new run in another --run-dir)",
         run_dir, step, fmt::join(diffs, "; "));
}

// The vocabulary a run resumes with must be the one its checkpoint was
// trained with, token for token.
void check_same_vocabulary(const data::Tokenizer& tok, const std::string& tok_source,
                           const std::string& weights) {
  gguf::GgufFile w(weights);
  const data::Tokenizer ck = data::Tokenizer::from_gguf(w);
  const std::string fix = "resume with the tokenizer the run was trained with";
  if (ck.vocab_size() != tok.vocab_size())
    fail("{}: vocabulary mismatch: the checkpoint has {} tokens but the tokenizer {} has {}; {}",
         weights, ck.vocab_size(), tok_source, tok.vocab_size(), fix);
  for (int32_t i = 0; i < int32_t(tok.vocab_size()); ++i)
    if (ck.piece(i) != tok.piece(i) || ck.token_type(i) != tok.token_type(i))
      fail("{}: vocabulary mismatch: token {} is '{}' in the checkpoint but '{}' in the tokenizer "
           "{}; {}",
           weights, i, ck.piece(i), tok.piece(i), tok_source, fix);
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string new_run_id() {
  Rng rng(uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) ^ uint64_t(::getpid()));
  return fmt::format("{:016x}", rng.next_u64());
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

class Run {
 public:
  explicit Run(const TrainOptions& o);
  TrainSummary loop(StopSignals& signals);

 private:
  double evaluate();
  void sample(int64_t step);
  void checkpoint(int64_t step);
  void load_donor();
  void open_base();
  void hold_quantized_base(model::ModelOptions& opts);
  void attach_donor();
  CheckpointData checkpoint_data();

  TrainOptions opts_;
  const RunConfig& c_;
  std::string run_id_;
  int64_t start_step_ = 0;
  std::unique_ptr<data::Tokenizer> tok_;
  RunTokens tokens_;
  std::unique_ptr<data::MixtureLoader> loader_;
  std::unique_ptr<data::BatchLoader> val_loader_;
  model::LlamaConfig mc_;
  std::unique_ptr<model::DonorTable> donor_;  // init.donor warm start, else null
  std::unique_ptr<gguf::GgufFile> base_;      // init.from, else null
  uint64_t base_checksum_ = 0;                // model::base_fingerprint of base_, in LoRA runs
  std::unique_ptr<model::QuantizedBase> quantized_;  // base_'s Q8_0 matrices, in LoRA runs
  std::unique_ptr<model::LlamaModel<float>> model_;
  std::unique_ptr<DataParallel> dp_;  // the ranks under mpirun (one process: a pass-through)
  std::vector<float> m_, v_;
  std::vector<int32_t> inputs_, targets_;
  std::unique_ptr<MetricsLog> metrics_;
  std::set<int64_t> inject_steps_;  // GGTRAIN_INJECT_NAN_AT_STEP
  bool inject_grad_ = false;        // GGTRAIN_INJECT_NAN_INTO=grad
};

Run::Run(const TrainOptions& o) : opts_(o), c_(opts_.config) {
  if (!c_.init.from.empty()) open_base();  // a fresh run takes its model section from the file
  c_.validate();
  dp_ = std::make_unique<DataParallel>(world(), c_.train.batch, c_.train.seq_len, c_.train.zero);
  const std::string& dir = opts_.run_dir;
  if (!opts_.resume && latest_step(dir) >= 0)
    fail("{}: this run folder already has checkpoints; use --resume to continue it", dir);
  if (c_.data.corpus.empty() && c_.data.sources.empty())
    fail("config: data.corpus is not set (text or JSONL files, folders or globs)");
  inject_steps_ = injected_steps();
  inject_grad_ = inject_into_grad();
  if (fs::exists(dir) && !fs::is_directory(dir)) fail("{}: the run folder is not a directory", dir);
  std::error_code ec;
  fs::create_directories(dir + "/data", ec);
  if (ec) fail("{}/data: cannot create the run folder: {}", dir, ec.message());
  if (c_.train.threads > 0) omp_set_num_threads(int(c_.train.threads));

  remove_stale_temp_files(dir, opts_.quiet);
  int64_t resume_step = -1;
  if (opts_.resume) {
    resume_step = latest_step(dir);
    if (resume_step < 0) fail("{}: no checkpoint to resume from (weights/latest is missing)", dir);
    RunConfig saved;
    apply_toml(saved, read_latest_meta(dir).config_toml, state_path(dir, resume_step) + " (saved config)");
    check_same_model(c_, saved, dir, resume_step);
  }
  if (!c_.init.donor.empty()) load_donor();  // before its tokenizer: says first when it is no llama model
  tok_ = std::make_unique<data::Tokenizer>(run_tokenizer(dir, c_, opts_.quiet, resume_step));
  if (opts_.resume && c_.train.lora.rank == 0)  // a LoRA checkpoint is an adapter, without vocabulary
    check_same_vocabulary(*tok_,
                          !c_.init.donor.empty()        ? c_.init.donor
                          : !c_.init.from.empty()       ? c_.init.from
                          : c_.data.tokenizer.empty() ? dir + "/tokenizer.model"
                                                      : c_.data.tokenizer,
                          weights_path(dir, resume_step));
  tokens_ = open_run_tokens(c_, dir, *tok_, opts_.resume, opts_.quiet, *dp_);
  for (const auto& t : tokens_.train)
    if (t->vocab() != tok_->vocab_size())
      fail("{}: token file vocabulary {} differs from the tokenizer's {}", t->describe(), t->vocab(), tok_->vocab_size());
  const int64_t T = c_.train.seq_len;
  std::vector<const data::TokenStream*> sources;
  for (const auto& t : tokens_.train) sources.push_back(t.get());
  loader_ = std::make_unique<data::MixtureLoader>(sources, tokens_.weights, T, c_.train.seed);
  if (tokens_.val && tokens_.val->size() > T)
    val_loader_ = std::make_unique<data::BatchLoader>(*tokens_.val, T, c_.train.seed);

  mc_ = c_.llama(tok_->vocab_size());
  if (donor_) attach_donor();
  if (c_.train.lora.rank > 0) mc_.lora = {c_.train.lora.rank, c_.train.lora.alpha, c_.train.lora.targets};
  const auto frozen = mc_.lora.rank > 0 ? model::ParamLayout(mc_.without_lora()).names()  // the whole base
                                        : model::frozen_tensors(model::ParamLayout(mc_), c_.train.freeze, "train.freeze");
  model::ModelOptions model_opts;
  model_opts.recompute = model::recompute_from_name(c_.train.recompute);
  model_opts.precision = model::precision_from_name(c_.train.precision);
  if (mc_.lora.rank > 0) hold_quantized_base(model_opts);
  if (model_opts.precision == model::Precision::kBf16 && !kernels::bf16_gemm_is_native() && !opts_.quiet)
    fmt::print(stderr, "warning: oneDNN finds no AVX512_BF16 on this CPU: bf16 GEMMs are emulated, "
                       "slower than train.precision = \"fp32\"\n");
  model_ = std::make_unique<model::LlamaModel<float>>(mc_, dp_->local_batch(), T, frozen, model_opts);
  dp_->attach(*model_);
  if (donor_) std::copy(donor_->table.begin(), donor_->table.end(), model_->donor_table());
  m_.assign(size_t(model_->n_trainable()), 0.f);
  v_.assign(size_t(model_->n_trainable()), 0.f);
  if (mc_.lora.rank > 0) base_checksum_ = model::base_fingerprint(*base_);
  if (!frozen.empty() && !opts_.quiet) {
    const model::ParamLayout all(mc_);  // model_->layout() lacks what quantized_ holds
    fmt::print(stderr, "frozen: {} of {} tensors ({} of {} parameters train)\n", frozen.size(),
               all.tensors().size(), model_->grad_layout().total(), all.total());
  }
  inputs_.resize(size_t(c_.train.batch * T));
  targets_.resize(size_t(c_.train.batch * T));
  if (opts_.resume) {
    CheckpointMeta meta = load_latest(dir, checkpoint_data());
    start_step_ = meta.step;
    run_id_ = meta.run_id;
    loader_->set_state(meta.loader);
    if (opts_.stop_at > 0 && opts_.stop_at <= start_step_)
      fail("--stop-at {} is not after step {}, where this run resumes", opts_.stop_at, start_step_);
    if (!opts_.quiet) fmt::print(stderr, "resuming run {} at step {}\n", run_id_, start_step_);
  } else {
    run_id_ = new_run_id();
    if (base_) {
      if (base_->get_uint_or("llama.vocab_size", uint64_t(tok_->vocab_size())) != uint64_t(tok_->vocab_size()) ||
          mc_.vocab != tok_->vocab_size())
        fail("{}: the model's vocabulary differs from its tokenizer's {} tokens (init.from)", base_->path(),
             tok_->vocab_size());
      model::load_base_params(*base_, mc_, model_->layout(), model_->params());  // dequantized to F32
      if (mc_.lora.rank > 0) model::init_lora(model_->layout(), model_->params(), c_.train.seed);
      if (!opts_.quiet)
        fmt::print(stderr, "continuing {}: {} parameters as F32 {}, fresh AdamW state\n", base_->path(),
                   model_->layout().total(), mc_.lora.rank > 0 ? "weights" : "master weights");
    } else {
      model::init_params(mc_, model_->layout(), model_->params(), c_.train.seed);
    }
    if (donor_) model::init_lens(*donor_, model_->layout(), model_->params(), c_.train.seed);
    const std::string cfg = to_toml(c_);
    write_file_atomic(dir + "/config.toml", cfg.data(), cfg.size());
  }
  dp_->shard_moments(m_, v_);  // ZeRO-1: keep this rank's slices only
  if (!opts_.quiet && dp_->size() > 1) fmt::print(stderr, "{}\n", dp_->describe());
  metrics_ = std::make_unique<MetricsLog>(dir, opts_.resume ? start_step_ : -1, dp_->root());
}

// init.from: keeps the file mapped for the weights; a fresh run takes the
// model section from it (a resumed one has it in its saved config already).
void Run::open_base() {
  try {
    base_ = std::make_unique<gguf::GgufFile>(c_.init.from);
    if (!opts_.resume) adopt_model_of(opts_.config, *base_);
  } catch (const Error& e) {
    fail("{} (init.from)", e.what());
  }
}

void Run::load_donor() {
  try {
    donor_ = std::make_unique<model::DonorTable>(model::load_donor_table(c_.init.donor));
  } catch (const Error& e) {
    fail("{} (init.donor)", e.what());
  }
}

// The donor's table becomes the frozen input of the lens; the donor's
// vocabulary is the run's (the tokenizer came from the same file).
void Run::attach_donor() {
  if (donor_->vocab != tok_->vocab_size())
    fail("{}: token_embd.weight has {} rows but the donor's vocabulary has {} tokens", c_.init.donor,
         donor_->vocab, tok_->vocab_size());
  mc_.tied = false;  // the donor's table is input only; the new head is trained
  mc_.donor_dim = donor_->dim;
  if (!opts_.quiet)
    fmt::print(stderr, "warm start from {}: frozen embedding [{}, {}], trainable lens.proj [{}, {}], untied head\n",
               c_.init.donor, donor_->vocab, donor_->dim, mc_.d_model, donor_->dim);
}

// A LoRA run keeps the base's Q8_0 matrices as they are in the file (they
// are frozen): the model reads them through `opts`.
void Run::hold_quantized_base(model::ModelOptions& opts) {
  quantized_ = std::make_unique<model::QuantizedBase>(*base_, mc_);
  opts.quantized = quantized_.get();
  if (!opts_.quiet && !quantized_->names().empty())
    fmt::print(stderr, "base: {} Q8_0 matrices stay quantized ({:.1f} MiB)\n", quantized_->names().size(),
               double(quantized_->bytes()) / (1 << 20));
}

CheckpointData Run::checkpoint_data() {
  return {&mc_, &model_->layout(), &model_->grad_layout(), tok_.get(), model_->params(), m_.data(),
          v_.data(), donor_.get(), mc_.lora.rank > 0 ? base_.get() : nullptr, base_checksum_};
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
    sum += model_->evaluate(dp_->local(inputs_.data()), dp_->local(targets_.data()));
  }
  return dp_->mean_over_ranks(sum) / double(n_batches);
}

void Run::sample(int64_t step) {
  std::optional<model::FoldedModel> folded;  // the generator runs a standard model
  if (donor_) folded = model::fold_donor_model(mc_, model_->layout(), model_->params(), donor_->table.data());
  infer::Generator gen(folded ? folded->config : mc_, folded ? folded->params.data() : model_->params(),
                       folded ? nullptr : quantized_.get());
  std::vector<int32_t> prompt{tok_->bos_id()};
  auto ids = gen.generate(prompt, c_.train.sample_tokens, {}, c_.train.seed ^ uint64_t(step), tok_->eos_id());
  if (!opts_.quiet) fmt::print(stderr, "\nsample at step {}: {}\n", step, tok_->decode(ids));
}

void Run::checkpoint(int64_t step) {
  const auto whole = dp_->prepare_checkpoint(step, m_, v_);  // ZeRO-1: rank 0 holds all of m, v meanwhile
  if (!dp_->root()) return;  // rank 0 writes the run's files
  CheckpointMeta meta{step, run_id_, to_toml(c_), loader_->state()};
  try {
    save_checkpoint(opts_.run_dir, meta, checkpoint_data(), c_.checkpoint.keep_last);
  } catch (const Error& e) {
    // save_checkpoint leaves no partial or orphan file and moves `latest`
    // only after both files are complete: say what survived.
    fail("step {}: cannot write the checkpoint: {}; {}{}", step, e.what(),
         last_checkpoint_text(opts_.run_dir),
         latest_step(opts_.run_dir) >= 0 ? " and weights/latest still points to it" : "");
  }
  metrics_->write_plot();
}

TrainSummary Run::loop(StopSignals& signals) {
  const auto& t = c_.train;
  LrSchedule sched{schedule_kind_from_name(t.schedule), t.lr_max, t.lr_min, t.warmup_steps, t.steps, 0.2};
  AdamWConfig adamw{float(t.beta1), float(t.beta2), float(t.eps), float(t.weight_decay)};
  const int64_t tokens_per_step = t.batch * t.seq_len * t.grad_accum;
  const bool tty = ::isatty(2);
  const bool skip_nonfinite = t.on_nonfinite == "skip";
  int64_t nonfinite_in_a_row = 0;
  signals.arm();
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
      loader_->next(t.batch, inputs_.data(), targets_.data());  // the global micro-batch, on every rank
      dp_->begin_micro_batch(k + 1 == t.grad_accum);
      loss += model_->forward(dp_->local(inputs_.data()), dp_->local(targets_.data())) / double(t.grad_accum);
      model_->backward(dp_->loss_share() / float(t.grad_accum));
    }
    loss = dp_->finish_backward(loss, step + 1);  // gradients summed over ranks, loss averaged
    const int64_t done = step + 1;
    const bool inject = inject_steps_.count(done) > 0;
    if (inject && inject_grad_) dp_->inject_nonfinite_gradient();
    const double norm = dp_->grad_norm();
    if (inject && !inject_grad_) loss = NAN;
    const bool finite = std::isfinite(loss) && std::isfinite(norm);
    if (finite) {
      nonfinite_in_a_row = 0;
      dp_->adamw(m_, v_, step + 1, lr, adamw, clip_scale(norm, t.grad_clip));
    } else {
      const std::string what = fmt::format("step {}: loss {:.6g} / gradient norm {:.6g} is not finite", done, loss, norm);
      if (!skip_nonfinite)
        fail("{}; stopping (train.on_nonfinite = \"stop\"); {}. To skip such steps instead, set "
             "train.on_nonfinite = \"skip\"", what, last_checkpoint_text(opts_.run_dir));
      ++nonfinite_in_a_row;
      ++sum.nonfinite_steps;
      if (nonfinite_in_a_row >= t.max_nonfinite)
        fail("{}; {} non-finite steps in a row (train.max_nonfinite = {}); stopping; {}", what,
             nonfinite_in_a_row, t.max_nonfinite, last_checkpoint_text(opts_.run_dir));
      if (!opts_.quiet)
        fmt::print(stderr, "{}{}; update skipped ({} in a row, at most {})\n", tty ? "\n" : "", what,
                   nonfinite_in_a_row, t.max_nonfinite);
    }
    const double dt = now_s() - t0, tps = double(tokens_per_step) / dt;
    train_seconds += dt;
    nlohmann::json record{{"step", done}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm},
                          {"tokens_per_s", tps}, {"elapsed_s", now_s() - t_start}};
    if (!finite) {  // NaN/Inf are written as null; the counters say why
      record["skipped"] = true;
      record["nonfinite_in_a_row"] = nonfinite_in_a_row;
      record["nonfinite_steps"] = sum.nonfinite_steps;
    }
    metrics_->log_step(record);
    if (finite) {  // a skipped step's NaN would hide the run's progress in the summary
      if (sum.first_loss == 0) sum.first_loss = loss;
      sum.last_loss = loss;
    }
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
    if (t.sample_every > 0 && done % t.sample_every == 0 && dp_->root()) sample(done);
    const int sig = int(dp_->max_over_ranks(signals.caught()));  // every rank stops at the same step
    const bool stop_here = (opts_.stop_at > 0 && done == opts_.stop_at) || sig != 0;
    if ((c_.checkpoint.every > 0 && done % c_.checkpoint.every == 0) || done == t.steps || stop_here)
      checkpoint(done);
    if (sig != 0 && done < t.steps) {
      sum.interrupted_by = sig;
      if (dp_->root())  // under mpirun every rank got the signal; one says so
        fmt::print(stderr, "{}ggtrain: {} received: stopped after step {}/{} with checkpoint {}\n"
                   "resume with: ggtrain train --resume --run-dir {}\n",
                   tty && !opts_.quiet ? "\n" : "", signal_name(sig), done, t.steps,
                   weights_path(opts_.run_dir, done), shell_word(opts_.run_dir));
    }
    if (stop_here) break;
  }
  if (tty && !opts_.quiet) fmt::print(stderr, "\n");
  sum.last_step = latest_step(opts_.run_dir);
  sum.final_weights = weights_path(opts_.run_dir, latest_step(opts_.run_dir));
  return sum;
}

}  // namespace

TrainSummary run_training(const TrainOptions& opts) {
  StopSignals signals;  // before any thread of the run exists (MPI's too: they inherit the mask)
  Communicator& comm = world();
  TrainOptions mine = opts;
  mine.quiet = opts.quiet || !comm.root();  // rank 0 alone reports
  // Rank 0 prepares the run folder (tokenizer, token files) before the
  // other ranks open it.
  std::unique_ptr<Run> run;
  try {
    if (comm.root()) run = std::make_unique<Run>(mine);
    comm.barrier();
    if (!comm.root()) run = std::make_unique<Run>(mine);
    return run->loop(signals);
  } catch (const std::exception& e) {
    // Several ranks: end them all here, while `run` (and every buffer an
    // unfinished MPI operation may still write) is alive.
    if (comm.size() == 1) throw;
    const auto* oom = dynamic_cast<const std::bad_alloc*>(&e);
    comm.abort_all(dynamic_cast<const Error*>(&e) ? std::string(e.what())
                   : oom                          ? std::string("out of memory")
                                                  : fmt::format("train: {}", e.what()));
    throw;  // not reached: abort_all ends the process
  }
}

RunConfig saved_run_config(const std::string& run_dir) {
  CheckpointMeta meta = read_latest_meta(run_dir);
  RunConfig c;
  apply_toml(c, meta.config_toml, state_path(run_dir, meta.step) + " (saved config)");
  return c;
}

}  // namespace ggtrain::train
