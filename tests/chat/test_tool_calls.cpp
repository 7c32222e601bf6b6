// Tool calling in chat records: the OpenAI / Hugging Face shape read
// (chat/conversation), JSON printed as chat templates' `tojson` prints it
// (chat/tojson), and Qwen3's own template rendering definitions, calls and
// outputs with the loss on the assistant's turns only (chat/template). The
// expected strings are @huggingface/jinja's (0.5.11) renders of the same
// inputs; tests/compat/llama_cpp_chat_check.sh compares 60 more against it
// and llama.cpp's Jinja engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_data.h"
#include "chat/conversation.h"
#include "chat/template.h"
#include "chat/tojson.h"
#include "corpus/batch_loader.h"
#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "support/files.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using namespace ggtrain::chat;
using test_support::error_of;

namespace {

// Weather in two cities: two calls (arguments as an object, then as a JSON
// string, one call without the "function" wrapper), their two outputs, the
// answer.
constexpr const char* kWeatherRecord =
    R"({"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], )"
    R"("messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris )"
    R"(and Lyon?"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "id": "c1", )"
    R"("function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}, {"name": "get_weather", )"
    R"("arguments": "{\"city\": \"Lyon\"}"}]}, {"role": "tool", "tool_call_id": "c1", "content": "18 C"}, )"
    R"({"role": "tool", "content": "21 C"}, {"role": "assistant", "content": "Paris 18 C, Lyon 21 C."}]})";

Conversation weather() {
  return conversation_of(nlohmann::ordered_json::parse(kWeatherRecord), RecordFormat::kChat, "w:1");
}

}  // namespace

