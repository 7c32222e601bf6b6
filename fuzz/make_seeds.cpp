// Writes the seed corpus of the fuzz targets (checked in under
// fuzz/corpus/<target>/; re-run `fuzz/run.sh seeds` to regenerate it):
//   make_seeds OUT_DIR [FIXTURES_DIR]
// Every seed is small (a few KiB) so that mutations stay fast: GGUF files
// with every metadata and tensor type, llama and gpt2 vocabularies, copies of the
// fixtures (tests/fixtures) with their metadata kept and each tensor cut to a few
// elements, token files of both widths, and run configs.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../tests/support/compress.h"
#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/number_formats.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "tokenizer/unicode.h"
#include "train/run_config.h"
#include "util/error.h"

using namespace ggtrain;
using gguf::TensorType;
using gguf::Value;
using gguf::ValueType;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

void sample_gguf(const std::string& path, uint32_t alignment) {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.name", Value::str("seed \xe2\x96\x81 \xf0\x9f\xa6\x99"));
  w.set("s.u8", Value::u8(255));
  w.set("s.i8", Value::i8(-128));
  w.set("s.u16", Value::u16(65535));
  w.set("s.i16", Value::i16(-32768));
  w.set("s.u32", Value::u32(4294967295u));
  w.set("s.i32", Value::i32(std::numeric_limits<int32_t>::min()));
  w.set("s.u64", Value::u64(std::numeric_limits<uint64_t>::max()));
  w.set("s.i64", Value::i64(std::numeric_limits<int64_t>::min()));
  w.set("s.f32", Value::f32(0.1f));
  w.set("s.f64", Value::f64(1.0 / 3.0));
  w.set("s.bool", Value::boolean(true));
  w.set("s.empty", Value::str(""));
  w.set("s.f32_array", Value::f32_array({0.5f, -1.25f}));
  w.set("s.nested", Value::array(ValueType::ARRAY, {Value::i32_array({1, 2}), Value::string_array({"x"})}));
  if (alignment != 32) w.set_alignment(alignment);
  static std::vector<float> f(64 * 2);
  static std::vector<int32_t> i32(6);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.25f * float(i) - 7.0f;
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = int32_t(i) * 1000 - 2000;
  quant::add_float_tensor(w, "f32", TensorType::F32, {3}, f.data());
  quant::add_float_tensor(w, "f16", TensorType::F16, {2, 2}, f.data());
  quant::add_float_tensor(w, "bf16", TensorType::BF16, {2, 1, 2}, f.data());
  quant::add_float_tensor(w, "q8_0", TensorType::Q8_0, {32, 2, 1, 1}, f.data());
  w.add_tensor_raw("i32", TensorType::I32, {3, 2}, i32.data());
  quant::add_float_tensor(w, "empty", TensorType::F32, {0, 4}, f.data());
  w.write(path);
}

// A llama vocabulary: specials, the 256 byte pieces, a few merges and one
// user-defined piece.
void vocab_gguf(const std::string& path, bool with_scores_and_types, bool space_prefix) {
  std::vector<std::string> pieces{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
    types.push_back(6);
  }
  for (const char* p : {"\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "in",
                        "\xe2\x96\x81"
                        "a",
                        "an", "nd",
                        "\xe2\x96\x81"
                        "and",
                        "e", "t", "h", "a", "n", "d", "o", "r", "s"}) {
    pieces.push_back(p);
    types.push_back(1);
  }
  pieces.push_back("<|user|>");
  types.push_back(4);
  std::vector<float> scores(pieces.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i);
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("tokenizer.ggml.model", Value::str("llama"));
  w.set("tokenizer.ggml.tokens", Value::string_array(pieces));
  if (with_scores_and_types) {
    w.set("tokenizer.ggml.scores", Value::f32_array(scores));
    w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  }
  w.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  w.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  w.set("tokenizer.ggml.add_space_prefix", Value::boolean(space_prefix));
  w.write(path);
}

