// A random-weight llama GGUF of a preset's shape (default smol135: the
// SmolLM2-135M shape) with a synthetic SPM vocabulary of the preset's size:
// 3 specials, 256 byte pieces, then filler pieces. For memory/speed
// measurements of finetuning (bench/lora_memory.sh), never for quality.
// KEY=VALUE arguments change the preset's config keys (model.n_layers=4: a
// released shape at reduced depth).
//
//   make_random_model OUT.gguf [PRESET] [KEY=VALUE ...]
#include <fmt/core.h>

#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "train/run_config.h"

using namespace ggtrain;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: make_random_model OUT.gguf [PRESET] [KEY=VALUE ...]\n");
    return 2;
  }
  const std::string preset = argc >= 3 ? argv[2] : "smol135";
  auto rc = train::preset(preset);
  for (int i = 3; i < argc; ++i) train::apply_override(rc, argv[i]);
  const model::Config c = rc.model_config(rc.data.vocab_size);
  const model::ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  model::init_params(c, layout, params.data(), 1);
  std::vector<std::string> pieces{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) pieces.push_back(fmt::format("<0x{:02X}>", b)), types.push_back(6);
  while (int64_t(pieces.size()) < c.vocab)
    pieces.push_back(fmt::format("\xe2\x96\x81w{}", pieces.size())), types.push_back(1);
  std::vector<float> scores(pieces.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i);
  gguf::GgufWriter w;
  w.set("general.name", gguf::Value::str("random-" + preset));
  model::add_model_tensors(w, c, layout, params.data());
  w.set("tokenizer.ggml.model", gguf::Value::str("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(pieces));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(2));
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(0));
  w.write(argv[1]);
  fmt::print("wrote {}: {} parameters, vocab {}\n", argv[1], layout.total(), c.vocab);
  return 0;
}
