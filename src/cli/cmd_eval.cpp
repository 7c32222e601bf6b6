#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/token_list.h"
#include "eval/choice_score.h"
#include "eval/choice_tasks.h"
#include "eval/kl_divergence.h"
#include "eval/run_table.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/perplexity.h"
#include "kernels/cross_entropy.h"
#include "tokenizer/tokenizer.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::cli {

namespace {

int eval_tokens(infer::Decoder& dec, const std::string& csv, const std::string& dump) {
  auto ids = parse_token_list(csv);
  dec.eval(ids.data(), int64_t(ids.size()), true);
  const int64_t V = dec.config().vocab;
  if (ids.size() > 1) {
    double nll = 0;  // mean next-token loss over the given tokens
    for (size_t i = 0; i + 1 < ids.size(); ++i) nll += kernels::token_nll(dec.logits() + int64_t(i) * V, V, ids[i + 1]);
    nll /= double(ids.size() - 1);
    fmt::print("{} tokens: mean next-token loss {:.6f}, perplexity {:.4f}\n", ids.size(), nll, std::exp(nll));
  }
  if (!dump.empty()) {
    write_file_atomic(dump, dec.logits(), ids.size() * size_t(V) * sizeof(float));
    fmt::print("wrote logits [{}, {}] to {}\n", ids.size(), V, dump);
  }
  return 0;
}

// Perplexity and bits per byte of a text file (chunks of ctx tokens).
infer::PerplexityResult text_scores(const tokenizer::Tokenizer& tok, infer::Decoder& dec, const std::string& path,
                                    int64_t ctx, bool progress, size_t* n_tokens = nullptr) {
  // As llama.cpp: BOS first and at each chunk start only when the vocabulary asks for it.
  const auto tokens = text_file_tokens(tok, path);
  if (n_tokens) *n_tokens = tokens.size();
  const auto token_bytes = tok.token_byte_lengths();
  auto r = infer::perplexity(
      dec, tokens, ctx, chunk_bos(tok),
      [&](int64_t c, double ppl) {
        if (progress) fmt::print(stderr, "\rchunk {}: perplexity {:.4f}", c + 1, ppl);
      },
      &token_bytes);
  if (progress) fmt::print(stderr, "\n");
  return r;
}

int eval_text(const tokenizer::Tokenizer& tok, infer::Decoder& dec, const std::string& path, int64_t ctx) {
  size_t n_tokens = 0;
  const auto r = text_scores(tok, dec, path, ctx, ::isatty(2), &n_tokens);
  fmt::print("perplexity {:.4f} over {} chunks of {} tokens ({} tokens scored, {} in the text), {:.1f} tokens/s; "
             "{:.4f} bits per byte ({} bytes scored)\n",
             r.ppl, r.chunks, ctx, r.scored, n_tokens, double(r.chunks * ctx) / r.seconds, r.bpb, r.bytes);
  return 0;
}

int print_kl_divergence(const eval::KlDivergence& k, const std::string& what) {
  const std::string report = eval::kl_divergence_report(k);
  if (report.empty())
    fail("eval --kl-divergence: {} scored positions; llama-perplexity prints its statistics from 100 on (a longer "
         "text, or a larger -c)",
         k.count);
  fmt::print("{}, {} positions\n\n{}", what, k.count, report);
  return 0;
}

// --kl-divergence BASE: the model against its base on the text, as
// llama-perplexity --kl-divergence reports it. The base runs with the
// model's context, threads and cache type.
int eval_kl_divergence(InferenceModel& m, const InferenceOptions& o, const std::string& base_path,
                       const std::string& path) {
  InferenceOptions base_options = o;
  base_options.model = base_path;
  base_options.lora = {};
  base_options.ctx = m.decoder.n_ctx();
  InferenceModel base(base_options);
  const auto tokens = text_file_tokens(m.tokenizer, path);
  const bool progress = ::isatty(2);
  const auto k = eval::kl_divergence(m.decoder, base.decoder, tokens, m.decoder.n_ctx(), chunk_bos(m.tokenizer), 0,
                                     [&](int64_t c, const eval::KlDivergence& sums) {
                                       if (progress)
                                         fmt::print(stderr, "\rchunk {}: mean KLD {:.6f}", c + 1,
                                                    sums.sum_kld / double(sums.count));
                                     });
  if (progress) fmt::print(stderr, "\n");
  return print_kl_divergence(k, fmt::format("{} against {} on {}: {} chunks of {} tokens", o.model, base_path, path,
                                            k.chunks, m.decoder.n_ctx()));
}

// --kl-divergence BASE.kld: the model against llama-perplexity's base file
// (its tokens and context).
int eval_kl_divergence_file(InferenceModel& m, const InferenceOptions& o, const std::string& base_path) {
  const auto k = eval::kl_divergence_from_base(m.decoder, base_path, chunk_bos(m.tokenizer));
  return print_kl_divergence(k, fmt::format("{} against the base file {}: {} chunks", o.model, base_path, k.chunks));
}

struct TaskOptions {
  std::string path, format;
  int64_t count = 0;
  bool json = false;
};

nlohmann::json choice_json(const eval::ChoiceResult& r) {
  auto tasks = nlohmann::json::array();
  for (const auto& t : r.tasks)
    tasks.push_back({{"index", t.index},
                     {"gold", t.gold},
                     {"chosen", t.chosen_norm},
                     {"chosen_sum", t.chosen_sum},
                     {"logprob", t.logprob},
                     {"scored_tokens", t.scored}});
  return {{"tasks", r.tasks.size()},
          {"acc", r.acc},
          {"acc_stderr", r.acc_stderr},
          {"acc_norm", r.acc_norm},
          {"acc_norm_stderr", r.acc_norm_stderr},
          {"gold_logprob", r.gold_logprob},
          {"seconds", r.seconds},
          {"per_task", std::move(tasks)}};
}

std::vector<eval::ChoiceTask> read_tasks(const TaskOptions& o) {
  const auto format = eval::task_format_named(o.format, o.path);
  return eval::draw_tasks(eval::read_choice_tasks(o.path, format), o.count, format);
}

eval::ChoiceResult task_scores(const tokenizer::Tokenizer& tok, infer::Decoder& dec, const TaskOptions& o,
                               const std::vector<eval::ChoiceTask>& tasks, bool progress) {
  size_t done = 0;
  eval::ChoiceResult r;
  try {
    r = eval::score_choice_tasks(dec, tok, tasks, [&](const eval::TaskScore&, double acc_norm) {
      if (progress) fmt::print(stderr, "\rtask {}/{}: acc_norm {:.2f}%", ++done, tasks.size(), 100 * acc_norm);
    });
  } catch (const Error& e) {
    fail("{}: {}", o.path, e.what());  // the scorer names the task, not its file
  }
  if (progress) fmt::print(stderr, "\n");
  return r;
}

int eval_task(const tokenizer::Tokenizer& tok, infer::Decoder& dec, const TaskOptions& o) {
  const auto r = task_scores(tok, dec, o, read_tasks(o), ::isatty(2) && !o.json);
  if (o.json) {
    fmt::print("{}\n", choice_json(r).dump());
    return 0;
  }
  fmt::print("{}: acc_norm {:.2f}% +/- {:.2f}, acc {:.2f}% +/- {:.2f} over {} tasks, {:.2f} tasks/s\n", o.path,
             100 * r.acc_norm, 100 * r.acc_norm_stderr, 100 * r.acc, 100 * r.acc_stderr, r.tasks.size(),
             double(r.tasks.size()) / r.seconds);
  return 0;
}

// Every weights/step_N.gguf of a run, scored on --text and/or --task, into
// RUN/eval.csv, eval.json and charts.
int eval_run(const std::string& run_dir, InferenceOptions model, const std::string& text, const TaskOptions& task) {
  if (text.empty() && task.path.empty()) fail("eval --run: give --text FILE, --task FILE or both");
  const auto steps = train::checkpoint_steps(run_dir);
  if (steps.empty()) fail("{}: no weights/step_N.gguf checkpoints to evaluate", run_dir);
  const auto tasks = task.path.empty() ? std::vector<eval::ChoiceTask>{} : read_tasks(task);
  // A LoRA run's checkpoints are adapters: each is applied to the base the
  // run recorded (init.from), or to -m BASE when the base has moved.
  const train::RunConfig run = train::saved_run_config(run_dir);
  const bool adapters = run.train.lora.rank > 0;
  if (!adapters && !model.model.empty())
    fail("eval --run {}: its checkpoints are whole models; -m names a base only for a LoRA run", run_dir);
  const std::string base = model.model.empty() ? run.init.from : model.model;
  if (adapters && model.model.empty() && !std::filesystem::exists(base))
    fail("eval --run {}: its base, init.from = \"{}\" (as the run was given it), is not there from here; name it with "
         "-m BASE",
         run_dir, base);
  if (adapters) fmt::print("{}: LoRA adapters, each applied to {}\n", run_dir, base);
  std::vector<eval::CheckpointScores> rows;
  for (int64_t step : steps) {
    model.model = adapters ? base : train::weights_path(run_dir, step);
    if (adapters) model.lora.path = train::weights_path(run_dir, step);
    InferenceModel m(model);
    eval::CheckpointScores row;
    row.step = step;
    row.file = fmt::format("weights/step_{}.gguf", step);
    if (!text.empty()) {
      const auto r = text_scores(m.tokenizer, m.decoder, text, m.decoder.n_ctx(), false);
      row.ppl = r.ppl;
      row.bpb = r.bpb;
    }
    if (!tasks.empty()) {
      const auto r = task_scores(m.tokenizer, m.decoder, task, tasks, false);
      row.acc = r.acc;
      row.acc_norm = r.acc_norm;
      row.gold_logprob = r.gold_logprob;
    }
    fmt::print("step {}: {}{}\n", step,
               text.empty() ? "" : fmt::format("perplexity {:.4f}, {:.4f} bits per byte", row.ppl, row.bpb),
               tasks.empty() ? ""
                             : fmt::format("{}acc_norm {:.2f}%, acc {:.2f}%", text.empty() ? "" : "; ",
                                           100 * row.acc_norm, 100 * row.acc));
    rows.push_back(row);
  }
  const auto written = eval::write_run_scores(run_dir, rows, text, task.path);
  fmt::print("wrote {}\n", fmt::join(written, ", "));
  return 0;
}

}  // namespace