// A gpt2 (byte-level BPE) vocabulary: the 256 byte tokens, a few merges,
// control and user-defined tokens; `name` picks llama.cpp's strip rules.
void bpe_vocab_gguf(const std::string& path, const std::string& pre, const std::string& name) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(tokenizer::unicode::byte_to_unicode(uint8_t(b)));
  const std::string sp = tokenizer::unicode::byte_to_unicode(' ');
  const std::vector<std::string> merges{"t h", sp + " th", sp + "th e", "i n", sp + " a", "a n", "an d", "1 2"};
  for (const auto& m : merges) {
    const auto space = m.find(' ', 1);
    tokens.push_back(m.substr(0, space) + m.substr(space + 1));
  }
  std::vector<int32_t> types(tokens.size(), 1);
  for (auto [text, type] :
       {std::pair{"<|endoftext|>", 3}, std::pair{"<|user|>", 4}, std::pair{"[[USER]]", 4}, std::pair{"<|channel|>", 3},
        std::pair{"<|im_end|>", 4}, std::pair{"<s>", 3}, std::pair{"</s>", 3}, std::pair{"<unk>", 2}}) {
    tokens.push_back(text);
    types.push_back(type);
  }
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.name", Value::str(name));
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  w.set("tokenizer.ggml.merges", Value::string_array(merges));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(256 + merges.size())));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(256 + merges.size())));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(pre == "llama-bpe"));
  w.write(path);
}

// A fixture with every metadata key kept and each tensor cut to its first
// `keep` elements (ne = [keep]); tensors=false drops the tensors entirely.
void shrink_fixture(const std::string& in, const std::string& out, bool tensors, uint64_t keep = 8) {
  gguf::GgufFile f(in);
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  std::vector<std::vector<float>> keepalive;
  if (tensors) {
    for (const auto& t : f.tensors()) {
      if (!quant::is_float_convertible(t.type)) continue;
      auto v = quant::tensor_floats(f, t);
      const uint64_t n = t.type == TensorType::Q8_0 ? 32 : keep;
      if (v.size() < n) continue;
      v.resize(size_t(n));
      keepalive.push_back(std::move(v));
      quant::add_float_tensor(w, t.name, t.type, {n}, keepalive.back().data());
    }
  }
  w.write(out);
}

}  // namespace

// Seeds of the documents target: a mode byte (bit 0 JSONL, bits 1-2
// compression none/gzip/zstd, bits 3-4 separator line/blank_line/file,
// bit 5 skip bad documents), then the file.
void document_seeds(const std::string& dir) {
  using test_support::gzip_of;
  using test_support::zstd_of;
  const std::string text = "In the beginning\nGod created\r\n\nthe heaven \xc3\xa9\n  \nand the earth.";
  const std::string jsonl =
      "{\"text\": \"a\\nb\"}\n{\"text\": \"\\u00e9 \xe2\x96\x81\", \"id\": 2}\n\n{\"text\": \"\"}\n";
  write_text(dir + "line.txt", std::string(1, '\x00') + text);
  write_text(dir + "blank_line.txt", std::string(1, '\x08') + text);
  write_text(dir + "file.txt", std::string(1, '\x10') + text);
  write_text(dir + "text.gz", std::string(1, '\x02') + gzip_of(text));
  write_text(dir + "plain.jsonl", std::string(1, '\x01') + jsonl);
  write_text(dir + "jsonl.gz", std::string(1, '\x03') + gzip_of(jsonl));
  write_text(dir + "jsonl.zst", std::string(1, '\x05') + zstd_of(jsonl));
  write_text(dir + "skip_bad.jsonl", std::string(1, '\x21') + "{\"text\": 1}\nnot json\n{\"text\":\"ok\"}\n\xff\n");
}

