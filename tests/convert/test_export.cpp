// `ggtrain export` to F16/BF16/Q8_0 (each weight rounded as ggml's reference
// rounds it, norms kept F32) and the ollama Modelfile written beside it.
#include <gtest/gtest.h>

#include <cstring>

#include "chat/ollama_modelfile.h"
#include "chat/template.h"
#include "convert/export.h"
#include "gguf/reader.h"
#include "gguf/types.h"
#include "gguf/writer.h"
#include "kernels/number_formats.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "support/files.h"
#include "support/random_model.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using test_support::small_model_config;
using test_support::TempDir;
using test_support::write_random_model;

TEST(Export, Q8_0BlocksAreTheReferenceQuantizerAndNormsStayF32) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  auto p = write_random_model(c, tmp / "m.gguf");
  convert::export_model(tmp / "m.gguf", tmp / "q.gguf", gguf::TensorType::Q8_0);
  gguf::GgufFile q(tmp / "q.gguf");
  model::ParamLayout layout(c);
  EXPECT_EQ(q.get_uint("general.file_type"), 7u);
  for (const auto& t : layout.tensors()) {
    const auto& ti = q.tensor(t.name);
    if (t.shape.size() == 1) {
      EXPECT_EQ(ti.type, gguf::TensorType::F32) << t.name;
      continue;
    }
    ASSERT_EQ(ti.type, gguf::TensorType::Q8_0) << t.name;
    std::vector<uint8_t> expect(gguf::storage_bytes(gguf::TensorType::Q8_0, size_t(t.size)));
    kernels::quantize_q8_0(p.data() + t.offset, expect.data(), size_t(t.size));
    EXPECT_EQ(0, std::memcmp(ti.data, expect.data(), expect.size())) << t.name;
  }
  // F16 and BF16 round each weight once, to nearest even.
  convert::export_model(tmp / "m.gguf", tmp / "h.gguf", gguf::TensorType::F16);
  gguf::GgufFile h(tmp / "h.gguf");
  const auto& emb = layout.get("token_embd.weight");
  auto back = quant::tensor_floats(h, h.tensor("token_embd.weight"));
  for (int64_t i = 0; i < emb.size; ++i)
    ASSERT_EQ(back[size_t(i)], kernels::fp16_to_fp32(kernels::fp32_to_fp16(p[size_t(emb.offset + i)])));
}

// OUT.Modelfile beside OUT.gguf, one per export; a model whose own chat
// template is not the rendering ollama's TEMPLATE spells out is said to be
// approximated, ggtrain's own rendering is not.
TEST(Export, ModelfileIsNamedForItsGgufAndSaysWhenItApproximates) {
  TempDir tmp;
  auto write = [&](const std::string& name, const std::string& chat_template) {
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::str("llama"));
    if (!chat_template.empty()) w.set("tokenizer.chat_template", gguf::Value::str(chat_template));
    w.write(tmp / name);
    return chat::write_ollama_modelfile(tmp / name);
  };
  const std::string chatml(chat::template_info(chat::Template::kChatml).jinja);
  const auto own = write("own.gguf", chatml);
  EXPECT_EQ(own.path, tmp / "own.Modelfile");
  EXPECT_EQ(own.approximated, "");
  const auto family = write("family.gguf", chatml + "{% if tools %}{{ tools | tojson }}{% endif %}");
  EXPECT_EQ(family.path, tmp / "family.Modelfile");
  EXPECT_EQ(family.approximated, "chatml");
  EXPECT_EQ(write("plain.gguf", "").approximated, "");
  EXPECT_NE(test_support::slurp(tmp / "own.Modelfile").find("FROM ./own.gguf\n"), std::string::npos);
}

TEST(Export, ModelfileNamesTheGgufAndStopPiece) {
  const std::string mf = chat::ollama_modelfile("m.gguf", "</s>");
  EXPECT_NE(mf.find("FROM ./m.gguf\n"), std::string::npos);
  EXPECT_NE(mf.find("PARAMETER stop \"</s>\""), std::string::npos);
  EXPECT_NE(mf.find("{{ .Prompt }}"), std::string::npos);
}
