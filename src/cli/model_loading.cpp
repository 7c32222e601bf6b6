#include "cli/model_loading.h"

#include <charconv>

#include "gguf/reader.h"
#include "model/checkpoint.h"
#include "model/params.h"
#include "util/error.h"

namespace ggtrain::cli {

LoadedModel load_model(const std::string& path) {
  gguf::GgufFile f(path);
  LoadedModel m;
  m.config = model::config_from_llama_gguf(f);
  model::ParamLayout layout(m.config);
  m.params.assign(size_t(layout.total()), 0.f);
  model::load_llama_params(f, layout, m.params.data());
  return m;
}

std::vector<int32_t> parse_token_list(const std::string& csv) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= csv.size()) {
    size_t end = csv.find(',', pos);
    if (end == std::string::npos) end = csv.size();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(csv.data() + pos, csv.data() + end, v);
    if (ec != std::errc() || p != csv.data() + end) fail("--tokens: '{}' is not a token id", csv.substr(pos, end - pos));
    ids.push_back(v);
    pos = end + 1;
  }
  return ids;
}

}  // namespace ggtrain::cli