// Seeds of the chat_records target: a mode byte (0 chat, 1 alpaca, 2
// completion, 3 detected), then JSONL records, good and bad.
void chat_seeds(const std::string& dir) {
  const std::string chat =
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
      "\" Hi \\n\"}, {\"role\": \"assistant\", \"content\": \"Hello <|im_end|> \\u00e9\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}\n"
      "{\"messages\": [{\"role\": \"bot\", \"content\": 3}]}\n";
  write_text(dir + "chat.jsonl", std::string(1, '\x00') + chat);
  write_text(dir + "alpaca.jsonl", std::string(1, '\x01') +
                                       "{\"instruction\": \"Add\", \"input\": \"1 2\", \"output\": \"3\"}\n"
                                       "{\"instruction\": \"Say hi\", \"output\": \" \"}\n");
  write_text(dir + "completion.jsonl", std::string(1, '\x02') + "{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n");
  write_text(dir + "detected.jsonl",
             std::string(1, '\x03') + chat + "{\"prompt\": \"x\", \"completion\": \"y\"}\n[]\n");
}

// Seeds of the choice_tasks target: a form byte (0 HellaSwag text, 1 JSONL,
// 2 Winogrande CSV, 3 llama-perplexity's multiple-choice binary), then the file.
void choice_task_seeds(const std::string& dir) {
  write_text(dir + "hellaswag.txt", std::string(1, '\x00') +
                                        "The cat sat\n2\n on a dog.\n on a log.\n on the mat.\n in a hat.\n"
                                        "Rain fell\n0\n all day.\n upwards.\n as cheese.\n nowhere.\n");
  write_text(dir + "tasks.jsonl",
             std::string(1, '\x01') +
                 "{\"context\": \"One plus one is\", \"endings\": [\" two\", \" three\"], \"label\": 0}\n\n"
                 "{\"context\": \"Sky:\", \"endings\": [\" green\", \" blue\", \" red\"], \"label\": 1}\n");
  write_text(dir + "winogrande.csv", std::string(1, '\x02') +
                                         "index,sentence,option1,option2,answer\n"
                                         "0,\"The trophy did not fit, as _ was big.\",trophy,suitcase,1\n"
                                         "1,Tom thanked Bob because _ helped.,Tom,Bob,2\n");
  // Two tasks: a count, their positions, then each: question, answers
  // (count, then length + text each), labels, and a second (empty) list.
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto text = [&](const std::string& s) { return u32(uint32_t(s.size())) + s; };
  auto task = [&](const std::string& q, const std::vector<std::string>& answers, uint32_t right) {
    std::string t = text(q) + u32(uint32_t(answers.size()));
    for (const auto& a : answers) t += text(a);
    for (uint32_t i = 0; i < answers.size(); ++i) t += u32(i == right ? 1 : 0);
    return t + u32(0);
  };
  const std::string t0 = task("Two plus two?", {"four", "five"}, 0),
                    t1 = task("Color of snow?", {"red", "white", "blue"}, 1);
  const uint32_t header = 4 + 2 * 4;
  write_text(dir + "multiple_choice.bin",
             std::string(1, '\x03') + u32(2) + u32(header) + u32(header + uint32_t(t0.size())) + t0 + t1);
}

// Seeds of the hf_tokenizer target: tokenizer.json, a NUL byte, and
// tokenizer_config.json; a byte-level BPE and a SentencePiece-style one.
void hf_tokenizer_seeds(const std::string& dir) {
  const std::string bpe =
      "{\"added_tokens\": [{\"id\": 5, \"content\": \"<|endoftext|>\", \"special\": true}],"
      " \"normalizer\": null,"
      " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
      "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
      "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, "
      "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]},"
      " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120a\": 4},"
      " \"merges\": [\"a b\", \"\\u0120 a\"]}}";
  const std::string config =
      "{\"bos_token\": null, \"eos_token\": \"<|endoftext|>\", \"chat_template\": \"{{ messages[0]['content'] }}\"}";
  write_text(dir + "bpe.json", bpe + std::string(1, '\0') + config);
  write_text(dir + "bpe_alone.json", bpe);
  const std::string spm =
      "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
      " {\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
      " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"},"
      " \"pre_tokenizer\": null,"
      " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\","
      " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"<0x41>\": 2, \"\\u2581\": 3, \"a\": 4, \"\\u2581a\": 5},"
      " \"merges\": [\"\\u2581 a\"]}}";
  write_text(dir + "spm.json", spm + std::string(1, '\0') + "{\"add_bos_token\": true, \"bos_token\": \"<s>\"}");
}

