#pragma once
// Jinja's `tojson` filter as chat templates use it to print tool definitions
// and call arguments: the bytes @huggingface/jinja writes (JavaScript's
// JSON.stringify for numbers and strings; ", " and ": " between items, or
// one item per line under `indent` with "," and ": "), which are also those
// of Python's json.dumps(ensure_ascii=False) that transformers runs, but for
// integral floats (3.0 prints as 3, as in JavaScript).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ggtrain::chat {

// `json` is JSON text (members kept in its order); indent 0 = one line.
// Error when the text is not JSON.
std::string tojson(std::string_view json, int indent = 0);

// JSON.stringify of a string (what `tojson` prints for one).
std::string json_quote(std::string_view s);

// True when `json` is a JSON string, with its value in *value: templates
// print arguments given as a string as they are.
bool json_string_value(std::string_view json, std::string* value);

// The members of a call's arguments (a JSON object, or a JSON string holding
// one), each value as Qwen3.5's template prints it: a string as it is, an
// object or list through `tojson`, anything else through Jinja's `string`
// filter as llama.cpp's engine (and Python's) prints it: True, False, None,
// numbers as `tojson` prints them. Error when there is no object.
std::vector<std::pair<std::string, std::string>> argument_members(std::string_view json);

}  // namespace ggtrain::chat
