// The bad-input table of docs/bad-inputs.md: each row is one case here. The
// CLI must exit 1 (never crash) with a message that contains the row's key
// words, and the message must be exactly the one the table shows (temporary
// paths written as $T, the fixtures of tests/fixtures as $FIXTURES, a port
// the system gave as $PORT).
//
// To print the table rows for the current messages:
//   GGTRAIN_BAD_INPUTS_DOC=1 build/tests/ggtrain_reliability_tests --gtest_filter='BadInputs/*' | grep '^| `'
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>

#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "quant/gguf_floats.h"
#include "quant/importance_matrix.h"
#include "support/cli_runner.h"
#include "support/compress.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using namespace ggtrain::test_support;
namespace fs = std::filesystem;

namespace {

// The file's last byte (the last tensor's data) with its lowest bit flipped.
void flip_last_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  const char b = char(f.get());
  f.seekp(-1, std::ios::end);
  f.put(char(b ^ 1));
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
}

// What a case works with: its own temporary folder, a corpus, and (made on
// first use) a tiny run stopped at its step-2 checkpoint.
class Env {
 public:
  explicit Env(TempDir& tmp) : tmp_(tmp) { write_synthetic_corpus(corpus(), 600); }
  std::string t(const std::string& rel) const { return tmp_ / rel; }
  std::string corpus() const { return t("corpus.txt"); }
  std::string bin() const { return GGTRAIN_BIN; }
  // `ggtrain train --preset tiny` on the corpus, 4 steps, + sets.
  std::vector<std::string> fresh(std::vector<std::string> sets = {}, const std::string& run = "run") const {
    sets.insert(sets.begin(), "train.steps=4");
    return tiny_train_args(bin(), t(run), corpus(), sets);
  }
  std::vector<std::string> resume(const std::vector<std::string>& sets = {}, const std::string& run = "run") const {
    return resume_args(bin(), t(run), sets);
  }
  // A run with its latest checkpoint at step 2 (of 4), + sets.
  std::string base_run(const std::string& run = "run", std::vector<std::string> sets = {}) const {
    sets.push_back("checkpoint.every=2");
    auto a = fresh(sets, run);
    a.insert(a.end(), {"--stop-at", "2"});
    const auto r = run_cli(a, t(run + ".out"));
    if (r.status != 0 || train::latest_step(t(run)) != 2) throw std::runtime_error("base run failed: " + r.output);
    return t(run);
  }
  std::string toml(const std::string& text) const {
    spit(t("bad.toml"), text);
    return t("bad.toml");
  }
  std::vector<std::string> with_config(const std::string& text) const {
    auto a = fresh();
    a.insert(a.end(), {"--config", toml(text)});
    return a;
  }
  // A chat finetune of the step-2 checkpoint of base_run() on chat.jsonl
  // (`records`, one per line), 2 steps, + sets.
  std::vector<std::string> chat(const std::string& records, std::vector<std::string> sets = {}) const {
    spit(t("chat.jsonl"), records);
    const std::string base = base_run("base") + "/weights/step_2.gguf";
    sets.insert(sets.begin(), {"train.steps=2", "train.seq_len=32", "init.from=" + base, "data.format=chat"});
    return tiny_train_args(bin(), t("chat_run"), t("chat.jsonl"), sets);
  }
  // A LoRA adapter (rank 2, 2 steps) on the step-2 checkpoint of base_run("base").
  std::string lora_adapter() const {
    const std::string base = base_run("base") + "/weights/step_2.gguf";
    auto a = tiny_train_args(bin(), t("lora"), corpus(), {"train.steps=2", "init.from=" + base, "train.lora.rank=2"});
    const auto r = run_cli(a, t("lora.out"));
    if (r.status != 0) throw std::runtime_error("LoRA run failed: " + r.output);
    return train::weights_path(t("lora"), 2);
  }
  CliOptions opts;  // environment for the CLI of this case

 private:
  TempDir& tmp_;
};

struct Case {
  std::string id;  // test name; first column of the table
  std::string input;  // the bad input, in words
  std::function<std::vector<std::string>(Env&)> setup;  // makes files, returns the command
  std::vector<std::string> keywords;  // the message must contain each
  int status = 1;  // expected exit status
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.id; }

// A GGUF copy of `in` with metadata key `key` set to `value` or (value
// empty) without tensor `drop`.
void rewrite_gguf(const std::string& in, const std::string& out, const std::string& key, const std::string& value,
                  const std::string& drop) {
  gguf::GgufFile f(in);
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, k == key ? gguf::Value::str(value) : v);
  std::vector<std::vector<float>> keep;
  for (const auto& ti : f.tensors()) {
    if (ti.name == drop) continue;
    keep.push_back(quant::tensor_floats(f, ti));
    quant::add_float_tensor(w, ti.name, ti.type, ti.shape(), keep.back().data());
  }
  w.write(out + ".new");
  fs::rename(out + ".new", out);
}

// A copy of `in` with `extra` applied to the writer after the metadata and
// before the tensors (a key replaced, a tensor added first).
std::string gguf_with(const std::string& in, const std::string& out,
                      const std::function<void(gguf::GgufWriter&)>& extra) {
  gguf::GgufFile f(in);
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  extra(w);
  std::vector<std::vector<float>> keep;
  for (const auto& ti : f.tensors()) {
    keep.push_back(quant::tensor_floats(f, ti));
    quant::add_float_tensor(w, ti.name, ti.type, ti.shape(), keep.back().data());
  }
  w.write(out);
  return out;
}

// A copy of `in` without metadata key `key` and without tensor `tensor`
// (either may be empty).
std::string gguf_without(const std::string& in, const std::string& out, const std::string& key,
                         const std::string& tensor) {
  gguf::GgufFile f(in);
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != key) w.set(k, v);
  std::vector<std::vector<float>> keep;
  for (const auto& ti : f.tensors()) {
    if (ti.name == tensor) continue;
    keep.push_back(quant::tensor_floats(f, ti));
    quant::add_float_tensor(w, ti.name, ti.type, ti.shape(), keep.back().data());
  }
  w.write(out);
  return out;
}

// The step-2 checkpoint of a tiny qwen35 run: Gated DeltaNet layer 0,
// gated attention layer 1.
std::string qwen35_checkpoint(Env& e) {
  return e.base_run("qwen35", {"model.arch=qwen35", "model.attention_layers=1", "model.rope_dim=8",
                               "model.ssm_state_size=16", "model.ssm_group_count=2", "model.ssm_time_step_rank=4"}) +
         "/weights/step_2.gguf";
}

std::string qwen3moe_checkpoint(Env& e) {
  return e.base_run("qwen3moe",
                    {"model.arch=qwen3moe", "model.n_experts=4", "model.n_experts_used=2", "model.d_ff_expert=32"}) +
         "/weights/step_2.gguf";
}

// The step-2 checkpoint with a rope_freqs.weight of these values (tiny: 8).
std::string with_rope_freqs(Env& e, std::vector<float> factors) {
  auto keep = std::make_shared<std::vector<float>>(std::move(factors));
  return gguf_with(e.base_run() + "/weights/step_2.gguf", e.t("l3.gguf"), [keep](gguf::GgufWriter& w) {
    quant::add_float_tensor(w, "rope_freqs.weight", gguf::TensorType::F32, {keep->size()}, keep->data());
  });
}

// A port on 127.0.0.1 that a socket of this process listens on for the
// rest of the test run (left open on purpose: the case runs after this).
int busy_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 0;
  return ntohs(a.sin_port);
}

