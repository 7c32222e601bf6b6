// Fuzz target: preference records (src/chat/preference_record.h,
// data.format = "preference"), a JSONL file. Each line is parsed and turned
// into its chosen and rejected conversations or rejected with a
// ggtrain::Error; an accepted pair shares its prompt (every message but the
// last), ends each conversation with an assistant answer, and renders with
// every chat template.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "chat/preference_record.h"
#include "chat/template.h"
#include "fuzz_util.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const std::string line(text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) continue;
    try {
      const chat::PreferencePair p = chat::preference_pair_of(record, "fuzz:" + std::to_string(++line_no));
      const chat::Conversation &c = p.chosen, &r = p.rejected;
      if (c.size() < 2 || c.size() != r.size()) ggtrain_fuzz::finding("chosen and rejected differ in shape");
      for (size_t i = 0; i + 1 < c.size(); ++i)
        if (c[i].role != r[i].role || c[i].content != r[i].content)
          ggtrain_fuzz::finding("chosen and rejected do not share their prompt");
      if (c[c.size() - 1].role != "assistant" || r[r.size() - 1].role != "assistant")
        ggtrain_fuzz::finding("an answer that is not the assistant's");
      for (const chat::TemplateInfo& t : chat::all_templates())
        ggtrain_fuzz::sink(chat::render(t.id, c, false).size() + chat::render(t.id, r, false).size());
    } catch (const Error&) {
    }
  }
  return 0;
}
