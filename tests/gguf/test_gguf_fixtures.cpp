// Files written by llama.cpp's gguf-py (see tests/fixtures/README.md):
// keys, shapes and layout as that writer produced them, and tensor values
// cross-checked against bytes read with std::ifstream, not through the map.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/inspect.h"
#include "gguf/reader.h"
#include "quant/gguf_floats.h"
#include "util/error.h"

namespace {

using namespace ggtrain::gguf;
namespace quant = ggtrain::quant;

std::string fixture(const std::string& name) { return std::string(GGTRAIN_FIXTURES_DIR) + "/" + name; }

// `n` little-endian floats at absolute file position `pos`, via plain reads.
std::vector<float> read_floats_at(const std::string& path, uint64_t pos, size_t n) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  in.seekg(static_cast<std::streamoff>(pos));
  std::vector<unsigned char> raw(n * 4);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(raw.size())) << "short read at " << pos;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u =
        raw[4 * i] | (raw[4 * i + 1] << 8) | (raw[4 * i + 2] << 16) | (static_cast<uint32_t>(raw[4 * i + 3]) << 24);
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

// Compares every element of an F32 tensor with the raw file bytes.
void expect_values_match_file(const GgufFile& f, const TensorInfo& t) {
  SCOPED_TRACE(t.name);
  ASSERT_EQ(t.type, TensorType::F32);
  const std::vector<float> all = quant::tensor_floats(f, t);
  ASSERT_EQ(all.size(), t.n_elements);
  const uint64_t base = f.data_offset() + t.offset;
  const std::vector<float> raw = read_floats_at(f.path(), base, static_cast<size_t>(t.n_elements));
  ASSERT_EQ(raw.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(std::memcmp(&raw[i], &all[i], 4), 0) << "element " << i;
}

void expect_llama_hparams(const GgufFile& f, uint64_t n_ff, uint64_t vocab) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), n_ff);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), vocab);
  EXPECT_EQ(f.find("llama.embedding_length")->type, ValueType::U32);
  EXPECT_EQ(f.find("llama.attention.layer_norm_rms_epsilon")->type, ValueType::F32);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.get_uint("general.file_type"), 0u);
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, ValueType::ARRAY);
  EXPECT_EQ(tokens->elem_type, ValueType::STRING);
  EXPECT_EQ(tokens->items.size(), vocab);
  const Value* types = f.find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->elem_type, ValueType::I32);
  EXPECT_EQ(types->items.size(), vocab);
}

// Every tensor is F32, aligned, inside the file, and the tensors tile the
// data section back to back as gguf-py lays them out.
void expect_layout(const GgufFile& f) {
  uint64_t end = 0;
  for (const auto& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.type, TensorType::F32);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.n_bytes, t.n_elements * 4);
    EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size());
    end = std::max(end, t.offset + t.n_bytes);
  }
  EXPECT_EQ(f.data_offset() + end, f.file_size());
}

TEST(GgufFixtures, TinyGpt2) {
  const std::string path = fixture("tiny-gpt2.gguf");
  GgufFile f(path);
  EXPECT_EQ(f.file_size(), 447328u);
  EXPECT_EQ(f.data_offset(), 6752u);  // the 6724-byte header padded to 32
  expect_llama_hparams(f, 172, 300);
  EXPECT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.metadata().front().first, "general.architecture");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 299u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 299u);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens->items[0].s, "\xc4\x80");  // byte 0 as GPT-2 maps it: U+0100
  EXPECT_EQ(tokens->items[299].s, "<|endoftext|>");
  const Value* merges = f.find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(merges->elem_type, ValueType::STRING);
  ASSERT_EQ(merges->items.size(), 43u);
  EXPECT_EQ(merges->items[0].s, "t h");
  EXPECT_EQ(merges->items[1].s, "\xc4\xa0 th") << "merge 1 is 'Ġ th'";

  ASSERT_EQ(f.tensors().size(), 20u);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr) << "tied head";
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.n_dims, 2u);
  EXPECT_EQ(emb.shape(), (std::vector<uint64_t>{64, 300}));
  EXPECT_EQ(emb.offset, 0u);
  EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").shape(), (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").offset, 396544u);
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").shape(), (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f.tensor("output_norm.weight").shape(), (std::vector<uint64_t>{64}));
  expect_layout(f);

  expect_values_match_file(f, emb);
  expect_values_match_file(f, f.tensor("blk.1.ffn_down.weight"));
  // Norm weights are exactly 1; matrices are N(0, 0.02^2).
  for (float v : quant::tensor_floats(f, f.tensor("output_norm.weight"))) ASSERT_EQ(v, 1.0f);
  const auto e = quant::tensor_floats(f, emb);
  double sum2 = 0;
  for (float v : e) sum2 += double(v) * v;
  EXPECT_NEAR(std::sqrt(sum2 / e.size()), 0.02, 0.002);
}

