#include "support/reference_state.h"
#include "quant/gguf_floats.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "gguf/reader.h"
#include "model/params.h"

namespace ggtrain::test_support {

ReferenceState load_reference_state(const std::string& path) {
  gguf::GgufFile f(path);
  ReferenceState r;
  r.path = path;
  auto& c = r.config;
  c.d_model = int64_t(f.get_uint("ref.d_model"));
  c.n_layers = int64_t(f.get_uint("ref.n_layers"));
  c.n_heads = int64_t(f.get_uint("ref.n_heads"));
  c.n_kv_heads = int64_t(f.get_uint("ref.n_kv_heads"));
  c.d_ff = int64_t(f.get_uint("ref.d_ff"));
  c.vocab = int64_t(f.get_uint("ref.vocab"));
  c.tied = f.get_bool("ref.tied");
  // The reference used exactly these float32 values.
  c.rope_freq_base = float(f.get_float("ref.rope_freq_base"));
  c.rms_eps = float(f.get_float("ref.rms_eps"));
  r.seq_len = int64_t(f.get_uint("ref.seq_len"));
  r.batch = int64_t(f.get_uint("ref.batch"));
  c.ctx = r.seq_len;
  r.loss = f.get_float("ref.loss");
  r.lr = float(f.get_float("ref.adamw.lr"));
  r.adamw.beta1 = float(f.get_float("ref.adamw.beta1"));
  r.adamw.beta2 = float(f.get_float("ref.adamw.beta2"));
  r.adamw.eps = float(f.get_float("ref.adamw.eps"));
  r.adamw.weight_decay = float(f.get_float("ref.adamw.weight_decay"));
  r.adamw_step = int64_t(f.get_uint("ref.adamw.step"));

  auto tokens = f.to_i32(f.tensor("tokens"));
  const int64_t B = r.batch, T = r.seq_len;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      r.inputs.push_back(tokens[size_t(b * (T + 1) + t)]);
      r.targets.push_back(tokens[size_t(b * (T + 1) + t + 1)]);
    }
  r.logits = quant::tensor_floats(f, f.tensor("logits"));
  model::ParamLayout layout(c);
  for (const auto& t : layout.tensors()) {
    r.weights[t.name] = quant::tensor_floats(f, f.tensor(t.name));
    r.grads[t.name] = quant::tensor_floats(f, f.tensor("grad." + t.name));
    r.after_step[t.name] = quant::tensor_floats(f, f.tensor("adamw." + t.name));
  }
  return r;
}

std::vector<std::string> find_reference_states(const std::string& fixtures_dir, std::vector<FolderCount>* counts) {
  std::vector<std::string> dirs{fixtures_dir};
  if (const char* extra = std::getenv("GGTRAIN_EXTRA_FIXTURES")) {
    std::stringstream ss(extra);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  std::vector<std::string> found;
  for (const auto& d : dirs) {
    // A folder the user named that is not there is a mistake to report, not
    // a reason to check fewer files.
    if (!std::filesystem::is_directory(d))
      throw std::runtime_error("reference fixtures folder " + d + " does not exist" +
                               (d == fixtures_dir ? "" : " (named in GGTRAIN_EXTRA_FIXTURES)"));
    std::vector<std::string> here;
    for (const auto& e : std::filesystem::directory_iterator(d))
      if (e.path().extension() == ".gguf") here.push_back(e.path().string());
    std::sort(here.begin(), here.end());
    size_t n = 0;
    for (const auto& p : here) {
      gguf::GgufFile f(p);
      const auto* arch = f.find("general.architecture");
      if (arch && arch->type == gguf::ValueType::STRING && arch->s == "ggtrain-ref") {
        found.push_back(p);
        ++n;
      }
    }
    if (counts) counts->push_back({d, n});
  }
  return found;
}

}  // namespace ggtrain::test_support