// Seeds of the preference_records target: JSONL records in each of TRL's
// shapes, good and bad.
void preference_seeds(const std::string& dir) {
  write_text(dir + "records.jsonl",
             "{\"prompt\": \"Hi\", \"chosen\": \"Hello!\", \"rejected\": \"Go away.\"}\n"
             "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, {\"role\": \"user\", \"content\": "
             "\"Hi\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": \"Hello\"}], \"rejected\": "
             "[{\"role\": \"assistant\", \"content\": \"No\"}]}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}], \"chosen\": {\"role\": "
             "\"assistant\", \"content\": \"4\"}, \"rejected\": {\"role\": \"assistant\", \"content\": \"5\"}}\n"
             "{\"prompt\": \"x\", \"chosen\": 3}\n");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [FIXTURES_DIR]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const std::string fixtures = argc > 2 ? argv[2] : "";
  try {
    for (const char* t : {"gguf_reader", "tokenizer", "config", "token_file", "documents", "chat_records",
                          "choice_tasks", "hf_tokenizer", "preference_records"})
      fs::create_directories(out + "/" + t);
    const std::string g = out + "/gguf_reader/", tk = out + "/tokenizer/", c = out + "/config/",
                      tf = out + "/token_file/";
    document_seeds(out + "/documents/");
    chat_seeds(out + "/chat_records/");
    choice_task_seeds(out + "/choice_tasks/");
    hf_tokenizer_seeds(out + "/hf_tokenizer/");
    preference_seeds(out + "/preference_records/");
    sample_gguf(g + "sample.gguf", 32);
    sample_gguf(g + "sample_align64.gguf", 64);
    vocab_gguf(tk + "vocab.gguf", true, true);
    vocab_gguf(tk + "vocab_plain.gguf", false, false);
    bpe_vocab_gguf(tk + "bpe_llama3.gguf", "llama-bpe", "seed-llama3");
    bpe_vocab_gguf(tk + "bpe_smollm.gguf", "smollm", "seed-smollm");
    bpe_vocab_gguf(tk + "bpe_default.gguf", "default", "seed-modern-bert");
    bpe_vocab_gguf(tk + "bpe_gpt2_phi3.gguf", "gpt-2", "seed-phi3");
    if (!fixtures.empty()) {
      for (const char* name : {"tiny-spm", "tiny-gpt2", "ref-gqa-untied-model", "ref-mha-tied"}) {
        const std::string in = fixtures + "/" + name + ".gguf";
        if (!fs::exists(in)) continue;
        shrink_fixture(in, g + name + "-small.gguf", true);
      }
      for (const char* name : {"tiny-spm", "tiny-gpt2", "ref-gqa-untied-model"}) {
        const std::string in = fixtures + "/" + name + ".gguf";
        if (fs::exists(in)) shrink_fixture(in, tk + name + "-vocab.gguf", false);
      }
    }
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back((i * 37) % 320);
    corpus::write_token_file(tf + "w2.tok", 320, ids);
    corpus::write_token_file(tf + "w4.tok", 70000, {1, 69999, 65536, 0, 12345});
    corpus::write_token_file(tf + "empty.tok", 5, {});
    for (const auto& name : train::preset_names()) write_text(c + name + ".toml", train::to_toml(train::preset(name)));
    write_text(c + "hand.toml",
               "# a hand-written run config\n[model]\nd_model = 64\ntied = false\nrope_freq_base = 1e4\n\n"
               "[data]\ncorpus = \"data/kjv.txt\"\ntokenizer = 'x.gguf'\nval_fraction = 0.05\n\n"
               "[train]\nsteps = 1_000\nlr_max = 3e-3\nschedule = \"wsd\"\non_nonfinite = \"skip\"\n"
               "max_nonfinite = 3\nseed = 0x10\n\n[checkpoint]\nevery = 10\nkeep_last = 0\n"
               "train.steps=5\n");
    write_text(c + "overrides.txt", "train.lr_max=0.01\nmodel.tied=true\ncheckpoint.every=7\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