Runner add_eval_command(CLI::App& app) {
  struct Opts {
    InferenceOptions model;
    std::string tokens, text, dump_logits, run, kl_base, kl_base_out;
    TaskOptions task;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "eval", "Logits of given tokens, perplexity of a text, or accuracy on multiple-choice tasks, with a GGUF model "
              "or every checkpoint of a run");
  add_inference_options(cmd, o->model, false);  // -c: the chunk length of --text
  auto* tokens = cmd->add_option("--tokens", o->tokens, "Comma-separated token ids (evaluated as given)");
  auto* text = cmd->add_option("--text", o->text, "Text file: perplexity as llama.cpp's perplexity tool");
  auto* task = cmd->add_option("--task", o->task.path,
                               "Multiple-choice task file: accuracy as llama.cpp's llama-perplexity --hellaswag, "
                               "--winogrande or --multiple-choice scores it");
  auto* run = cmd->add_option("--run", o->run,
                              "A run folder: every weights/step_N.gguf on --text and/or --task, into RUN/eval.csv, "
                              "eval.json and charts (a LoRA run's adapters on its init.from, or on -m BASE)");
  tokens->excludes(text);
  task->excludes(tokens);
  run->excludes(tokens);
  cmd->add_option("--task-format", o->task.format,
                  "hellaswag (llama-perplexity's six-line form), winogrande (its CSV), multiple-choice (its binary "
                  "file) or jsonl ({\"context\", \"endings\", \"label\"} per line); default: jsonl for .jsonl, "
                  "winogrande for .csv, multiple-choice for .bin")
      ->needs(task);
  cmd->add_option("--tasks", o->task.count,
                  "Score N tasks drawn as llama-perplexity --hellaswag-tasks / --winogrande-tasks / "
                  "--multiple-choice-tasks N draw them (default: all)")
      ->needs(task);
  cmd->add_flag("--json", o->task.json, "With --task: print one JSON object (accuracies, per task the choices)")
      ->needs(task)
      ->excludes(run);
  cmd->add_option("--dump-logits", o->dump_logits, "With --tokens: write float32 logits [n_tokens, vocab]");
  cmd->add_option("--kl-divergence", o->kl_base,
                  "The KL divergence, top-token agreement and probability changes of the model against this base: a "
                  "GGUF (its F32/F16 original; with --text) or a base file of llama-perplexity --kl-divergence-base "
                  "(its own tokens), as llama-perplexity --kl-divergence reports them")
      ->excludes(run);
  cmd->add_option("--kl-divergence-base", o->kl_base_out,
                  "With --text: write the model's log-probabilities as llama-perplexity --kl-divergence-base does, "
                  "for --kl-divergence here or in llama-perplexity")
      ->needs(text)
      ->excludes(run);
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    if (!o->run.empty()) {
      if (!o->model.lora.path.empty()) fail("eval --run: a LoRA run's adapters are its checkpoints; drop --lora");
      return eval_run(o->run, o->model, o->text, o->task);
    }
    if (o->model.model.empty()) fail("eval: -m MODEL.gguf (or --run RUN_DIR) is required");
    if (!o->kl_base.empty() && eval::is_kl_divergence_base(o->kl_base)) {
      if (!o->text.empty() || !o->tokens.empty() || !o->task.path.empty())
        fail("eval --kl-divergence {}: a llama-perplexity base file carries its own tokens; leave out --text, "
             "--tokens and --task",
             o->kl_base);
      InferenceModel m(o->model);
      return eval_kl_divergence_file(m, o->model, o->kl_base);
    }
    if (int(!o->tokens.empty()) + int(!o->text.empty()) + int(!o->task.path.empty()) != 1)
      fail("eval: give exactly one of --tokens, --text and --task");
    InferenceModel m(o->model);
    if (!o->tokens.empty()) return eval_tokens(m.decoder, o->tokens, o->dump_logits);
    if (!o->task.path.empty()) return eval_task(m.tokenizer, m.decoder, o->task);
    if (!o->kl_base.empty()) return eval_kl_divergence(m, o->model, o->kl_base, o->text);
    if (!o->kl_base_out.empty()) {
      eval::write_kl_divergence_base(m.decoder, text_file_tokens(m.tokenizer, o->text), m.decoder.n_ctx(),
                                     chunk_bos(m.tokenizer), 0, o->kl_base_out);
      fmt::print("wrote {}: the log-probabilities of {} on {} in chunks of {} tokens, as llama-perplexity "
                 "--kl-divergence-base writes them\n",
                 o->kl_base_out, o->model.model, o->text, m.decoder.n_ctx());
      return 0;
    }
    m.decoder.warmup();  // perplexity reports tokens/s
    return eval_text(m.tokenizer, m.decoder, o->text, m.decoder.n_ctx());
  };
}

}  // namespace ggtrain::cli