std::vector<Case> cases() {
  using A = std::vector<std::string>;
  std::vector<Case> c;
  // --- the corpus
  c.push_back({"missing_corpus",
               "`data.corpus` names no file",
               [](Env& e) {
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("missing.txt");
                 return a;
               },
               {"missing.txt", "data.corpus", "matches no file"}});
  c.push_back({"empty_corpus",
               "`data.corpus` is an empty file",
               [](Env& e) {
                 spit(e.t("empty.txt"), "");
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("empty.txt");
                 return a;
               },
               {"empty.txt", "data.corpus", "no text"}});
  c.push_back({"blank_corpus",
               "`data.corpus` has only blank lines",
               [](Env& e) {
                 spit(e.t("blank.txt"), "\n  \n\t\n");
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("blank.txt");
                 return a;
               },
               {"blank.txt", "data.corpus", "no text"}});
  c.push_back({"corpus_is_an_empty_folder",
               "`data.corpus` is a folder with no file in it",
               [](Env& e) {
                 fs::create_directories(e.t("dir/sub"));
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("dir");
                 return a;
               },
               {"dir", "data.corpus", "matches no file"}});
  c.push_back({"glob_matches_nothing",
               "`data.corpus` is a glob that matches no file",
               [](Env& e) {
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("shards/*.jsonl.gz");
                 return a;
               },
               {"shards/*.jsonl.gz", "data.corpus", "matches no file"}});
  c.push_back({"corpus_invalid_utf8",
               "a corpus file with a byte that is not UTF-8",
               [](Env& e) {
                 spit(e.t("latin1.txt"), "good line\ncaf\xe9 au lait\n");
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("latin1.txt");
                 return a;
               },
               {"latin1.txt", "UTF-8", "byte 13"}});
  c.push_back({"jsonl_not_json",
               "a JSONL line that is not JSON",
               [](Env& e) {
                 spit(e.t("docs.jsonl"), "{\"text\": \"one\"}\n{\"text\": \"two\"\n");
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("docs.jsonl");
                 return a;
               },
               {"docs.jsonl:2", "JSON"}});
  c.push_back({"jsonl_missing_key",
               "a JSONL record without the `data.text_key` member",
               [](Env& e) {
                 spit(e.t("docs.jsonl"), "{\"text\": \"one\"}\n{\"body\": \"two\"}\n");
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("docs.jsonl");
                 return a;
               },
               {"docs.jsonl:2", "text", "data.text_key"}});
  c.push_back({"truncated_gzip",
               "a `.gz` corpus cut short",
               [](Env& e) {
                 spit(e.t("corpus.txt.gz"), test_support::gzip_of(slurp(e.corpus())).substr(0, 2000));
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("corpus.txt.gz");
                 return a;
               },
               {"corpus.txt.gz", "truncated"}});
  c.push_back({"truncated_zstd",
               "a `.zst` corpus cut short",
               [](Env& e) {
                 spit(e.t("corpus.txt.zst"), test_support::zstd_of(slurp(e.corpus())).substr(0, 2000));
                 auto a = e.fresh();
                 a[8] = "data.corpus=" + e.t("corpus.txt.zst");
                 return a;
               },
               {"corpus.txt.zst", "truncated"}});
  c.push_back({"bad_doc_separator",
               "`data.doc_separator` is not a known separator",
               [](Env& e) { return e.fresh({"data.doc_separator=paragraph"}); },
               {"data.doc_separator", "paragraph"}});
  c.push_back({"bad_file_type",
               "`data.file_type` is not a known file type",
               [](Env& e) { return e.fresh({"data.file_type=xml"}); },
               {"data.file_type", "xml"}});
  c.push_back({"corpus_changed_before_resume",
               "the corpus changed between the run and `--resume`",
               [](Env& e) {
                 e.base_run();
                 spit(e.corpus(), slurp(e.corpus()) + "one more line\n");
                 return e.resume();
               },
               {"manifest.json", "corpus.txt", "size", "cannot resume"}});
  c.push_back({"manifest_not_json",
               "`RUN/data/manifest.json` is not JSON",
               [](Env& e) {
                 e.base_run();
                 spit(e.t("run/data/manifest.json"), "{\"format\": ");
                 return e.resume();
               },
               {"manifest.json", "not a JSON object"}});
  c.push_back({"manifest_huge_count",
               "`RUN/data/manifest.json` names a shard of 2^63 tokens",
               [](Env& e) {
                 e.base_run();
                 std::string m = slurp(e.t("run/data/manifest.json"));
                 const size_t at = m.find("\"train_tokens\": ") + 16;  // the first shard's
                 m.replace(at, m.find(',', at) - at, "9223372036854775000");
                 spit(e.t("run/data/manifest.json"), m);
                 return e.resume();
               },
               {"manifest.json", "train-00000.tok", "implausibly large"}});
  c.push_back({"corpus_not_set",
               "no `data.corpus` at all",
               [](Env& e) { return A{e.bin(), "train", "--preset", "tiny", "--run-dir", e.t("run")}; },
               {"data.corpus", "not set"}});
  c.push_back({"vocab_too_large_for_corpus",
               "`data.vocab_size` larger than the corpus allows",
               [](Env& e) { return e.fresh({"data.vocab_size=5000"}); },
               {"corpus.txt", "Vocabulary size too high", "data.vocab_size = 5000"}});
  c.push_back({"vocab_too_small",
               "`data.vocab_size` below the 256 bytes + 3 specials",
               [](Env& e) { return e.fresh({"data.vocab_size=100"}); },
               {"data.vocab_size", "at least 260"}});
  // --- config keys and values
  c.push_back({"unknown_key_set",
               "unknown key through `--set`",
               [](Env& e) { return e.fresh({"train.lr_maxx=1"}); },
               {"--set", "unknown config key", "train.lr_maxx"}});
  c.push_back({"unknown_key_toml",
               "unknown key in a `--config` file",
               [](Env& e) { return e.with_config("[train]\nwarmup = 3\n"); },
               {"bad.toml", "unknown config key", "train.warmup"}});
  c.push_back({"unknown_section_toml",
               "unknown section in a `--config` file",
               [](Env& e) { return e.with_config("[optim]\nlr = 1\n"); },
               {"bad.toml", "unknown config key", "optim.lr"}});
  c.push_back({"key_outside_section",
               "a key outside any `[section]`",
               [](Env& e) { return e.with_config("steps = 5\n"); },
               {"bad.toml", "steps", "[section]"}});
  c.push_back({"set_without_value",
               "`--set` without `=value`",
               [](Env& e) { return e.fresh({"train.steps"}); },
               {"--set", "train.steps", "section.key=value"}});
  c.push_back({"set_int_not_a_number",
               "`--set train.steps=ten`",
               [](Env& e) { return e.fresh({"train.steps=ten"}); },
               {"train.steps", "must be an integer", "ten"}});
  c.push_back({"set_bool_not_a_bool",
               "`--set model.tied=yes`",
               [](Env& e) { return e.fresh({"model.tied=yes"}); },
               {"model.tied", "true or false", "yes"}});
  c.push_back({"set_float_not_a_number",
               "`--set train.lr_max=fast`",
               [](Env& e) { return e.fresh({"train.lr_max=fast"}); },
               {"train.lr_max", "must be a number", "fast"}});
  c.push_back({"toml_string_for_integer",
               "`steps = \"10\"` (a string) in a config file",
               [](Env& e) { return e.with_config("[train]\nsteps = \"10\"\n"); },
               {"bad.toml", "train.steps", "must be an integer", "string"}});
  c.push_back({"toml_float_for_integer",
               "`batch = 2.5` in a config file",
               [](Env& e) { return e.with_config("[train]\nbatch = 2.5\n"); },
               {"bad.toml", "train.batch", "must be an integer", "2.5"}});
  c.push_back({"toml_integer_for_bool",
               "`tied = 1` in a config file",
               [](Env& e) { return e.with_config("[model]\ntied = 1\n"); },
               {"bad.toml", "model.tied", "true or false", "integer 1"}});
  c.push_back({"toml_integer_for_string",
               "`corpus = 5` in a config file",
               [](Env& e) { return e.with_config("[data]\ncorpus = 5\n"); },
               {"bad.toml", "data.corpus", "must be an array of strings", "integer 5"}});
  c.push_back({"toml_array_for_integer",
               "`steps = [1, 2]` in a config file",
               [](Env& e) { return e.with_config("[train]\nsteps = [1, 2]\n"); },
               {"bad.toml", "train.steps", "array"}});
  c.push_back({"toml_syntax_error",
               "a config file that is not TOML",
               [](Env& e) { return e.with_config("[train\nsteps = 3\n"); },
               {"bad.toml:1:", "invalid TOML"}});
  c.push_back({"toml_bad_table_header",
               "`[=model]` (fuzz finding: assertion in toml++)",
               [](Env& e) { return e.with_config("[=model]\nd_model = 8\n"); },
               {"bad.toml:1:2", "invalid TOML", "'='"}});
  c.push_back({"toml_non_ascii_key",
               "a non-ASCII key (fuzz finding: UB in toml++)",
               [](Env& e) { return e.with_config("[train]\nst\xc3\xa9ps = 5\n"); },
               {"bad.toml:2:3", "non-ASCII"}});
  c.push_back({"toml_non_ascii_after_quote",
               "a quote then non-ASCII after a value (fuzz finding: UB in toml++)",
               [](Env& e) { return e.with_config("[model]\nrope_freq_base = 100''\xce\x88\n"); },
               {"bad.toml:2:23", "non-ASCII"}});
  c.push_back({"export_unknown_type",
               "`export --type q3_k_m` (a type ggtrain does not write)",
               [](Env& e) {
                 return A{e.bin(),         "export", e.base_run() + "/weights/step_2.gguf",
                          e.t("out.gguf"), "--type", "q3_k_m"};
               },
               {"--type q3_k_m", "q4_k_m"}});
  c.push_back({"export_type_misspelt",
               "`export --type q8` (q8_0 misspelt)",
               [](Env& e) {
                 return A{e.bin(), "export", e.base_run() + "/weights/step_2.gguf", e.t("out.gguf"), "--type", "q8"};
               },
               {"--type q8 (did you mean 'q8_0'?)"}});
  c.push_back({"export_imatrix_other_model",
               "`export --imatrix` given an importance matrix of another model (a matrix's column count differs)",
               [](Env& e) {
                 quant::ImportanceMatrix m;
                 m.datasets = {"other.txt"};
                 m.entries["blk.0.attn_q.weight"] = {std::vector<float>(7, 1.0f), {1}};
                 quant::write_importance_matrix(m, e.t("other.imatrix.gguf"));
                 return A{e.bin(),
                          "export",
                          train::weights_path(e.base_run(), 2),
                          e.t("out.gguf"),
                          "--type",
                          "q4_0",
                          "--imatrix",
                          e.t("other.imatrix.gguf")};
               },
               {"other.imatrix.gguf", "blk.0.attn_q.weight", "has 7 values", "for another model"}});
  c.push_back({"export_imatrix_truncated",
               "`export --imatrix` given a legacy .dat importance matrix cut short",
               [](Env& e) {
                 const int32_t header[2] = {1, 19};
                 std::ofstream(e.t("cut.dat"), std::ios::binary)
                     .write(reinterpret_cast<const char*>(header), sizeof header)
                     .write("blk.0", 5);
                 return A{e.bin(),         "export",      train::weights_path(e.base_run(), 2),
                          e.t("out.gguf"), "--type",      "q4_0",
                          "--imatrix",     e.t("cut.dat")};
               },
               {"cut.dat", "truncated at byte 8", "an entry's name", "not a whole importance matrix"}});
  c.push_back({"export_imatrix_not_imatrix",
               "`export --imatrix` given a model GGUF instead of an importance matrix",
               [](Env& e) {
                 const std::string w = train::weights_path(e.base_run(), 2);
                 return A{e.bin(), "export", w, e.t("out.gguf"), "--type", "q4_0", "--imatrix", w};
               },
               {"step_2.gguf", "not an importance matrix", "ggtrain imatrix"}});
  c.push_back({"export_imatrix_float_type",
               "`export --type f16 --imatrix` (an importance matrix only steers quantized types)",
               [](Env& e) {
                 const std::string w = train::weights_path(e.base_run(), 2);
                 return A{e.bin(), "export", w, e.t("out.gguf"), "--type", "f16", "--imatrix", e.t("m.gguf")};
               },
               {"--imatrix applies to a quantized --type", "not f16"}});
  c.push_back({"imatrix_chunk_too_short",
               "`imatrix -c 8` (llama-imatrix skips products of fewer than 16 rows)",
               [](Env& e) {
                 return A{e.bin(), "imatrix", "-m", train::weights_path(e.base_run(), 2), "-f", e.corpus(), "-c", "8"};
               },
               {"-c 8 is too short", "at least 16 tokens"}});
  c.push_back({"kl_base_file_truncated",
               "`eval --kl-divergence BASE.kld` with a llama-perplexity base file cut short",
               [](Env& e) {
                 const std::string m = train::weights_path(e.base_run(), 2);
                 const int32_t header[3] = {8, int32_t(model::config_from_gguf(gguf::GgufFile(m)).vocab), 2};
                 std::ofstream out(e.t("cut.kld"), std::ios::binary);
                 out.write("_logits_", 8);
                 out.write(reinterpret_cast<const char*>(header), sizeof header);
                 out.write(std::string(100, '\0').data(), 100);
                 out.close();
                 return A{e.bin(), "eval", "-m", m, "--kl-divergence", e.t("cut.kld")};
               },
               {"cut.kld", "bytes where its header", "cut"}});
  c.push_back({"kl_base_file_other_vocabulary",
               "`eval --kl-divergence BASE.kld` whose base has another vocabulary than the model",
               [](Env& e) {
                 const int32_t header[3] = {8, 7, 2};
                 std::ofstream out(e.t("other.kld"), std::ios::binary);
                 out.write("_logits_", 8);
                 out.write(reinterpret_cast<const char*>(header), sizeof header);
                 out.close();
                 return A{e.bin(),           "eval",          "-m", train::weights_path(e.base_run(), 2),
                          "--kl-divergence", e.t("other.kld")};
               },
               {"other.kld", "vocabulary of 7 tokens", "its own base"}});
  c.push_back({"imatrix_combine_other_models",
               "`imatrix --in-file A --in-file B` where B's entries have another shape (another model's)",
               [](Env& e) {
                 quant::ImportanceMatrix a, b;
                 a.entries["blk.0.attn_q.weight"] = {std::vector<float>(64, 1.0f), {8}};
                 b.entries["blk.0.attn_q.weight"] = {std::vector<float>(256, 1.0f), {8}};
                 quant::write_importance_matrix(a, e.t("a.gguf"));
                 quant::write_importance_matrix(b, e.t("b.gguf"));
                 return A{e.bin(), "imatrix", "--in-file", e.t("a.gguf"), "--in-file", e.t("b.gguf"), "-c", "64"};
               },
               {"b.gguf", "blk.0.attn_q.weight", "other models"}});
  c.push_back({"imatrix_combine_with_text",
               "`imatrix --in-file A -f TEXT` (collecting on top of a matrix)",
               [](Env& e) {
                 quant::ImportanceMatrix a;
                 a.entries["blk.0.attn_q.weight"] = {std::vector<float>(64, 1.0f), {8}};
                 quant::write_importance_matrix(a, e.t("a.gguf"));
                 return A{e.bin(), "imatrix", "--in-file", e.t("a.gguf"), "-f", e.corpus()};
               },
               {"--in-file", "without -f", "collect, then combine"}});
  // --- files of the wrong kind, and typing mistakes (usage errors exit 2)
  c.push_back({"model_is_a_lora_adapter",
               "`generate -m` given a LoRA adapter instead of a model",
               [](Env& e) { return A{e.bin(), "generate", "-m", e.lora_adapter(), "-p", "a"}; },
               {"lora/weights/step_2.gguf", "is a LoRA adapter, not a model", "--lora"}});
  c.push_back({"ollama_name_missing",
               "`generate -m ollama:NAME` with a name ollama's store does not hold",
               [](Env& e) {
                 fs::create_directories(e.t("models/manifests/registry.ollama.ai/library/tiny"));
                 std::ofstream(e.t("models/manifests/registry.ollama.ai/library/tiny/latest")) << "{}";
                 e.opts.env = {{"OLLAMA_MODELS", e.t("models")}};
                 return A{e.bin(), "generate", "-m", "ollama:llama3.2", "-p", "a"};
               },
               {"ollama:llama3.2", "no such model", "OLLAMA_MODELS", "it holds tiny:latest"}});
  c.push_back({"ollama_init_from_missing",
               "`init.from = ollama:NAME` with a name ollama's store does not hold",
               [](Env& e) {
                 e.opts.env = {{"OLLAMA_MODELS", e.t("empty-store")}};
                 return e.fresh({"init.from=ollama:qwen3:0.6b"});
               },
               {"init.from", "ollama:qwen3:0.6b", "no such model", "it holds none"}});
  c.push_back({"model_truncated",
               "`generate -m` given a model file cut short (an interrupted copy)",
               [](Env& e) {
                 const std::string w = e.t("cut.gguf");
                 fs::copy_file(train::weights_path(e.base_run(), 2), w);
                 fs::resize_file(w, fs::file_size(w) * 3 / 5);
                 return A{e.bin(), "generate", "-m", w, "-p", "a"};
               },
               {"cut.gguf", "truncated", "copy it again", "data section"}});
  // --- the dashboard
  c.push_back({"serve_port_in_use",
               "`ggtrain serve` on a port another program listens on",
               [](Env& e) {
                 return A{e.bin(), "serve", e.base_run(), "--port", std::to_string(busy_port())};
               },
               {"port", "127.0.0.1", "in use", "--port"}});
  c.push_back({"serve_not_a_run_folder",
               "`ggtrain serve` (or `report`) given a folder that no run wrote",
               [](Env& e) {
                 fs::create_directories(e.t("photos"));
                 return A{e.bin(), "report", e.t("photos")};
               },
               {"photos", "not a run folder", "ggtrain train"}});
  c.push_back({"export_output_folder_missing",
               "`export IN OUT` where OUT's folder does not exist",
               [](Env& e) {
                 return A{e.bin(),  "export", train::weights_path(e.base_run(), 2), e.t("no/such/dir/out.gguf"),
                          "--type", "q8_0"};
               },
               {"no/such/dir", "does not exist", "mkdir -p"}});
  c.push_back(
      {"merge_lora_other_base",
       "`export --merge-lora` with a base of another shape than the adapter's",
       [](Env& e) {
         const std::string adapter = e.lora_adapter();
         auto a = e.fresh({"model.d_model=32", "model.n_heads=2", "model.n_kv_heads=1", "checkpoint.every=2"}, "other");
         a.insert(a.end(), {"--stop-at", "2"});
         if (run_cli(a, e.t("other.out")).status != 0) throw std::runtime_error("other base failed");
         return A{e.bin(), "export", "--merge-lora", train::weights_path(e.t("other"), 2), adapter, e.t("m.gguf")};
       },
       {"lora/weights/step_2.gguf", "trained on another base model", "base/weights/step_2.gguf", "give that one"}});
  c.push_back({"merge_lora_adapter_as_base",
               "`export --merge-lora ADAPTER ADAPTER OUT` (the adapter given as the base)",
               [](Env& e) {
                 const std::string adapter = e.lora_adapter();
                 return A{e.bin(), "export", "--merge-lora", adapter, adapter, e.t("m.gguf")};
               },
               {"is a LoRA adapter, not a model", "export --merge-lora BASE"}});
  c.push_back({"eval_run_base_moved",
               "`eval --run` of a LoRA run whose recorded `init.from` is gone",
               [](Env& e) {
                 e.lora_adapter();
                 std::filesystem::rename(e.t("base"), e.t("base-moved"));
                 return A{e.bin(), "eval", "--run", e.t("lora"), "--text", e.corpus()};
               },
               {"eval --run", "init.from", "is not there from here", "-m BASE"}});
  c.push_back({"eval_run_base_for_whole_models",
               "`eval --run RUN -m MODEL` where the run's checkpoints are whole models",
               [](Env& e) {
                 const std::string run = e.base_run();
                 return A{e.bin(), "eval", "--run", run, "-m", run + "/weights/step_2.gguf", "--text", e.corpus()};
               },
               {"its checkpoints are whole models", "-m names a base only for a LoRA run"}});
  c.push_back({"eval_text_binary",
               "`eval --text` given a binary file (a GGUF)",
               [](Env& e) {
                 const std::string w = train::weights_path(e.base_run(), 2);
                 return A{e.bin(), "eval", "-m", w, "--text", w};
               },
               {"step_2.gguf", "not a text file", "UTF-8"}});
  c.push_back({"train_qat_unknown_type",
               "`train.qat = q3_k` (a type export does not write)",
               [](Env& e) { return e.fresh({"train.qat=q3_k"}); },
               {"train.qat = \"q3_k\"", "not a file type export writes", "q4_k_m"}});
  c.push_back({"train_qat_imatrix_without_qat",
               "`train.qat_imatrix` without `train.qat`",
               [](Env& e) { return e.fresh({"train.qat_imatrix=" + e.t("imatrix.gguf")}); },
               {"train.qat_imatrix is set but train.qat is not", "train.qat = \"q4_k_m\""}});
  c.push_back({"train_qat_imatrix_other_model",
               "`train.qat_imatrix` made for another model (an entry of another width)",
               [](Env& e) {
                 quant::ImportanceMatrix m;
                 m.datasets = {"other.txt"};
                 m.chunk_count = 1;
                 m.chunk_size = 64;
                 m.entries["blk.0.attn_q.weight"] = {std::vector<float>(7, 1.0f), {1}};
                 quant::write_importance_matrix(m, e.t("other.imatrix.gguf"));
                 return e.fresh({"train.qat=q4_0", "train.qat_imatrix=" + e.t("other.imatrix.gguf")});
               },
               {"other.imatrix.gguf", "blk.0.attn_q.weight", "has 7 values", "for another model"}});
  c.push_back({"train_qat_every_zero",
               "`train.qat_every = 0`",
               [](Env& e) {
                 return e.fresh({"train.qat=q4_0", "train.qat_every=0"});
               },
               {"train.qat_every must be at least 1", "got 0"}});
  c.push_back({"train_qat_changed_on_resume",
               "`--resume --set train.qat=q8_0` of a run that saved Q4_0 rounding errors (train.qat_every = 3)",
               [](Env& e) {
                 e.base_run("qat", {"train.qat=q4_0", "train.qat_every=3"});
                 return e.resume({"train.qat=q8_0"}, "qat");
               },
               {"step_2.gguf", "ggtrain.qat.type is \"q4_0\"", "this run's \"q8_0\"",
                "train.qat and train.qat_imatrix cannot change on --resume"}});
  c.push_back({"train_qat_lora_bf16",
               "`train.qat` on a LoRA run with `train.precision = bf16`",
               [](Env& e) {
                 return e.fresh({"train.qat=q4_k_m", "train.lora.rank=2", "train.precision=bf16",
                                 "init.from=" + e.base_run("base") + "/weights/step_2.gguf"});
               },
               {"train.qat on a LoRA run", "train.precision = \"fp32\""}});
  c.push_back({"train_qat_lora_quantized_base",
               "`train.qat` on a LoRA run whose init.from holds its matrices quantized (Q8_0)",
               [](Env& e) {
                 const std::string q8 = e.t("base-q8_0.gguf");
                 const auto r =
                     run_cli({e.bin(), "export", e.base_run("base") + "/weights/step_2.gguf", q8, "--type", "q8_0"},
                             e.t("export.out"));
                 if (r.status != 0) throw std::runtime_error("export failed: " + r.output);
                 return e.fresh({"train.qat=q4_k_m", "train.lora.rank=2", "init.from=" + q8});
               },
               {"train.qat on a LoRA run", "output.weight", "in float", "F32, F16 or BF16"}});
  c.push_back({"imatrix_chat_template_on_text",
               "`imatrix --chat-template` with a plain text file (templates render chat JSONL)",
               [](Env& e) {
                 return A{e.bin(),    "imatrix",         "-m",    train::weights_path(e.base_run(), 2), "-f",
                          e.corpus(), "--chat-template", "chatml"};
               },
               {"--chat-template applies to chat JSONL", "-f FILE.jsonl"}});
  c.push_back({"eval_kld_text_too_short",
               "`eval --kl-divergence BASE --text` on a text shorter than two chunks",
               [](Env& e) {
                 std::ofstream(e.t("short.txt")) << "In the beginning.\n";
                 const std::string w = train::weights_path(e.base_run(), 2);
                 return A{e.bin(), "eval", "-m", w, "--text", e.t("short.txt"), "--kl-divergence", w, "-c", "32"};
               },
               {"kl-divergence", "the text has", "at least 64 (2 x context 32) are needed"}});
  c.push_back({"eval_task_lines_not_six",
               "`eval --task` given a HellaSwag-form file whose lines are not six per task",
               [](Env& e) {
                 std::ofstream(e.t("t.hellaswag")) << "a context\n1\nan ending\nanother\n";
                 return A{e.bin(), "eval", "-m", train::weights_path(e.base_run(), 2), "--task", e.t("t.hellaswag")};
               },
               {"t.hellaswag", "4 lines, not a multiple of 6", "six lines per task"}});
  c.push_back({"eval_task_bad_label",
               "`eval --task` given a HellaSwag-form task whose gold index is not 0-3",
               [](Env& e) {
                 std::ofstream(e.t("t.hellaswag")) << "a context\n4\na\nb\nc\nd\n";
                 return A{e.bin(), "eval", "-m", train::weights_path(e.base_run(), 2), "--task", e.t("t.hellaswag")};
               },
               {"t.hellaswag:2:", "gold ending's index", "0 to 3"}});
  c.push_back({"eval_task_jsonl_field",
               "`eval --task` given a JSONL task without `endings`",
               [](Env& e) {
                 std::ofstream(e.t("t.jsonl")) << "{\"context\": \"c\", \"endings\": [\"a\", \"b\"], \"label\": 0}\n"
                                                  "{\"context\": \"c\", \"label\": 0}\n";
                 return A{e.bin(), "eval", "-m", train::weights_path(e.base_run(), 2), "--task", e.t("t.jsonl")};
               },
               {"t.jsonl:2:", "no \"endings\""}});
  c.push_back({"eval_task_multiple_choice_truncated",
               "`eval --task` given a `--multiple-choice` binary file cut short",
               [](Env& e) {
                 // one task at byte 8: "Q?", then 2 answers, "a" and the start of "b"'s length
                 const std::string bytes("\x01\0\0\0\x08\0\0\0\x02\0\0\0Q?\x02\0\0\0\x01\0\0\0a\x01\0", 25);
                 std::ofstream(e.t("arc.bin"), std::ios::binary) << bytes;
                 return A{e.bin(), "eval", "-m", train::weights_path(e.base_run(), 2), "--task", e.t("arc.bin")};
               },
               {"arc.bin", "task 0", "answer 1", "truncated"}});
  c.push_back({"eval_task_winogrande_no_blank",
               "`eval --task` given a Winogrande CSV line whose sentence has no `_`",
               [](Env& e) {
                 std::ofstream(e.t("w.csv")) << "0,The _ sat.,cat,dog,1\n1,The cat sat.,cat,dog,2\n";
                 return A{e.bin(), "eval", "-m", train::weights_path(e.base_run(), 2), "--task", e.t("w.csv")};
               },
               {"w.csv:2:", "no '_'"}});
  c.push_back({"eval_task_too_long",
               "`eval --task` with a task longer than the context (`-c`)",
               [](Env& e) {
                 std::ofstream(e.t("t.jsonl")) << "{\"context\": \"a context of a good many words\", "
                                                  "\"endings\": [\"one\", \"two\"], \"label\": 0}\n";
                 return A{e.bin(),  "eval",         "-m", train::weights_path(e.base_run(), 2),
                          "--task", e.t("t.jsonl"), "-c", "4"};
               },
               {"t.jsonl: task 0", "needs", "the context is 4", "raise -c"}});
  c.push_back({"train_eval_tasks_missing",
               "`train.eval_tasks` naming a task file that does not exist",
               [](Env& e) {
                 return e.fresh({"train.eval_tasks=" + e.t("no_such.jsonl"), "train.eval_tasks_every=2"});
               },
               {"no_such.jsonl", "cannot read the task file"}});
  c.push_back({"train_eval_tasks_unknown_field",
               "a `train.eval_tasks` entry with a field other than format, every, limit",
               [](Env& e) { return e.fresh({"train.eval_tasks=" + e.t("tasks.jsonl") + "@each=3"}); },
               {"train.eval_tasks", "each", "format, every, limit"}});
  c.push_back({"train_eval_tasks_every_0",
               "`train.eval_tasks` set with `train.eval_tasks_every` left at 0",
               [](Env& e) { return e.fresh({"train.eval_tasks=" + e.t("tasks.jsonl")}); },
               {"train.eval_tasks", "train.eval_tasks_every is 0"}});
  c.push_back({"keep_best_unknown_metric",
               "`checkpoint.keep_best` naming no metric",
               [](Env& e) { return e.fresh({"checkpoint.keep_best=accuracy"}); },
               {"checkpoint.keep_best", "val_loss", "task:NAME", "accuracy"}});
  c.push_back({"keep_best_task_not_evaluated",
               "`checkpoint.keep_best = \"task:NAME\"` where NAME is no `train.eval_tasks` file",
               [](Env& e) { return e.fresh({"checkpoint.keep_best=task:verses.hellaswag"}); },
               {"task:verses.hellaswag", "names no train.eval_tasks file"}});
  c.push_back({"tokenizer_vocab_too_small",
               "`tokenizer train --vocab` below what the text's characters need",
               [](Env& e) {
                 return A{e.bin(),   "tokenizer", "train", "--input",     e.corpus(),
                          "--vocab", "270",       "--out", e.t("t.model")};
               },
               {"corpus.txt", "too small", "need at least", "ask for"}});
  c.push_back({"unknown_command",
               "`ggtrain trian` (a misspelt command)",
               [](Env& e) {
                 return A{e.bin(), "trian"};
               },
               {"unknown command 'trian'", "did you mean 'train'?"},
               2});
  c.push_back({"unknown_option",
               "`ggtrain generate --tmep 0.5` (a misspelt option)",
               [](Env& e) { return A{e.bin(), "generate", "-m", e.t("m.gguf"), "--tmep", "0.5"}; },
               {"unexpected arguments --tmep 0.5", "did you mean --temp"},
               2});
  c.push_back({"n_predict_below_minus_one",
               "`generate -n -2` (-1 is the only negative count: no limit)",
               [](Env& e) { return A{e.bin(), "generate", "-m", e.t("m.gguf"), "-n", "-2"}; },
               {"--n-predict", "-2", "-1"},
               2});
  c.push_back({"cache_type_unknown",
               "`generate --cache-type q4_0` (a KV cache type ggtrain does not keep)",
               [](Env& e) {
                 return A{e.bin(), "generate", "-m",           e.base_run() + "/weights/step_2.gguf",
                          "-p",    "a",        "--cache-type", "q4_0"};
               },
               {"--cache-type", "'q4_0'", "f16 or f32"}});
  c.push_back(
      {"export_requantize",
       "`export --type q4_k_m` of a model that is already quantized",
       [](Env& e) {
         const std::string q4 = e.t("q4.gguf");
         run_cli({e.bin(), "export", e.base_run() + "/weights/step_2.gguf", q4, "--type", "q4_0"}, e.t("q4.out"));
         return A{e.bin(), "export", q4, e.t("out.gguf"), "--type", "q4_k_m"};
       },
       {"q4.gguf", "already Q4_0", "F32, F16 or BF16"}});
  c.push_back({"export_quantize_nan",
               "`export --type q4_0` of a model with a NaN weight",
               [](Env& e) {
                 gguf::GgufFile f(e.base_run() + "/weights/step_2.gguf");
                 gguf::GgufWriter w;
                 for (const auto& [k, v] : f.metadata()) w.set(k, v);
                 std::vector<std::vector<float>> keep;
                 for (const auto& ti : f.tensors()) {
                   keep.push_back(quant::tensor_floats(f, ti));
                   if (ti.name == "blk.1.ffn_up.weight") keep.back()[7] = std::nanf("");
                   quant::add_float_tensor(w, ti.name, ti.type, ti.shape(), keep.back().data());
                 }
                 w.write(e.t("nan.gguf"));
                 return A{e.bin(), "export", e.t("nan.gguf"), e.t("out.gguf"), "--type", "q4_0"};
               },
               {"nan.gguf", "blk.1.ffn_up.weight", "non-finite", "element 7"}});
  c.push_back({"rope_freqs_wrong_length",
               "a model whose `rope_freqs.weight` has 3 values, not head size / 2",
               [](Env& e) {
                 return A{e.bin(), "generate", "-m", with_rope_freqs(e, {1, 2, 4}), "-p", "a"};
               },
               {"l3.gguf", "rope_freqs.weight", "ne [3]", "expected [8]"}});
  c.push_back({"rope_freqs_not_positive",
               "a model whose `rope_freqs.weight` holds a 0",
               [](Env& e) {
                 return A{e.bin(), "generate", "-m", with_rope_freqs(e, {1, 1, 0, 8, 8, 8, 8, 8}), "-p", "a"};
               },
               {"l3.gguf", "rope_freqs.weight value 2 is 0", "positive and finite"}});
  c.push_back({"tensor_shape_not_config",
               "a model whose metadata says heads of 32 (`llama.attention.key_length`, `llama.rope.dimension_count`) "
               "while its tensors hold heads of 16",
               [](Env& e) {
                 return A{e.bin(),
                          "generate",
                          "-p",
                          "a",
                          "-m",
                          gguf_with(e.base_run() + "/weights/step_2.gguf", e.t("k.gguf"), [](gguf::GgufWriter& w) {
                            w.set("llama.attention.key_length", gguf::Value::u32(32));
                            w.set("llama.rope.dimension_count", gguf::Value::u32(32));
                          })};
               },
               {"k.gguf", "blk.0.attn_q.weight", "ne [64, 64]", "expected [64, 128]"}});
  c.push_back({"rope_scaling_not_linear",
               "a model whose `llama.rope.scaling.type` is `yarn` (only linear scaling is implemented)",
               [](Env& e) {
                 return A{e.bin(),
                          "generate",
                          "-p",
                          "a",
                          "-m",
                          gguf_with(e.base_run() + "/weights/step_2.gguf", e.t("y.gguf"), [](gguf::GgufWriter& w) {
                            w.set("llama.rope.scaling.type", gguf::Value::str("yarn"));
                          })};
               },
               {"y.gguf", "llama.rope.scaling.type", "'yarn'", "linear"}});
  c.push_back({"logit_softcapping",
               "a model with `llama.final_logit_softcapping` (Gemma 2's soft-capped logits)",
               [](Env& e) {
                 return A{e.bin(),
                          "generate",
                          "-p",
                          "a",
                          "-m",
                          gguf_with(e.base_run() + "/weights/step_2.gguf", e.t("cap.gguf"), [](gguf::GgufWriter& w) {
                            w.set("llama.final_logit_softcapping", gguf::Value::f32(30));
                          })};
               },
               {"cap.gguf", "llama.final_logit_softcapping", "not supported"}});
  c.push_back({"sliding_window_not_gemma3",
               "`model.sliding_window=16` for a llama model (only gemma3 has local layers)",
               [](Env& e) { return e.fresh({"model.sliding_window=16"}); },
               {"sliding_window", "llama", "set it to 0"}});
  c.push_back({"attention_layers_not_lfm2",
               "`model.attention_layers=0` for a llama model (only lfm2 and qwen35 have recurrent layers)",
               [](Env& e) { return e.fresh({"model.attention_layers=0"}); },
               {"attention_layers", "llama", "leave it empty"}});
  c.push_back({"attention_layers_out_of_range",
               "`model.attention_layers=1,9` for a 2-layer lfm2 model",
               [](Env& e) {
                 return e.fresh({"model.arch=lfm2", "model.attention_layers=1,9"});
               },
               {"attention_layers", "'9'", "n_layers 2"}});
  c.push_back({"qwen35_missing_ssm_key",
               "a qwen35 GGUF without `qwen35.ssm.state_size` (`ggtrain eval -m`)",
               [](Env& e) {
                 return A{
                     e.bin(),    "eval",
                     "-m",       gguf_without(qwen35_checkpoint(e), e.t("nokey.gguf"), "qwen35.ssm.state_size", ""),
                     "--tokens", "1,2,3"};
               },
               {"nokey.gguf", "qwen35.ssm.state_size"}});
  c.push_back({"qwen35_missing_conv_tensor",
               "a qwen35 GGUF without its layer-0 convolution kernel `blk.0.ssm_conv1d.weight` (`ggtrain eval -m`)",
               [](Env& e) {
                 return A{
                     e.bin(),    "eval",
                     "-m",       gguf_without(qwen35_checkpoint(e), e.t("noconv.gguf"), "", "blk.0.ssm_conv1d.weight"),
                     "--tokens", "1,2,3"};
               },
               {"noconv.gguf", "blk.0.ssm_conv1d.weight"}});
  c.push_back({"qwen35_mtp_block_without_its_tensors",
               "a qwen35 GGUF whose `qwen35.nextn_predict_layers=1` makes its last block a multi-token-prediction "
               "block that has none of that block's tensors",
               [](Env& e) {
                 return A{e.bin(),
                          "eval",
                          "-m",
                          gguf_with(qwen35_checkpoint(e), e.t("mtp.gguf"),
                                    [](gguf::GgufWriter& w) {
                                      w.set("qwen35.nextn_predict_layers", gguf::Value::u32(1));
                                      w.set("qwen35.full_attention_interval",
                                            gguf::Value::u32(1));  // so block 0 attends
                                    }),
                          "--tokens",
                          "1,2,3"};
               },
               {"mtp.gguf", "nextn_predict_layers", "block 1", "'blk.1.nextn.eh_proj.weight'"}});
  c.push_back({"qwen35_mtp_every_block",
               "a qwen35 GGUF whose `qwen35.nextn_predict_layers` equals its block_count",
               [](Env& e) {
                 return A{
                     e.bin(),
                     "eval",
                     "-m",
                     gguf_with(qwen35_checkpoint(e), e.t("allmtp.gguf"),
                               [](gguf::GgufWriter& w) { w.set("qwen35.nextn_predict_layers", gguf::Value::u32(2)); }),
                     "--tokens",
                     "1,2,3"};
               },
               {"allmtp.gguf", "nextn_predict_layers is 2", "block_count is 2"}});
  c.push_back({"qwen35_value_heads_not_multiple",
               "`model.ssm_time_step_rank=3` with `model.ssm_group_count=2` for a qwen35 model",
               [](Env& e) {
                 return e.fresh({"model.arch=qwen35", "model.attention_layers=1", "model.ssm_state_size=16",
                                 "model.ssm_group_count=2", "model.ssm_time_step_rank=3"});
               },
               {"ssm_time_step_rank 3", "not a multiple", "ssm_group_count 2"}});
  c.push_back({"moe_used_over_count",
               "a qwen3moe GGUF whose `qwen3moe.expert_used_count` (9) exceeds its `expert_count` (4)",
               [](Env& e) {
                 return A{
                     e.bin(),
                     "eval",
                     "-m",
                     gguf_with(qwen3moe_checkpoint(e), e.t("used.gguf"),
                               [](gguf::GgufWriter& w) { w.set("qwen3moe.expert_used_count", gguf::Value::u32(9)); }),
                     "--tokens",
                     "1,2,3"};
               },
               {"used.gguf", "qwen3moe.expert_used_count", "is 9", "qwen3moe.expert_count (4)"}});
  c.push_back({"moe_count_disagrees_with_tensors",
               "a qwen3moe GGUF whose `qwen3moe.expert_count` (5) disagrees with its expert tensors (4 experts)",
               [](Env& e) {
                 return A{e.bin(),
                          "eval",
                          "-m",
                          gguf_with(qwen3moe_checkpoint(e), e.t("count.gguf"),
                                    [](gguf::GgufWriter& w) { w.set("qwen3moe.expert_count", gguf::Value::u32(5)); }),
                          "--tokens",
                          "1,2,3"};
               },
               {"count.gguf", "blk.0.ffn_gate_inp.weight", "expected [64, 5]"}});
  c.push_back({"lora_for_other_experts",
               "`generate --lora` with an adapter of 4 experts' pairs (`ffn_up_exps`) on a qwen3moe base of 6 experts",
               [](Env& e) {
                 auto a = tiny_train_args(e.bin(), e.t("moe_lora"), e.corpus(),
                                          {"train.steps=2", "init.from=" + qwen3moe_checkpoint(e), "train.lora.rank=2",
                                           "train.lora.targets=ffn_up_exps"});
                 const auto r = run_cli(a, e.t("moe_lora.out"));
                 if (r.status != 0) throw std::runtime_error("MoE LoRA run failed: " + r.output);
                 const std::string six = e.base_run("qwen3moe6", {"model.arch=qwen3moe", "model.n_experts=6",
                                                                  "model.n_experts_used=2", "model.d_ff_expert=32"}) +
                                         "/weights/step_2.gguf";
                 return A{e.bin(), "generate", "-m", six, "--lora", train::weights_path(e.t("moe_lora"), 2), "-p", "a"};
               },
               {"moe_lora/weights/step_2.gguf", "blk.0.ffn_up_exps.weight.lora_a", "expected [64, r, 6]",
                "trained on another base model"}});
  c.push_back({"prompt_over_the_context",
               "`generate -f` a file of 600 words into the tiny model's context of 64 tokens",
               [](Env& e) {
                 std::string words;
                 for (int i = 0; i < 600; ++i) words += "the quick fox ";
                 spit(e.t("long.txt"), words);
                 return A{e.bin(), "generate", "-m", train::weights_path(e.base_run(), 2), "-f", e.t("long.txt")};
               },
               {"leave no room in the context of 64 tokens", "raise -c"}});
  c.push_back({"llama_cpp_gpu_flag",
               "`generate -ngl 0` (llama.cpp's GPU layers; the parser would read `-n gl`)",
               [](Env& e) {
                 return A{e.bin(), "generate", "-m", train::weights_path(e.base_run(), 2), "-ngl", "0", "-p", "a"};
               },
               {"-ngl is a llama.cpp flag ggtrain does not take", "runs on the CPU"},
               2});  // a usage error
  c.push_back({"epochs_and_steps",
               "`train.epochs=2` and `train.steps=9` both set",
               [](Env& e) {
                 return e.fresh({"train.epochs=2", "train.steps=9"});
               },
               {"train.epochs (2) and train.steps (9) are both set", "give one"}});
  c.push_back({"lr_min_over_lr_max",
               "`train.lr_min=1e-4` above `train.lr_max=2e-5`",
               [](Env& e) {
                 return e.fresh({"train.lr_max=2e-5", "train.lr_min=1e-4"});
               },
               {"train.lr_min 0.0001 exceeds train.lr_max 2e-05", "leave it unset"}});
  c.push_back({"memory_plan_does_not_fit",
               "a run whose memory plan exceeds `train.memory_limit=0.001` (GiB)",
               [](Env& e) { return e.fresh({"train.memory_limit=0.001"}); },
               {"needs about", "activations", "train.memory_limit = 0.001", "train.batch", "train.recompute"}});
  c.push_back({"moe_used_over_experts",
               "`model.n_experts_used=5` with `model.n_experts=4` for a qwen3moe model",
               [](Env& e) {
                 return e.fresh({"model.arch=qwen3moe", "model.n_experts=4", "model.n_experts_used=5"});
               },
               {"n_experts_used (5)", "n_experts (4)"}});
  c.push_back({"experts_on_a_dense_family",
               "`model.n_experts=4` for a llama model (a dense family)",
               [](Env& e) { return e.fresh({"model.n_experts=4"}); },
               {"n_experts", "llama has none", "set them to 0"}});
  c.push_back({"olmoe_grouped_kv_heads",
               "`model.n_kv_heads=2` of 4 query heads for an olmoe model (its norms span d_model)",
               [](Env& e) {
                 return e.fresh({"model.arch=olmoe", "model.n_experts=4", "model.n_experts_used=2", "model.tied=false",
                                 "model.n_kv_heads=2"});
               },
               {"olmoe", "d_model (64)"}});
  c.push_back({"rope_dim_whole_heads_only",
               "`model.rope_dim=8` for a llama model (only qwen35 rotates part of each head)",
               [](Env& e) { return e.fresh({"model.rope_dim=8"}); },
               {"rope_dim", "llama", "whole heads"}});
  c.push_back({"kv_heads_list_not_lfm2",
               "a llama GGUF whose `llama.attention.head_count_kv` is a per-layer list (`ggtrain eval -m`)",
               [](Env& e) {
                 return A{e.bin(),
                          "eval",
                          "-m",
                          gguf_with(e.base_run() + "/weights/step_2.gguf", e.t("kvlist.gguf"),
                                    [](gguf::GgufWriter& w) {
                                      w.set("llama.attention.head_count_kv", gguf::Value::i32_array({2, 2}));
                                    }),
                          "--tokens",
                          "1,2,3"};
               },
               {"kvlist.gguf", "llama.attention.head_count_kv", "per-layer list"}});
  c.push_back({"config_file_missing",
               "`--config` names no file",
               [](Env& e) {
                 auto a = e.fresh();
                 a.insert(a.end(), {"--config", e.t("nope.toml")});
                 return a;
               },
               {"nope.toml", "cannot read config file"}});
  c.push_back({"unknown_preset",
               "`--preset tinyy` (misspelt)",
               [](Env& e) { return A{e.bin(), "train", "--preset", "tinyy", "--run-dir", e.t("run")}; },
               {"unknown preset 'tinyy'", "did you mean 'tiny'", "the presets: tiny, s15"}});
  c.push_back({"bad_data_format_misspelt",
               "`data.format=chatt` (misspelt)",
               [](Env& e) { return e.fresh({"data.format=chatt"}); },
               {"data.format must be", "got \"chatt\"", "did you mean 'chat'"}});
  c.push_back({"steps_zero",
               "`train.steps=0`",
               [](Env& e) { return e.fresh({"train.steps=0"}); },
               {"train.steps", "positive"}});
  c.push_back({"seq_len_over_ctx",
               "`train.seq_len` above `model.ctx`",
               [](Env& e) { return e.fresh({"train.seq_len=128"}); },
               {"train.seq_len", "model.ctx"}});
  c.push_back({"window_past_context_hybrid",
               "`train.seq_len=96` past `model.ctx` 64 finetuning a qwen35 model (allowed: its DeltaNet layers have "
               "no positional limit; a warning says what the attention layers do)",
               [](Env& e) {
                 auto a = tiny_train_args(e.bin(), e.t("long"), e.corpus(),
                                          {"train.steps=1", "train.seq_len=96", "init.from=" + qwen35_checkpoint(e)});
                 a.erase(std::find(a.begin(), a.end(), "--quiet"));  // the warning is in the plan
                 return a;
               },
               {"train.seq_len 96 exceeds model.ctx 64", "gated_deltanet layers (0)", "attention layers (1)"},
               0});
  c.push_back(
      {"generate_past_context_hybrid",
       "`ggtrain generate -c 100` on a qwen35 model of context 64 (allowed, as llama.cpp allows it; the "
       "warning says what the attention layers do)",
       [](Env& e) { return A{e.bin(), "generate", "-m", qwen35_checkpoint(e), "-p", "The", "-n", "2", "-c", "100"}; },
       {"-c 100 is longer than the 64 tokens", "gated_deltanet layers (0)", "attention layers (1)"},
       0});
  c.push_back({"heads_not_divisible",
               "`model.n_kv_heads` not dividing `model.n_heads`",
               [](Env& e) { return e.fresh({"model.n_kv_heads=3"}); },
               {"n_kv_heads", "n_heads"}});
  c.push_back({"unknown_schedule",
               "`train.schedule=linear`",
               [](Env& e) { return e.fresh({"train.schedule=linear"}); },
               {"train.schedule", "linear", "cosine"}});
  c.push_back({"bad_on_nonfinite",
               "`train.on_nonfinite=ignore`",
               [](Env& e) { return e.fresh({"train.on_nonfinite=ignore"}); },
               {"train.on_nonfinite", "stop", "skip"}});
  c.push_back({"bad_val_fraction",
               "`data.val_fraction=0.7`",
               [](Env& e) { return e.fresh({"data.val_fraction=0.7"}); },
               {"data.val_fraction", "0.7"}});
  c.push_back({"bad_injection_variable",
               "`GGTRAIN_INJECT_NAN_AT_STEP=abc`",
               [](Env& e) {
                 e.opts.env = {{"GGTRAIN_INJECT_NAN_AT_STEP", "abc"}};
                 return e.fresh();
               },
               {"GGTRAIN_INJECT_NAN_AT_STEP", "abc"}});
  c.push_back({"bad_broken_resume_piece",
               "`GGTRAIN_INJECT_BROKEN_RESUME=rng`",
               [](Env& e) {
                 e.opts.env = {{"GGTRAIN_INJECT_BROKEN_RESUME", "rng"}};
                 return e.fresh();
               },
               {"GGTRAIN_INJECT_BROKEN_RESUME", "rng", "adam_m"}});
  // --- the tokenizer
  c.push_back({"tokenizer_missing",
               "`data.tokenizer` names no file",
               [](Env& e) { return e.fresh({"data.tokenizer=" + e.t("nope.model")}); },
               {"nope.model", "data.tokenizer"}});
  c.push_back({"tokenizer_not_sentencepiece",
               "`data.tokenizer` is a text file",
               [](Env& e) { return e.fresh({"data.tokenizer=" + e.corpus()}); },
               {"corpus.txt", "sentencepiece", "data.tokenizer"}});
  c.push_back({"tokenizer_gguf_other_type",
               "`data.tokenizer` is a GGUF whose vocabulary type is neither llama nor gpt2",
               [](Env& e) {
                 rewrite_gguf(GGTRAIN_FIXTURES_DIR "/tiny-gpt2.gguf", e.t("bert.gguf"), "tokenizer.ggml.model", "bert",
                              "");
                 return e.fresh({"data.tokenizer=" + e.t("bert.gguf")});
               },
               {"bert.gguf", "tokenizer.ggml.model", "bert", "data.tokenizer"}});
  c.push_back({"tokenizer_gguf_unknown_pre",
               "`data.tokenizer` is a gpt2 GGUF with a pre-tokenizer ggtrain does not implement",
               [](Env& e) {
                 rewrite_gguf(GGTRAIN_FIXTURES_DIR "/tiny-gpt2.gguf", e.t("glm.gguf"), "tokenizer.ggml.pre",
                              "chatglm-bpe", "");
                 return e.fresh({"data.tokenizer=" + e.t("glm.gguf")});
               },
               {"glm.gguf", "tokenizer.ggml.pre", "chatglm-bpe", "data.tokenizer"}});
  c.push_back({"hf_tokenizer_not_bpe",
               "`tokenizer import` of a tokenizer.json whose model is not BPE (a WordPiece one)",
               [](Env& e) {
                 spit(e.t("tokenizer.json"), R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
                 return A{e.bin(), "tokenizer", "import", e.t("tokenizer.json"), "--out", e.t("v.gguf")};
               },
               {"tokenizer.json", "model.type", "BPE"}});
  c.push_back(
      {"hf_tokenizer_unknown_split",
       "`tokenizer import` of a byte-level BPE tokenizer.json whose Split regex ggtrain does not implement",
       [](Env& e) {
         spit(e.t("tokenizer.json"),
              R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Sequence", )"
              R"("pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{L}+|\\p{N}{1,2}"}}]}})");
         return A{e.bin(), "tokenizer", "import", e.t("tokenizer.json"), "--out", e.t("v.gguf")};
       },
       {"tokenizer.json", "pre_tokenizer", "Llama 3's, Qwen2/3's, GPT-2's"}});
  c.push_back({"hf_tokenizer_spm_normalizer",
               "`tokenizer import` of a SentencePiece-style tokenizer.json (byte fallback) whose normalizer is NFKC, "
               "which llama.cpp's SentencePiece tokenizer does not apply",
               [](Env& e) {
                 spit(e.t("tokenizer.json"),
                      R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []}, )"
                      R"("normalizer": {"type": "NFKC"}, "pre_tokenizer": null})");
                 return A{e.bin(), "tokenizer", "import", e.t("tokenizer.json"), "--out", e.t("v.gguf")};
               },
               {"tokenizer.json", "normalizer", "SentencePiece"}});
  c.push_back({"tokenizer_gguf_without_vocab",
               "`data.tokenizer` is a GGUF without a vocabulary",
               [](Env& e) { return e.fresh({"data.tokenizer=" GGTRAIN_FIXTURES_DIR "/ref-mha-tied.gguf"}); },
               {"ref-mha-tied.gguf", "tokenizer.ggml.model"}});
  // --- warm start from a donor (init.donor)
  c.push_back({"donor_missing",
               "`init.donor` names no file",
               [](Env& e) { return e.fresh({"init.donor=" + e.t("nope.gguf")}); },
               {"nope.gguf", "init.donor"}});
  c.push_back({"donor_without_token_embd",
               "`init.donor` is a llama GGUF without `token_embd.weight`",
               [](Env& e) {
                 rewrite_gguf(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", e.t("no_embd.gguf"), "", "", "token_embd.weight");
                 return e.fresh({"init.donor=" + e.t("no_embd.gguf")});
               },
               {"no_embd.gguf", "token_embd.weight", "init.donor"}});
  c.push_back({"donor_not_llama",
               "`init.donor` is a GGUF that is not a llama model",
               [](Env& e) { return e.fresh({"init.donor=" GGTRAIN_FIXTURES_DIR "/ref-mha-tied.gguf"}); },
               {"ref-mha-tied.gguf", "init.donor"}});
  c.push_back(
      {"donor_and_tokenizer",
       "`init.donor` together with `data.tokenizer`",
       [](Env& e) {
         return e.fresh({"init.donor=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", "data.tokenizer=" + e.t("x.model")});
       },
       {"init.donor", "data.tokenizer"}});
  // --- instruction tuning (data.format, data.chat_template)
  const std::string good = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                           "\"content\": \"Hello\"}]}\n";
  c.push_back({"chat_unknown_template",
               "`data.chat_template` names no template ggtrain renders",
               [](Env& e) { return e.fresh({"data.chat_template=vicuna"}); },
               {"data.chat_template", "vicuna", "chatml"}});
  c.push_back({"chat_bad_format",
               "`data.format` is not a record format",
               [](Env& e) { return e.fresh({"data.format=sharegpt"}); },
               {"data.format", "sharegpt"}});
  c.push_back({"chat_without_vocabulary",
               "`data.format = \"chat\"` with no `init.from` or `data.tokenizer`",
               [](Env& e) { return e.fresh({"data.format=chat"}); },
               {"data.format", "init.from", "data.tokenizer"}});
  c.push_back(
      {"chat_unknown_role",
       "a chat record with a role other than system, user, assistant, tool",
       [good](Env& e) {
         return e.chat(
             good +
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"bot\", \"content\": \"Yo\"}]}\n");
       },
       {"chat.jsonl:2", "role", "bot"}});
  c.push_back({"chat_tool_calls",
               "a chat record with tool calls, under a chat template that renders no tools (chatml)",
               [good](Env& e) {
                 return e.chat(
                     good +
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                     "\"content\": \"\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {}}}]}]}\n");
               },
               {"chat.jsonl:2", "tool definitions, calls or outputs", "chatml", "qwen3"}});
  c.push_back({"qwen35_template_without_a_question",
               "a chat record under the `qwen3.5` template whose only user turn wraps a tool's output "
               "(`<tool_response>...</tool_response>`)",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": "
                                      "\"<tool_response>4</tool_response>\"}, {\"role\": \"assistant\", \"content\": "
                                      "\"Four.\"}]}\n",
                               {"data.chat_template=qwen3.5"});
               },
               {"chat.jsonl:2", "Qwen3.5", "user question"}});
  c.push_back({"lfm2_template_with_tool_calls",
               "a chat record with a `tool_calls` member under the `lfm2` template, which drops that member (LFM2 "
               "writes its calls in the answer's text)",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": "
                                      "\"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": {\"name\": "
                                      "\"f\", \"arguments\": {}}}]}, {\"role\": \"tool\", \"content\": \"1\"}, "
                                      "{\"role\": \"assistant\", \"content\": \"One.\"}]}\n",
                               {"data.chat_template=lfm2"});
               },
               {"chat.jsonl:2", "tool_calls", "lfm2", "<|tool_call_start|>"}});
  c.push_back({"chat_tool_call_without_arguments",
               "a chat record whose tool call has no `arguments`",
               [good](Env& e) {
                 return e.chat(good +
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                               "\"content\": \"\", \"tool_calls\": [{\"function\": {\"name\": \"f\"}}]}]}\n");
               },
               {"chat.jsonl:2", "messages[1].tool_calls[0]", "arguments"}});
  c.push_back({"chat_tool_turn_without_call",
               "a chat record with a tool turn that follows no tool call",
               [good](Env& e) {
                 return e.chat(good +
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                               "\"content\": \"Yo\"}, {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": "
                               "\"assistant\", \"content\": \"Ok\"}]}\n");
               },
               {"chat.jsonl:2", "message 2", "tool turn", "tool calls"}});
  c.push_back({"chat_roles_out_of_order",
               "a chat record whose turns do not alternate from user",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"assistant\", \"content\": \"Hi\"}, {\"role\": "
                                      "\"user\", \"content\": \"Yo\"}]}\n");
               },
               {"chat.jsonl:2", "message 0", "alternate"}});
  c.push_back({"chat_system_not_first",
               "a chat record with a system message after the first",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": "
                                      "\"system\", \"content\": \"Be brief\"}]}\n");
               },
               {"chat.jsonl:2", "system", "first"}});
  c.push_back(
      {"chat_no_assistant_turn",
       "a chat record that ends without an assistant turn",
       [good](Env& e) { return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n"); },
       {"chat.jsonl:2", "assistant"}});
  c.push_back({"chat_empty_content",
               "a chat message whose content is empty or white space",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": \" \"}, {\"role\": "
                                      "\"assistant\", \"content\": \"Yo\"}]}\n");
               },
               {"chat.jsonl:2", "empty content"}});
  c.push_back({"chat_content_not_string",
               "a chat message whose content is not a string",
               [good](Env& e) {
                 return e.chat(good + "{\"messages\": [{\"role\": \"user\", \"content\": 3}, {\"role\": \"assistant\", "
                                      "\"content\": \"Yo\"}]}\n");
               },
               {"chat.jsonl:2", "messages[0]", "content", "string"}});
  c.push_back({"chat_not_json",
               "a chat JSONL line that is not JSON",
               [good](Env& e) { return e.chat(good + "{\"messages\": [\n"); },
               {"chat.jsonl:2", "JSON"}});
  c.push_back({"chat_record_shape",
               "a record with none of the chat, alpaca or completion shapes (`data.format = \"auto\"`)",
               [good](Env& e) { return e.chat("{\"text\": \"plain\"}\n" + good, {"data.format=auto"}); },
               {"chat.jsonl:1", "messages", "instruction", "prompt"}});
  c.push_back(
      {"alpaca_missing_output",
       "an alpaca record without `output`",
       [](Env& e) { return e.chat("{\"instruction\": \"Say hi\", \"input\": \"\"}\n", {"data.format=alpaca"}); },
       {"chat.jsonl:1", "output"}});
  c.push_back(
      {"chat_all_too_long",
       "every example longer than the window, with `data.overflow = \"skip\"`",
       [](Env& e) {
         std::string long_answer;
         for (int i = 0; i < 200; ++i) long_answer += "word ";
         return e.chat(
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Talk\"}, {\"role\": \"assistant\", \"content\": \"" +
                 long_answer + "\"}]}\n",
             {"data.overflow=skip"});
       },
       {"no training examples", "data.overflow = \"skip\"", "\"split\""}});
  c.push_back({"chat_prompts_fill_the_window",
               "every example's prompt longer than the window, with `data.overflow = \"truncate\"` (the default)",
               [](Env& e) {
                 std::string long_prompt;
                 for (int i = 0; i < 200; ++i) long_prompt += "word ";
                 return e.chat("{\"messages\": [{\"role\": \"user\", \"content\": \"" + long_prompt +
                                   "\"}, {\"role\": \"assistant\", \"content\": \"Fine.\"}]}\n",
                               {});
               },
               {"no training examples", "prompts alone fill the window", "data.overflow = \"split\""}});
  c.push_back({"chat_lora_needs_new_tokens",
               "a LoRA chat run on a base that lacks the template's markers",
               [good](Env& e) { return e.chat(good, {"train.lora.rank=4"}); },
               {"chatml", "<|im_start|>", "LoRA", "train.lora.rank = 0"}});
  // --- preference tuning (data.format = "preference", train.objective)
  const std::vector<std::string> pref = {"data.format=preference", "train.objective=orpo"};
  const std::string pair = "{\"prompt\": \"Hi\", \"chosen\": \"Hello\", \"rejected\": \"Go away\"}\n";
  c.push_back({"preference_unknown_objective",
               "`train.objective` names no objective",
               [](Env& e) { return e.fresh({"train.objective=kto"}); },
               {"train.objective", "kto", "dpo", "simpo"}});
  c.push_back({"preference_objective_without_pairs",
               "a preference objective on data that is not `data.format = \"preference\"`",
               [](Env& e) { return e.fresh({"train.objective=dpo"}); },
               {"train.objective", "dpo", "data.format = \"preference\""}});
  c.push_back({"preference_dpo_without_init_from",
               "`train.objective = \"dpo\"` without `init.from` (no reference model)",
               [](Env& e) {
                 return e.fresh({"data.format=preference", "train.objective=dpo"});
               },
               {"dpo", "reference", "init.from"}});
  c.push_back({"preference_missing_rejected",
               "a preference record without `rejected`",
               [pair, pref](Env& e) { return e.chat(pair + "{\"prompt\": \"Hi\", \"chosen\": \"Hello\"}\n", pref); },
               {"chat.jsonl:2", "rejected"}});
  c.push_back({"preference_same_answers",
               "a preference record whose chosen and rejected answers are the same",
               [pair, pref](Env& e) {
                 return e.chat(pair + "{\"prompt\": \"Hi\", \"chosen\": \"Yo\", \"rejected\": \"Yo\"}\n", pref);
               },
               {"chat.jsonl:2", "same text"}});
  c.push_back(
      {"preference_answer_not_assistant",
       "a preference answer given as a message of another role",
       [pair, pref](Env& e) {
         return e.chat(
             pair +
                 "{\"prompt\": \"Hi\", \"chosen\": {\"role\": \"user\", \"content\": \"Yo\"}, \"rejected\": \"No\"}\n",
             pref);
       },
       {"chat.jsonl:2", "chosen", "assistant"}});
  // --- distillation (train.objective = "distill", train.teacher)
  c.push_back({"distill_without_teacher",
               "`train.objective = \"distill\"` without `train.teacher`",
               [](Env& e) { return e.fresh({"train.objective=distill"}); },
               {"distill", "train.teacher"}});
  c.push_back({"distill_teacher_missing",
               "`train.teacher` names no file",
               [](Env& e) {
                 return e.fresh({"train.objective=distill", "train.teacher=" + e.t("nope.gguf")});
               },
               {"nope.gguf", "train.teacher"}});
  c.push_back({"distill_teacher_other_vocabulary",
               "a teacher whose vocabulary is not the student's (nor one it extends)",
               [](Env& e) {
                 return e.fresh({"train.objective=distill", "train.teacher=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"});
               },
               {"tiny-spm.gguf", "train.teacher", "vocabulary"}});
  c.push_back({"distill_teacher_without_objective",
               "`train.teacher` on a run that does not distill",
               [](Env& e) { return e.fresh({"train.teacher=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"}); },
               {"train.teacher", "distill"}});
  c.push_back({"distill_alpha_out_of_range",
               "`train.distill.alpha` outside [0, 1]",
               [](Env& e) {
                 return e.fresh({"train.objective=distill", "train.teacher=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf",
                                 "train.distill.alpha=1.5"});
               },
               {"train.distill.alpha", "1.5"}});
  c.push_back({"distill_teacher_changed_on_resume",
               "a resumed distillation run whose `train.teacher` file now holds other weights",
               [](Env& e) {
                 const std::string teacher = e.base_run("teacher") + "/weights/step_2.gguf";
                 const std::string tokenizer = "data.tokenizer=" + e.t("teacher/tokenizer.model");
                 const std::string other = e.base_run("other", {tokenizer, "train.seed=7"}) + "/weights/step_2.gguf";
                 std::filesystem::copy_file(teacher, e.t("teacher.gguf"));
                 e.base_run("run", {"train.objective=distill", "train.teacher=" + e.t("teacher.gguf"), tokenizer});
                 std::filesystem::copy_file(other, e.t("teacher.gguf"),
                                            std::filesystem::copy_options::overwrite_existing);
                 return e.resume();
               },
               {"teacher-train.bin", "another train.teacher"}});
  // --- GRPO (train.objective = "grpo", train.grpo.*)
  const std::string prompt = "{\"prompt\": \"Hi\", \"answer\": \"Hello\"}\n";
  auto grpo = [](std::vector<std::string> sets) {
    sets.insert(sets.begin(),
                {"data.format=auto", "train.objective=grpo", "train.grpo.group=2", "train.grpo.max_tokens=4"});
    return sets;
  };
  c.push_back({"grpo_without_reward",
               "`train.objective = \"grpo\"` without `train.grpo.reward`",
               [grpo](Env& e) { return e.fresh(grpo({})); },
               {"grpo", "train.grpo.reward", "regex:PATTERN"}});
  c.push_back({"grpo_on_text",
               "GRPO on pretraining text (no prompts to reply to)",
               [](Env& e) {
                 return e.fresh({"train.objective=grpo", "train.grpo.reward=exact"});
               },
               {"grpo", "data.format", "answer"}});
  c.push_back({"grpo_group_of_one",
               "`train.grpo.group` = 1 (no group to compare replies in)",
               [grpo](Env& e) {
                 return e.fresh(grpo({"train.grpo.reward=exact", "train.grpo.group=1"}));
               },
               {"train.grpo.group", ">= 2"}});
  c.push_back({"grpo_unknown_reward",
               "`train.grpo.reward` names no reward",
               [grpo](Env& e) { return e.fresh(grpo({"train.grpo.reward=correct"})); },
               {"train.grpo.reward", "correct", "cmd:COMMAND"}});
  c.push_back({"grpo_bad_regex",
               "a `regex:` reward whose pattern does not compile",
               [grpo](Env& e) { return e.fresh(grpo({"train.grpo.reward=regex:(["})); },
               {"train.grpo.reward", "regex:([", "not a valid pattern"}});
  c.push_back(
      {"grpo_prompt_without_answer",
       "a GRPO prompt record without an answer",
       [prompt, grpo](Env& e) { return e.chat(prompt + "{\"prompt\": \"Hi\"}\n", grpo({"train.grpo.reward=exact"})); },
       {"chat.jsonl:2", "answer"}});
  c.push_back({"grpo_reward_command_missing",
               "a `cmd:` reward whose program does not exist",
               [prompt, grpo](Env& e) {
                 return e.chat(prompt + prompt, grpo({"train.grpo.reward=cmd:" + e.t("no-such-scorer")}));
               },
               {"no-such-scorer", "train.grpo.reward", "status 127"}});
  c.push_back({"grpo_reward_command_garbage",
               "a `cmd:` reward that prints something other than numbers",
               [prompt, grpo](Env& e) {
                 return e.chat(prompt + prompt, grpo({"train.grpo.reward=cmd:cat >/dev/null; echo 1; echo yes"}));
               },
               {"train.grpo.reward", "line 2 is 'yes', not a finite number"}});
  c.push_back(
      {"grpo_reward_command_hangs",
       "a `cmd:` reward that does not answer within `train.grpo.reward_timeout`",
       [prompt, grpo](Env& e) {
         return e.chat(prompt + prompt, grpo({"train.grpo.reward=cmd:sleep 30", "train.grpo.reward_timeout=0.5"}));
       },
       {"train.grpo.reward", "within 0.5 s", "killed"}});
  c.push_back({"grpo_iterations_zero",
               "`train.grpo.iterations` = 0 (no step to train a batch of replies)",
               [grpo](Env& e) {
                 return e.fresh(grpo({"train.grpo.reward=exact", "train.grpo.iterations=0"}));
               },
               {"train.grpo.iterations", ">= 1"}});
  // A GRPO run stopped after step 1 of a batch of replies that trains 2
  // steps: resuming needs the batch that run kept beside its checkpoints.
  auto stopped_inside_batch = [prompt, grpo](Env& e) {
    auto a =
        e.chat(prompt + prompt, grpo({"train.grpo.reward=exact", "train.grpo.iterations=2", "checkpoint.every=1"}));
    a.insert(a.end(), {"--stop-at", "1"});
    const auto r = run_cli(a, e.t("grpo.out"));
    if (r.status != 0 || train::latest_step(e.t("chat_run")) != 1)
      throw std::runtime_error("GRPO run failed: " + r.output);
    return e.t("chat_run/grpo/replies-step1-rank0of1.json");
  };
  c.push_back({"grpo_resume_without_replies",
               "a GRPO run resumed between the steps of one batch of replies, the batch's file gone (or the run "
               "resumed with another number of ranks)",
               [stopped_inside_batch](Env& e) {
                 std::filesystem::remove(stopped_inside_batch(e));
                 return e.resume({}, "chat_run");
               },
               {"replies-step1-rank0of1.json", "missing", "same number of ranks"}});
  c.push_back({"grpo_replies_file_garbage",
               "a GRPO run resumed between the steps of one batch of replies, the batch's file not JSON",
               [stopped_inside_batch](Env& e) {
                 spit(stopped_inside_batch(e), "{\"format\": 1, \"step\": ");
                 return e.resume({}, "chat_run");
               },
               {"replies-step1-rank0of1.json", "not a batch of replies"}});
  // --- finetuning (init.from, train.freeze, train.lora)
  c.push_back({"from_missing",
               "`init.from` names no file",
               [](Env& e) { return e.fresh({"init.from=" + e.t("nope.gguf")}); },
               {"nope.gguf", "init.from"}});
  c.push_back({"from_contradicting_key",
               "`init.from` with a `model.*` key that contradicts the file",
               [](Env& e) {
                 return e.fresh({"init.from=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", "model.d_model=32"});
               },
               {"tiny-spm.gguf", "model.d_model = 32", "init.from"}});
  c.push_back({"from_and_donor",
               "`init.from` together with `init.donor`",
               [](Env& e) {
                 return e.fresh({"init.from=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf",
                                 "init.donor=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"});
               },
               {"init.from", "init.donor"}});
  c.push_back({"freeze_names_nothing",
               "`train.freeze` names no tensor of the model",
               [](Env& e) { return e.fresh({"train.freeze=token_embd,blk.9"}); },
               {"train.freeze", "blk.9"}});
  c.push_back({"lora_without_base",
               "`train.lora.rank` without `init.from`",
               [](Env& e) { return e.fresh({"train.lora.rank=4"}); },
               {"train.lora", "init.from"}});
  c.push_back({"lora_unknown_target",
               "`train.lora.targets` names no block matrix",
               [](Env& e) {
                 return e.fresh({"init.from=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", "train.lora.rank=4",
                                 "train.lora.targets=attn_q,attn_x"});
               },
               {"train.lora.targets", "attn_x"}});
  c.push_back({"lora_target_in_no_layer",
               "`train.lora.targets=shortconv.in_proj` on a llama base (no convolution layers)",
               [](Env& e) {
                 return e.fresh({"init.from=" GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", "train.lora.rank=4",
                                 "train.lora.targets=attn_q,shortconv.in_proj"});
               },
               {"shortconv.in_proj", "llama", "attn_q"}});
  // --- run folders and resuming
  c.push_back({"run_dir_is_a_file",
               "`--run-dir` is a file",
               [](Env& e) {
                 spit(e.t("run"), "x");
                 return e.fresh();
               },
               {"run", "not a directory"}});
  c.push_back({"resume_without_checkpoint",
               "`--resume` of a folder without checkpoints",
               [](Env& e) {
                 fs::create_directories(e.t("run"));
                 return e.resume();
               },
               {"run", "no checkpoint to resume from"}});
  c.push_back({"fresh_run_over_checkpoints",
               "a new run in a folder that has checkpoints",
               [](Env& e) {
                 e.base_run();
                 return e.fresh();
               },
               {"run", "already has checkpoints", "--resume"}});
  c.push_back({"resume_with_preset",
               "`--resume` with `--preset`",
               [](Env& e) {
                 e.base_run();
                 auto a = e.resume();
                 a.insert(a.end(), {"--preset", "tiny"});
                 return a;
               },
               {"--resume", "saved config", "--set"}});
  c.push_back({"resume_changed_model_shape",
               "`--resume --set model.d_model=128` (model shape changed)",
               [](Env& e) {
                 e.base_run();
                 return e.resume({"model.d_model=128"});
               },
               {"cannot resume step 2 with a different model", "model.d_model is 128", "checkpoint has 64"}});
  c.push_back({"resume_changed_model_rope",
               "`--resume --set model.rope_freq_base=500000`",
               [](Env& e) {
                 e.base_run();
                 return e.resume({"model.rope_freq_base=500000"});
               },
               {"different model", "model.rope_freq_base"}});
  c.push_back(
      {"resume_tokenizer_other_size",
       "`--resume` with a tokenizer of another vocabulary size",
       [](Env& e) {
         e.base_run();
         run_cli({e.bin(), "tokenizer", "train", "--input", e.corpus(), "--vocab", "300", "--out", e.t("other.model")},
                 e.t("tok.out"));
         return e.resume({"data.tokenizer=" + e.t("other.model")});
       },
       {"vocabulary mismatch", "320", "300", "other.model"}});
  c.push_back({"resume_tokenizer_same_size_other_pieces",
               "`--resume` after `tokenizer.model` was replaced by another one of the same size",
               [](Env& e) {
                 e.base_run();
                 std::string text = slurp(e.corpus());
                 replace_all(text, "the", "xq");
                 replace_all(text, "and", "zv");
                 spit(e.t("other.txt"), text);
                 run_cli({e.bin(), "tokenizer", "train", "--input", e.t("other.txt"), "--vocab", "320", "--out",
                          e.t("run/tokenizer.model")},
                         e.t("tok.out"));
                 return e.resume();
               },
               {"vocabulary mismatch", "in the checkpoint", "tokenizer.model"}});
  c.push_back({"truncated_weights",
               "the latest weights file cut in half",
               [](Env& e) {
                 const std::string w = train::weights_path(e.base_run(), 2);
                 fs::resize_file(w, fs::file_size(w) / 2);
                 return e.resume();
               },
               {"weights/step_2.gguf"}});
  c.push_back({"truncated_state",
               "the latest state file cut in half",
               [](Env& e) {
                 const std::string s = train::state_path(e.base_run(), 2);
                 fs::resize_file(s, fs::file_size(s) / 2);
                 return e.resume();
               },
               {"state/step_2.gguf"}});
  // One bit of a checkpoint flipped on disk after it was written (a failing
  // disk, a bad copy): the digests the state recorded refuse the resume.
  c.push_back({"weights_changed_on_disk",
               "one bit of the latest weights file flipped after it was written",
               [](Env& e) {
                 flip_last_byte(train::weights_path(e.base_run(), 2));
                 return e.resume();
               },
               {"weights/step_2.gguf", "SHA-256", "state/step_2.gguf", "changed on disk", "ggtrain verify"}});
  c.push_back({"state_changed_on_disk",
               "one bit of the latest state file's AdamW moments flipped after it was written",
               [](Env& e) {
                 flip_last_byte(train::state_path(e.base_run(), 2));
                 return e.resume();
               },
               {"state/step_2.gguf", "AdamW moments", "changed on disk"}});
  c.push_back({"missing_state",
               "the latest state file deleted",
               [](Env& e) {
                 fs::remove(train::state_path(e.base_run(), 2));
                 return e.resume();
               },
               {"state/step_2.gguf", "missing", "cannot resume exactly"}});
  c.push_back({"missing_weights",
               "the latest weights file deleted (`latest` dangles)",
               [](Env& e) {
                 fs::remove(train::weights_path(e.base_run(), 2));
                 return e.resume();
               },
               {"weights/step_2.gguf", "missing"}});
  c.push_back({"latest_not_a_checkpoint",
               "`weights/latest` pointing at another file",
               [](Env& e) {
                 const std::string l = e.base_run() + "/weights/latest";
                 fs::remove(l);
                 fs::create_symlink("notes.txt", l);
                 return e.resume();
               },
               {"weights/latest", "notes.txt", "step_N.gguf"}});
  c.push_back({"state_of_another_run",
               "the state file of another run under the same step",
               [](Env& e) {
                 e.base_run();
                 e.base_run("run2");
                 fs::copy_file(train::state_path(e.t("run2"), 2), train::state_path(e.t("run"), 2),
                               fs::copy_options::overwrite_existing);
                 return e.resume();
               },
               {"step_2.gguf", "run_id", "do not match"}});
  c.push_back({"corrupt_saved_config",
               "a state file whose saved config is not TOML",
               [](Env& e) {
                 const std::string s = train::state_path(e.base_run(), 2);
                 rewrite_gguf(s, s, "ggtrain.config", "[train\nsteps = ", "");
                 return e.resume();
               },
               {"saved config", "invalid TOML"}});
  c.push_back({"token_file_bad_magic",
               "`data/train-00000.tok` with a wrong header",
               [](Env& e) {
                 const std::string p = e.base_run() + "/data/train-00000.tok";
                 std::string b = slurp(p);
                 b.replace(0, 8, "NOTTOKEN");
                 spit(p, b);
                 return e.resume();
               },
               {"train-00000.tok", "bad magic"}});
  c.push_back({"token_file_truncated",
               "`data/train-00000.tok` one byte short (prepared again from its sources, resumes)",
               [](Env& e) {
                 const std::string p = e.base_run() + "/data/train-00000.tok";
                 fs::resize_file(p, fs::file_size(p) - 1);
                 return e.resume();
               },
               {},
               0});
  c.push_back({"token_file_missing",
               "`data/val-00000.tok` deleted (prepared again from its sources, resumes)",
               [](Env& e) {
                 fs::remove(e.base_run() + "/data/val-00000.tok");
                 return e.resume();
               },
               {},
               0});
  // Ids are checked as windows read them, so every id is bad here: the
  // resumed run's first window finds one, wherever it starts.
  c.push_back({"token_file_id_out_of_range",
               "`data/train-00000.tok` whose ids are past the vocabulary",
               [](Env& e) {
                 const std::string p = e.base_run() + "/data/train-00000.tok";
                 std::string b = slurp(p);
                 std::fill(b.begin() + 32, b.end(), '\xff');
                 spit(p, b);
                 return e.resume();
               },
               {"train-00000.tok", "65535", "outside the vocabulary"}});
  c.push_back({"token_file_other_vocabulary",
               "`data/train-00000.tok` whose header names another vocabulary",
               [](Env& e) {
                 const std::string p = e.base_run() + "/data/train-00000.tok";
                 std::string b = slurp(p);
                 const uint64_t vocab = 70000;
                 std::memcpy(b.data() + 16, &vocab, 8);
                 spit(p, b);
                 return e.resume();
               },
               {"train-00000.tok", "vocabulary 70000", "320"}});
  c.push_back({"stop_at_before_resume_step",
               "`--resume --stop-at 1` when the run is at step 2",
               [](Env& e) {
                 e.base_run();
                 auto a = e.resume();
                 a.insert(a.end(), {"--stop-at", "1"});
                 return a;
               },
               {"--stop-at 1", "step 2"}});
  c.push_back({"corrupt_metrics_lines",
               "torn or edited lines in `metrics.jsonl` (resumes; those lines are dropped)",
               [](Env& e) {
                 std::ofstream(e.base_run() + "/metrics.jsonl", std::ios::app)
                     << "{\"step\": \"x\"}\nnot json\n{\"step\": 1, \"loss\": null}\n";
                 return e.resume();
               },
               {},
               0});
  c.push_back({"model_without_token_embd",
               "a model GGUF without `token_embd.weight` (`ggtrain eval -m`)",
               [](Env& e) {
                 rewrite_gguf(train::weights_path(e.base_run(), 2), e.t("no_embd.gguf"), "", "", "token_embd.weight");
                 return A{e.bin(), "eval", "-m", e.t("no_embd.gguf"), "--tokens", "1,2,3"};
               },
               {"no_embd.gguf", "token_embd.weight"}});
  return c;
}

