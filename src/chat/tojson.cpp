#include "chat/tojson.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace ggtrain::chat {

namespace {

using Json = nlohmann::ordered_json;

// JSON.stringify of a string: `"` and `\` escaped, the control characters
// below 0x20 as \b \f \n \r \t or \u00xx (lower-case hex), the rest as is.
void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(ch));
        else out += ch;
    }
  }
  out += '"';
}

// ECMAScript's Number::toString(10): the shortest digits that round-trip,
// plain from 1e-7 up to 1e21, else d.ddde+N.
std::string js_number(double v) {
  if (v == 0) return "0";  // -0 too
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-d.ddde+XX"
  const size_t e = sci.find('e');
  std::string digits;
  for (const char ch : sci.substr(0, e))
    if (ch >= '0' && ch <= '9') digits += ch;
  const int k = static_cast<int>(digits.size());
  const int n = std::atoi(sci.c_str() + e + 1) + 1;  // the value is 0.digits x 10^n
  std::string out = v < 0 ? "-" : "";
  if (k <= n && n <= 21) return out + digits + std::string(size_t(n - k), '0');
  if (0 < n && n <= 21) return out + digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  if (-6 < n && n <= 0) return out + "0." + std::string(size_t(-n), '0') + digits;
  const int exp = n - 1;
  out += digits.substr(0, 1);
  if (k > 1) out += "." + digits.substr(1);
  return out + "e" + (exp < 0 ? "-" : "+") + std::to_string(std::abs(exp));
}

void append_value(std::string& out, const Json& v, int indent, int depth) {
  const std::string item_sep = indent ? "," : ", ";
  const std::string pad = "\n" + std::string(size_t(indent * (depth + 1)), ' ');
  const std::string close_pad = "\n" + std::string(size_t(indent * depth), ' ');
  switch (v.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); return;
    case Json::value_t::number_float: out += js_number(v.get<double>()); return;
    case Json::value_t::string: append_string(out, v.get_ref<const std::string&>()); return;
    case Json::value_t::array:
    case Json::value_t::object: {
      const bool array = v.is_array();
      out += array ? '[' : '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += item_sep;
        first = false;
        if (indent) out += pad;
        if (!array) {
          append_string(out, it.key());
          out += ": ";
        }
        append_value(out, *it, indent, depth + 1);
      }
      if (indent && !v.empty()) out += close_pad;
      out += array ? ']' : '}';
      return;
    }
    default: fail("tojson: a binary value has no JSON text");
  }
}

Json parsed(std::string_view json) {
  Json v = Json::parse(json, nullptr, false);
  if (v.is_discarded()) fail("tojson: not JSON: {}", json.substr(0, 60));
  return v;
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  append_string(out, s);
  return out;
}

std::string tojson(std::string_view json, int indent) {
  std::string out;
  append_value(out, parsed(json), indent, 0);
  return out;
}

std::vector<std::pair<std::string, std::string>> argument_members(std::string_view json) {
  Json v = parsed(json);
  if (v.is_string()) v = parsed(v.get_ref<const std::string&>());
  if (!v.is_object()) fail("chat: a tool call's arguments are not a JSON object: {}", json.substr(0, 60));
  std::vector<std::pair<std::string, std::string>> members;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string text;
    if (it->is_string()) text = it->get<std::string>();
    else if (it->is_boolean()) text = it->get<bool>() ? "True" : "False";
    else if (it->is_null()) text = "None";
    else append_value(text, *it, 0, 0);
    members.emplace_back(it.key(), std::move(text));
  }
  return members;
}

bool json_string_value(std::string_view json, std::string* value) {
  if (json.empty() || json[0] != '"') return false;
  *value = parsed(json).get<std::string>();
  return true;
}

}  // namespace ggtrain::chat