TEST(GgufFixtures, TinySpm) {
  GgufFile f(fixture("tiny-spm.gguf"));
  EXPECT_EQ(f.file_size(), 525920u);
  EXPECT_EQ(f.data_offset(), 8544u);
  expect_llama_hparams(f, 172, 300);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.unknown_token_id"), 0u);
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens->items[0].s, "<unk>");
  EXPECT_EQ(tokens->items[3].s, "<0x00>");
  EXPECT_EQ(tokens->items[258].s, "<0xFF>");
  const Value* types = f.find("tokenizer.ggml.token_type");
  EXPECT_EQ(types->items[0].i, 2);
  EXPECT_EQ(types->items[1].i, 3);
  EXPECT_EQ(types->items[3].i, 6);
  const Value* scores = f.find("tokenizer.ggml.scores");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->elem_type, ValueType::F32);
  EXPECT_EQ(scores->items.size(), 300u);
  EXPECT_EQ(f.find("tokenizer.ggml.merges"), nullptr);

  ASSERT_EQ(f.tensors().size(), 21u);
  EXPECT_EQ(f.tensor("output.weight").shape(), (std::vector<uint64_t>{64, 300}));
  EXPECT_EQ(f.tensor("output.weight").offset, 77056u);
  expect_layout(f);
  expect_values_match_file(f, f.tensor("output.weight"));
  expect_values_match_file(f, f.tensor("blk.0.attn_q.weight"));
}

TEST(GgufFixtures, RefGqaUntiedModelMatchesReferenceState) {
  GgufFile m(fixture("ref-gqa-untied-model.gguf"));
  expect_llama_hparams(m, 160, 256);
  EXPECT_EQ(m.get_string("general.name"), "ggtrain-ref-gqa-untied");
  EXPECT_EQ(m.get_uint("llama.context_length"), 32u);
  EXPECT_FALSE(m.get_bool("tokenizer.ggml.add_eos_token"));
  ASSERT_EQ(m.tensors().size(), 21u);
  expect_layout(m);
  expect_values_match_file(m, m.tensor("output.weight"));

  // README: the model's weight bytes equal the weights in the reference
  // state file, a differently laid out file from the same writer.
  GgufFile ref(fixture("ref-gqa-untied.gguf"));
  EXPECT_EQ(ref.get_string("general.architecture"), "ggtrain-ref");
  EXPECT_TRUE(ref.find("ref.tied") && ref.find("ref.tied")->type == ValueType::BOOL);
  EXPECT_FALSE(ref.get_bool("ref.tied"));
  EXPECT_EQ(ref.tensor("tokens").type, TensorType::I32);
  EXPECT_EQ(ref.tensor("tokens").shape(), (std::vector<uint64_t>{33, 2}));
  EXPECT_EQ(ref.tensor("logits").shape(), (std::vector<uint64_t>{256, 32, 2}));
  for (int32_t tok : ref.to_i32(ref.tensor("tokens"))) {
    ASSERT_GE(tok, 0);
    ASSERT_LT(tok, 256);
  }
  for (const auto& t : m.tensors()) {
    const TensorInfo* r = ref.find_tensor(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(r->shape(), t.shape()) << t.name;
    ASSERT_EQ(r->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(r->data, t.data, t.n_bytes), 0) << t.name;
  }
}

TEST(GgufFixtures, InspectJsonListsEverything) {
  GgufFile f(fixture("tiny-gpt2.gguf"));
  nlohmann::json j = inspect_json(f);
  ASSERT_TRUE(j.contains("metadata"));
  ASSERT_TRUE(j.contains("tensors"));
  const auto& meta = j["metadata"];
  EXPECT_EQ(meta.size(), 21u);
  EXPECT_EQ(meta["general.architecture"], "llama");
  EXPECT_EQ(meta["llama.embedding_length"], 64);
  EXPECT_EQ(meta["tokenizer.ggml.add_bos_token"], false);
  EXPECT_EQ(meta["tokenizer.ggml.tokens"].size(), 300u);
  EXPECT_EQ(meta["tokenizer.ggml.merges"].size(), 43u);
  EXPECT_EQ(meta["tokenizer.ggml.merges"][0], "t h");
  EXPECT_EQ(meta["llama.attention.layer_norm_rms_epsilon"].get<double>(), static_cast<double>(1e-5f));
  const auto& tensors = j["tensors"];
  ASSERT_EQ(tensors.size(), 20u);
  EXPECT_EQ(tensors[0]["name"], "token_embd.weight");
  EXPECT_EQ(tensors[0]["type"], "F32");
  EXPECT_EQ(tensors[0]["shape"], nlohmann::json({64, 300}));
  EXPECT_EQ(tensors[0]["offset"], 0);
  EXPECT_EQ(tensors[19]["name"], "blk.1.ffn_down.weight");
  EXPECT_EQ(tensors[19]["offset"], 396544);
  // The CLI prints it; it must serialise.
  EXPECT_FALSE(j.dump().empty());

  const std::string text = inspect_text(f);
  EXPECT_NE(text.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(text.find("20 tensors"), std::string::npos) << text.substr(text.size() - 200);
}

TEST(GgufFixtures, MissingFileNamesThePath) {
  const std::string path = fixture("no-such-file.gguf");
  try {
    GgufFile f(path);
    FAIL() << "opened a missing file";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