// JavaScript's number and string forms, members in the text's order, ", "
// and ": " on one line or "," and one item per line under indent.
TEST(ChatTools, TojsonAsHuggingFaceJinja) {
  const std::string in =
      R"({"b":1,"a":[1,2.5,"x\"y\n\\"],"c":{},"d":[],"e":null,"f":true,"g":3.0,"h":1e21,"i":1e-7,"j":0.000001,)"
      R"("k":-0.0,"l":"é\u0001\t","m":[{"n":[]}],"o":123456789.125,"p":-1.5e-9})";
  EXPECT_EQ(tojson(in),
            R"({"b": 1, "a": [1, 2.5, "x\"y\n\\"], "c": {}, "d": [], "e": null, "f": true, "g": 3, "h": 1e+21, )"
            R"("i": 1e-7, "j": 0.000001, "k": 0, "l": "é\u0001\t", "m": [{"n": []}], "o": 123456789.125, )"
            R"("p": -1.5e-9})");
  EXPECT_EQ(
      tojson(in, 4),
      "{\n    \"b\": 1,\n    \"a\": [\n        1,\n        2.5,\n        \"x\\\"y\\n\\\\\"\n    ],\n    \"c\": {},\n"
      "    \"d\": [],\n    \"e\": null,\n    \"f\": true,\n    \"g\": 3,\n    \"h\": 1e+21,\n    \"i\": 1e-7,\n"
      "    \"j\": 0.000001,\n    \"k\": 0,\n    \"l\": \"é\\u0001\\t\",\n    \"m\": [\n        {\n"
      "            \"n\": []\n        }\n    ],\n    \"o\": 123456789.125,\n    \"p\": -1.5e-9\n}");
  std::string s;
  EXPECT_TRUE(json_string_value(R"("{\"a\": 1}")", &s));
  EXPECT_EQ(s, R"({"a": 1})");
  EXPECT_FALSE(json_string_value(R"({"a": 1})", &s));
  EXPECT_NE(error_of([] { tojson("{oops"); }), "");
}

TEST(ChatTools, RecordsReadCallsOutputsAndTools) {
  const Conversation c = weather();
  ASSERT_EQ(c.size(), 6u);
  EXPECT_TRUE(c.uses_tools());
  ASSERT_TRUE(c.tools);
  ASSERT_EQ(c.tools->size(), 1u);
  EXPECT_EQ(tojson((*c.tools)[0]).substr(0, 52), R"({"type": "function", "function": {"name": "get_weath)");
  EXPECT_EQ(c[2].content, "");
  ASSERT_EQ(c[2].tool_calls.size(), 2u);
  EXPECT_EQ(c[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(c[2].tool_calls[0].arguments, R"({"city":"Paris","days":2})");  // the record's member order
  EXPECT_EQ(c[2].tool_calls[1].arguments, R"("{\"city\": \"Lyon\"}")");
  EXPECT_EQ(c[3].role, "tool");
  EXPECT_FALSE(Conversation({{"user", "u"}, {"assistant", "a"}}).uses_tools());
  // tool_call_id is read by neither template here, so it is named.
  EXPECT_EQ(ignored_members(nlohmann::ordered_json::parse(kWeatherRecord), RecordFormat::kChat),
            std::vector<std::string>{"messages[].tool_call_id"});

  auto err = [](const char* messages) {
    return error_of([&] {
      conversation_of(nlohmann::ordered_json::parse(std::string(R"({"messages": )") + messages + "}"),
                      RecordFormat::kChat, "f:2");
    });
  };
  EXPECT_EQ(err(R"([{"role": "user", "content": "u", "tool_calls": []}])"),
            "f:2: messages[0]: only an assistant turn may have \"tool_calls\"");
  EXPECT_EQ(err(R"([{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [{"name": "f"}]}])"),
            "f:2: messages[1].tool_calls[0]: no member \"arguments\" (give {} for a call without arguments)");
  EXPECT_EQ(err(R"([{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": {}}])"),
            "f:2: messages[1]: \"tool_calls\" is object, not an array of calls");
  EXPECT_EQ(err(R"([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "tools": {})"),
            "f:2: member \"tools\" is object, not an array of tool definitions");
}

// A call's outputs follow it, then an answer; nothing else does.
TEST(ChatTools, RulesForToolTurns) {
  auto err = [](const Conversation& c, bool training) {
    return error_of([&] { check_conversation(c, training, "x:3"); });
  };
  const Message call("assistant", "", {{"f", "{}"}});
  EXPECT_EQ(err({{"user", "u"}, call, {"tool", "out"}, {"tool", "out 2"}, {"assistant", "a"}}, true), "");
  EXPECT_EQ(err({{"user", "u"}, call}, true), "");  // learning to call
  EXPECT_EQ(err({{"user", "u"}, call, {"tool", "out"}}, false), "");  // a prompt for the answer
  EXPECT_EQ(err({{"user", "u"}, call, {"user", "v"}, {"assistant", "a"}}, true),
            "x:3: message 2 is a user turn where the output of message 1's tool calls (a tool turn) belongs");
  EXPECT_EQ(err({{"user", "u"}, call, {"tool", "out"}, {"user", "v"}, {"assistant", "a"}}, true),
            "x:3: message 3 is a user turn where another tool output or an assistant turn belongs");
  EXPECT_EQ(err({{"user", "u"}, {"assistant", "a"}, {"tool", "out"}}, false),
            "x:3: message 2 is a tool turn where a user turn belongs (turns alternate from user; a tool turn follows "
            "an assistant turn with tool calls)");
  EXPECT_EQ(err({{"tool", "out"}, {"assistant", "a"}}, true),
            "x:3: message 0 is a tool turn; a tool's output follows a call");
  EXPECT_EQ(err({{"user", "u"}, {"assistant", " "}}, true), "x:3: message 1 (assistant) has empty content");
}

TEST(ChatTools, Qwen3RendersCallsAndTrainsOnThem) {
  const std::string system =
      "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": "
      "\"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\", \"parameters\": "
      "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
      "</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris and Lyon?<|im_end|>\n"
      "<|im_start|>assistant\n";
  const std::string calls =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call><|im_end|>";
  const std::string outputs =
      "\n<|im_start|>user\n<tool_response>\n18 C\n</tool_response>\n<tool_response>\n21 C\n</tool_response>"
      "<|im_end|>\n<|im_start|>assistant\n";
  const std::string answer = "<think>\n\n</think>\n\nParis 18 C, Lyon 21 C.<|im_end|>";
  const std::vector<Span> spans = render_spans(Template::kQwen3, weather(), false);
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(spans[0].text, system);
  EXPECT_EQ(spans[1].text, calls);
  EXPECT_TRUE(spans[1].trained);
  EXPECT_EQ(spans[2].text, outputs);
  EXPECT_FALSE(spans[2].trained);
  EXPECT_EQ(spans[3].text, answer);
  EXPECT_TRUE(spans[3].trained);
  EXPECT_EQ(spans[4].text, "\n");
  // The string ggtrain writes as the model's template is Qwen3's own, with
  // its tool branches.
  EXPECT_NE(template_info(Template::kQwen3).jinja.find("tool_call.arguments | tojson"), std::string_view::npos);
}

// Qwen3.5's template: the tools before the system message, each call an XML
// block whose parameters print as llama.cpp's Jinja engine prints them (the
// expected text is its render of the same record: True and None as Python
// writes them, 3.0 as 3, lists and objects through tojson), answers before
// the last question without their reasoning, and a generation prompt that
// opens a <think> block.
TEST(ChatTools, Qwen35RendersCallsAsLlamaCppsEngine) {
  Conversation c = conversation_of(
      nlohmann::ordered_json::parse(
          R"({"tools": [{"type": "function", "function": {"name": "calc", "description": "d", "parameters": )"
          R"({"type": "object"}}}], "messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", )"
          R"("content": "What is 2+2?"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nFour", )"
          R"("tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"a": true, "b": null, )"
          R"("c": 0.5, "d": 1e21, "e": [1, "x"], "f": {"g": 2}, "h": "str", "i": 42, "l": 3.0}}}]}, )"
          R"({"role": "tool", "content": "4"}, {"role": "assistant", "content": "It is four."}]})"),
      RecordFormat::kChat, "r:1");
  c.emplace_back("user", "thanks");  // a prompt: records end on an answer
  const std::vector<Span> spans = render_spans(Template::kQwen35, c, false);
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_TRUE(spans[0].text.starts_with("<|im_start|>system\n# Tools\n\nYou have access to the following "
                                        "functions:\n\n<tools>\n{\"type\": \"function\""));
  EXPECT_TRUE(spans[0].text.ends_with("</IMPORTANT>\n\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                                      "<|im_start|>assistant\n"))
      << spans[0].text;
  EXPECT_EQ(spans[1].text,
            "Four\n\n<tool_call>\n<function=calc>\n<parameter=a>\nTrue\n</parameter>\n"
            "<parameter=b>\nNone\n</parameter>\n<parameter=c>\n0.5\n</parameter>\n<parameter=d>\n1e+21\n"
            "</parameter>\n<parameter=e>\n[1, \"x\"]\n</parameter>\n<parameter=f>\n{\"g\": 2}\n</parameter>\n"
            "<parameter=h>\nstr\n</parameter>\n<parameter=i>\n42\n</parameter>\n<parameter=l>\n3\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>");
  EXPECT_TRUE(spans[1].trained);
  EXPECT_EQ(spans[2].text,
            "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(spans[2].trained);
  EXPECT_EQ(spans[3].text, "It is four.<|im_end|>");
  EXPECT_EQ(spans[4].text, "\n<|im_start|>user\nthanks<|im_end|>\n");
  EXPECT_EQ(render(Template::kQwen35, c, true).substr(render(Template::kQwen35, c, false).size()),
            "<|im_start|>assistant\n<think>\n");
}

// Llama 3.1's template: the tools, indented, in the first user turn; one
// call per answer, as the answer's whole text; outputs as JSON strings.
TEST(ChatTools, Llama31RendersOneCallPerTurn) {
  Conversation c = weather();
  c[2].tool_calls.resize(1);
  c.erase(c.begin() + 4);  // the second output
  const std::string prompt =
      "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n"
      "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the "
      "following functions, please respond with a JSON for a function call with its proper arguments that best "
      "answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
      "argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
      "        \"name\": \"get_weather\",\n        \"description\": \"Weather now\",\n        \"parameters\": {\n"
      "            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n"
      "                    \"type\": \"string\"\n                }\n            },\n            \"required\": [\n"
      "                \"city\"\n            ]\n        }\n    }\n}\n\nWeather in Paris and Lyon?<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const std::vector<Span> spans = render_spans(Template::kLlama31, c, false);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].text, prompt);
  EXPECT_EQ(spans[1].text, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}<|eot_id|>");
  EXPECT_EQ(spans[2].text,
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C\"<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\n");
  EXPECT_EQ(spans[3].text, "Paris 18 C, Lyon 21 C.<|eot_id|>");
  EXPECT_TRUE(spans[1].trained && spans[3].trained && !spans[2].trained);
  // Its template raises on two calls in a turn and drops text beside a
  // call: ggtrain refuses both, naming the message.
  EXPECT_EQ(error_of([] { check_renders(Template::kLlama31, weather(), "w:1"); }),
            "w:1: message 2 makes 2 tool calls; chat template \"llama3.1\" renders one per turn (split them into "
            "turns, each followed by its output)");
  c[2].content = "Let me look.";
  EXPECT_EQ(error_of([&] { check_renders(Template::kLlama31, c, "w:1"); }),
            "w:1: message 2 has text beside its tool calls; chat template \"llama3.1\" renders only the call (move "
            "the text to a turn of its own or leave it out)");
  EXPECT_EQ(error_of([&] { check_renders(Template::kQwen3, c, "w:1"); }), "");
  // Without tools its system turn still carries the dates.
  EXPECT_EQ(render(Template::kLlama31, {{"user", " hi "}, {"assistant", "yo"}}, true),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
            "2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\nyo<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// LFM2's template: the tool list in the system turn, after the system
// message; calls are the answer's own text, so a record's tool_calls (which
// the template drops) are refused, naming the form LFM2 writes them in.
TEST(ChatTools, Lfm2ListsToolsAndRefusesCallMembers) {
  const Conversation c = conversation_of(
      nlohmann::ordered_json::parse(
          R"({"tools": [{"type": "function", "function": {"name": "calc", "parameters": {"a": 1.0}}}, {"b": []}], )"
          R"("messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "2+2?"}, )"
          R"({"role": "assistant", "content": "<|tool_call_start|>[calc(a=2)]<|tool_call_end|>"}]})"),
      RecordFormat::kChat, "r:1");
  const std::vector<Span> spans = render_spans(Template::kLfm2, c, false);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].text,
            "<|im_start|>system\n Be brief. \nList of tools: <|tool_list_start|>[{\"type\": \"function\", "
            "\"function\": {\"name\": \"calc\", \"parameters\": {\"a\": 1}}}, {\"b\": []}]<|tool_list_end|><|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(spans[1].text, "<|tool_call_start|>[calc(a=2)]<|tool_call_end|><|im_end|>");
  EXPECT_TRUE(spans[1].trained);
  EXPECT_EQ(spans[2].text, "\n");
  // Without a system message the list opens the system turn; without either
  // there is no system turn.
  Conversation bare(c.begin() + 1, c.end());
  bare.tools = c.tools;
  EXPECT_TRUE(render(Template::kLfm2, bare, false).starts_with("<|im_start|>system\nList of tools: "));
  bare.tools.reset();
  EXPECT_EQ(render(Template::kLfm2, bare, true), render(Template::kChatml, bare, true));
  EXPECT_EQ(error_of([&] { check_renders(Template::kLfm2, weather(), "w:1"); }),
            "w:1: message 2 has tool_calls, which chat template \"lfm2\" does not render: its model writes a call as "
            "the answer's own text (<|tool_call_start|>[name(arg=\"value\")]<|tool_call_end|>); put the calls there");
}

// A template that renders no tools refuses such a record by name; the
// data pipeline says which record.
TEST(ChatTools, TemplateWithoutToolsRefusesTheRecord) {
  const Conversation c = weather();
  EXPECT_EQ(error_of([&] { check_renders(Template::kChatml, c, "w:1"); }),
            "w:1: the record has tool definitions, calls or outputs, and chat template \"chatml\" renders none of "
            "them; use a template that does (qwen3.5, qwen3, llama3.1, lfm2, lfm2.5) or leave such records out");
  EXPECT_EQ(error_of([&] { check_renders(Template::kQwen3, c, "w:1"); }), "");
  test_support::TempDir tmp;
  test_support::spit(tmp / "tools.jsonl", std::string(kWeatherRecord) + "\n");
  ChatDataOptions o;
  o.corpus = {tmp / "tools.jsonl"};
  o.seq_len = 2048;
  o.val_fraction = 0;
  const auto tok = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"))
                       .with_control_tokens({"<|im_start|>", "<|im_end|>"});
  EXPECT_NE(error_of([&] {
              prepare_chat_data(o, tok, tmp / "a", false);
            }).find(tmp / "tools.jsonl" + ":1: the record has tool definitions"),
            std::string::npos);
  // With Qwen3's template the trained tokens are the calls and the answer.
  o.chat_template = Template::kQwen3;
  const corpus::PreparedData d = prepare_chat_data(o, tok, tmp / "b", false);
  const corpus::TokenStream ids(d.train_shards), flags(d.train_flags);
  std::vector<int32_t> all(size_t(ids.size())), fl(size_t(flags.size()));
  ids.read(0, ids.size(), all.data());
  flags.read(0, flags.size(), fl.data());
  std::vector<int32_t> trained;
  for (size_t i = 0; i < all.size(); ++i)
    if (fl[i] & corpus::kFlagTrained) trained.push_back(all[i]);
  const std::string text = tok.decode(trained);
  EXPECT_NE(text.find("\"arguments\": {\"city\": \"Paris\", \"days\": 2}"), std::string::npos) << text;
  EXPECT_NE(text.find("Paris 18 C, Lyon 21 C."), std::string::npos) << text;
  EXPECT_EQ(text.find("<tool_response>"), std::string::npos) << text;
  EXPECT_EQ(text.find("Weather in"), std::string::npos) << text;
}