std::string normalized(std::string s, const std::string& tmp) {
  replace_all(s, tmp, "$T");
  replace_all(s, fs::weakly_canonical(GGTRAIN_FIXTURES_DIR).string(), "$FIXTURES");
  replace_all(s, GGTRAIN_FIXTURES_DIR, "$FIXTURES");
  // A port a case took from the system, different each run.
  return std::regex_replace(s, std::regex("port [0-9]+ on"), "port $$PORT on");
}

// The "warning:" line of the output that says `first`, or "".
std::string warning_line(const std::string& output, const std::string& first) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("warning:") && line.find(first) != std::string::npos) return line;
  return "";
}

std::string table_cell(std::string s) {
  replace_all(s, "|", "\\|");
  replace_all(s, "\n", "\\n");
  return "`` " + s + " ``";
}

class BadInputs : public ::testing::TestWithParam<Case> {};

TEST_P(BadInputs, ClearMessageAndNoCrash) {
  const Case& c = GetParam();
  TempDir tmp("ggtrain_bad_" + c.id);
  Env env(tmp);
  const auto args = c.setup(env);
  const CliResult r = run_cli(args, tmp / "out.txt", env.opts);
  ASSERT_EQ(r.status, c.status) << r.output;
  // an accepted input with keywords must say them in a warning
  const bool warns = c.status == 0 && !c.keywords.empty();
  const std::string msg =
      normalized(warns ? warning_line(r.output, c.keywords[0]) : error_line(r.output), tmp.path().string());
  if (c.status != 0 || warns) {
    ASSERT_FALSE(msg.empty()) << "no 'ggtrain: error:' or 'warning:' line in:\n" << r.output;
    for (const auto& k : c.keywords) EXPECT_NE(msg.find(k), std::string::npos) << "missing '" << k << "' in: " << msg;
  }
  // The row of docs/bad-inputs.md must show exactly this message.
  const std::string cell = c.status != 0 ? table_cell(msg) : warns ? "(exit 0) " + table_cell(msg) : "(exit 0)";
  const std::string row = "| `" + c.id + "` | " + c.input + " | " + cell + " |";
  if (std::getenv("GGTRAIN_BAD_INPUTS_DOC")) std::printf("%s\n", row.c_str());
  const std::string doc = slurp(GGTRAIN_SOURCE_DIR "/docs/bad-inputs.md");
  size_t at = doc.find("| `" + c.id + "` |");
  ASSERT_NE(at, std::string::npos) << "docs/bad-inputs.md has no row for " << c.id << "; add:\n" << row;
  const std::string line = doc.substr(at, doc.find('\n', at) - at);
  EXPECT_NE(line.find(cell), std::string::npos) << "docs/bad-inputs.md row differs; now:\n"
                                                << row << "\nwas:\n"
                                                << line;
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputs, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.id; });

}  // namespace
