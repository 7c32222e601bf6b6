#include "chat/rendered_records.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "util/error.h"

namespace ggtrain::chat {

std::vector<int32_t> rendered_record_tokens(const std::string& path, const tokenizer::Tokenizer& tok, Template t) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read", path);
  std::vector<int32_t> ids;
  std::string line;
  int64_t records = 0;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    const nlohmann::ordered_json record = nlohmann::ordered_json::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object())
      fail("{}: not a JSON object; each line of a chat JSONL file is one record", where);
    const Conversation c = conversation_of(record, detect_record_format(record, where), where);
    check_renders(t, c, where);
    const EncodedExample e = encode_spans(tok, render_spans(t, c, false));
    ids.insert(ids.end(), e.ids.begin(), e.ids.end());
    ++records;
  }
  if (records == 0) fail("{}: no records; give chat JSONL (one conversation per line)", path);
  return ids;
}

}  // namespace ggtrain::chat
