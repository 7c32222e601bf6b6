// chat/template: the templates as llama.cpp renders and detects them.
// llama.cpp's rendering is the truth here: the expected strings below are
// what its llm_chat_apply_template writes (tests/compat/llama_cpp_chat_check.sh
// compares hundreds more against llama.cpp itself and @huggingface/jinja).
#include <gtest/gtest.h>

#include "chat/conversation.h"
#include "chat/template.h"
#include "gguf/reader.h"
#include "support/files.h"
#include "tokenizer/tokenizer.h"
#include "train/run_config.h"
#include "train/run_data.h"

using namespace ggtrain;
using namespace ggtrain::chat;
using test_support::error_of;

namespace {

const Conversation kTwoTurns{
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello "}, {"user", "Who are you?"}};

tokenizer::Tokenizer spm() {
  return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"));
}

}  // namespace

TEST(ChatTemplates, RenderAsLlamaCpp) {
  EXPECT_EQ(render(Template::kChatml, kTwoTurns, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello "
            "<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(Template::kLlama3, kTwoTurns, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nWho are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(Template::kLlama2, kTwoTurns, true),
            "[INST] Be brief.\nHi [/INST] Hello </s>[INST] Who are you? [/INST]");
  EXPECT_EQ(render(Template::kMistral, kTwoTurns, true),
            "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST]  Hello </s>[INST] Who are you?[/INST]");
  EXPECT_EQ(render(Template::kGemma, kTwoTurns, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(Template::kPhi3, kTwoTurns, false),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n Hello <|end|>\n<|user|>\nWho are "
            "you?<|end|>\n");
  EXPECT_EQ(render(Template::kZephyr, kTwoTurns, true),
            "<|system|>\nBe brief.<|endoftext|>\n<|user|>\nHi<|endoftext|>\n<|assistant|>\n Hello <|endoftext|>\n"
            "<|user|>\nWho are you?<|endoftext|>\n<|assistant|>\n");
}

// The trained spans are exactly each answer (as the template writes it) and
// the marker that ends its turn; everything else carries no loss.
TEST(ChatTemplates, TrainedSpansAreTheAnswersAndTheirEnd) {
  const Conversation c{{"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}, {"assistant", "A2"}};
  for (const TemplateInfo& t : all_templates()) {
    SCOPED_TRACE(std::string(t.name));
    const auto spans = render_spans(t.id, c, false);
    std::string all, trained;
    for (const Span& s : spans) {
      all += s.text;
      if (s.trained) trained += s.text + "|";
    }
    EXPECT_EQ(all, render(t.id, c, false));
    const std::string lead = t.id == Template::kMistral ? " " : "";
    // Qwen3's and Qwen3.5's last answer starts with its (here empty) <think> block.
    const bool thinks = t.id == Template::kQwen3 || t.id == Template::kQwen35;
    const std::string last_lead = thinks ? "<think>\n\n</think>\n\n" : lead;
    const std::string end(t.end_of_turn);
    EXPECT_EQ(trained, lead + "A1" + end + "|" + last_lead + "A2" + end + "|");
  }
}

TEST(ChatTemplates, DetectedAsLlamaCppDetectsThem) {
  for (const TemplateInfo& t : all_templates()) {
    EXPECT_EQ(detect_template(t.jinja), t.id) << t.name;
    if (!t.llama_cpp_name.empty()) {
      EXPECT_EQ(detect_template(t.llama_cpp_name), t.id) << t.name;
    }
    EXPECT_EQ(template_named(t.name, "key"), t.id);
  }
  // Official templates in the wild (abridged to what the heuristics read).
  EXPECT_EQ(detect_template("{% for m in messages %}{{'<|im_start|>' + m['role']}}{% endfor %}"), Template::kChatml);
  EXPECT_EQ(detect_template("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"), Template::kLlama3);
  EXPECT_EQ(detect_template("{{ bos_token }}{% if %}<start_of_turn>{% endif %}"), Template::kGemma);
  // Ones llama.cpp takes for other templates, which ggtrain does not render.
  EXPECT_EQ(detect_template("{{ '<|im_start|>' }}{{ '<|im_sep|>' }}"), std::nullopt);  // phi4
  EXPECT_EQ(detect_template("<|user|>{{ x }}<|assistant|>"), std::nullopt);  // glmedge
  EXPECT_EQ(detect_template("{{ '<<SYS>>' }}[INST]"), std::nullopt);  // llama2-sys
  EXPECT_EQ(detect_template("USER: {{ x }} ASSISTANT: "), std::nullopt);  // vicuna
  EXPECT_EQ(detect_template(""), std::nullopt);
}

// Qwen3's and Gemma 3's own templates (tokenizer_config.json of those
// models), rendered by reading them: tests/compat/llama_cpp_chat_check.sh renders
// hundreds more with the real template strings in @huggingface/jinja.
TEST(ChatTemplates, RenderFamilyTemplatesAsTheirOwnJinja) {
  // Reasoning before the last query is dropped; the last answer gets an
  // empty <think> block; leading newlines of a reply go.
  const Conversation thinking{{"system", "Be brief."},
                              {"user", "Hi"},
                              {"assistant", "<think>\nmull\n</think>\n\n Hello "},
                              {"user", "Who are you?"},
                              {"assistant", "\nI am."}};
  EXPECT_EQ(render(Template::kQwen3, thinking, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello "
            "<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nI am."
            "<|im_end|>\n");
  // The last answer's own reasoning, trimmed of newlines; a generation
  // prompt renders the history as chatml does.
  Conversation reasoned = thinking;
  reasoned.back().content = "<think>\n\nstep one\n</think>\nI am.";
  EXPECT_NE(
      render(Template::kQwen3, reasoned, false).find("<|im_start|>assistant\n<think>\nstep one\n</think>\n\nI am."),
      std::string::npos);
  EXPECT_EQ(render(Template::kQwen3, kTwoTurns, true), render(Template::kChatml, kTwoTurns, true));
  // A user turn that only returns a tool's result is no query: answers after
  // the real last query keep their reasoning.
  const Conversation tool{{"user", "Q"},
                          {"assistant", "<think>r</think>A"},
                          {"user", "<tool_response>x</tool_response>"},
                          {"assistant", "B"}};
  EXPECT_EQ(render(Template::kQwen3, tool, false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n"
            "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>"
            "\n\nB<|im_end|>\n");
  // Gemma 3 keeps the system message's outer spaces; gemma (llama.cpp) trims them.
  const Conversation spaced{{"system", " Be brief. "}, {"user", "Hi"}};
  EXPECT_EQ(render(Template::kGemma3, spaced, true),
            "<start_of_turn>user\n Be brief. \n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(Template::kGemma, spaced, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(Template::kGemma3, kTwoTurns, true), render(Template::kGemma, kTwoTurns, true));
  // LFM2.5 keeps the last answer whole and cuts the others to their text
  // after the last </think>, trimmed; LFM2 keeps them all.
  const Conversation lfm{{"user", "Hi"},
                         {"assistant", "<think>a</think> x</think>\n Hello \n"},
                         {"user", "Who?"},
                         {"assistant", "<think>b</think> Me"}};
  EXPECT_EQ(render(Template::kLfm25, lfm, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nWho?<|im_end|>\n"
            "<|im_start|>assistant\n<think>b</think> Me<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(Template::kLfm2, lfm, false), render(Template::kChatml, lfm, false));
}

// SmolLM3's, written out from its Jinja: the metadata turn with the
// reasoning mode, the system message as custom instructions without its
// flags, answers without leading newlines, and in "/no_think" mode the empty
// reasoning block before each answer and in the prompt.
TEST(ChatTemplates, SmolLm3ReasoningModes) {
  const std::string head = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ";
  const Conversation plain{{"user", "Hi"}, {"assistant", "\n\nHello\n"}};
  const std::string thinking = render(Template::kSmolLm3, plain, true);
  EXPECT_TRUE(thinking.starts_with(head + "/think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named "
                                          "SmolLM, trained by Hugging Face. Your role as an assistant involves"));
  EXPECT_TRUE(thinking.ends_with("to reach the conclusion.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                 "<|im_start|>assistant\nHello\n<|im_end|>\n<|im_start|>assistant\n"));
  const Conversation no_think{{"system", "Be brief. /no_think /think \n"}, {"user", "Hi"}, {"assistant", "Hello"}};
  EXPECT_EQ(render(Template::kSmolLm3, no_think, true),
            head + "/no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                   "<|im_start|>assistant\n<think>\n\n</think>\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                   "</think>\n");
  // Only the flag: the default instructions of "/no_think" mode.
  const Conversation flag_only{{"system", "/no_think"}, {"user", "Hi"}};
  EXPECT_EQ(render(Template::kSmolLm3, flag_only, false),
            head + "/no_think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by "
                   "Hugging Face.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // The loss is on the answer and its end marker, not on the block the
  // template writes.
  const std::vector<Span> spans = render_spans(Template::kSmolLm3, no_think, false);
  std::string trained;
  for (const Span& s : spans)
    if (s.trained) trained += s.text;
  EXPECT_EQ(trained, "Hello<|im_end|>");
}

// The families' own templates (abridged to the texts that identify them)
// are recognised before llama.cpp's heuristics, which take them for chatml
// and gemma; the plain forms stay what llama.cpp makes of them.
TEST(ChatTemplates, FamilyTemplatesRecognisedBySignature) {
  const std::string qwen3 =
      "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
      "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>' }}";
  const std::string gemma3 =
      "{{ bos_token }}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}{{ '<start_of_turn>' + role }}";
  EXPECT_EQ(detect_template(qwen3), Template::kQwen3);
  EXPECT_EQ(family_template(qwen3), Template::kQwen3);
  EXPECT_EQ(detect_template(gemma3), Template::kGemma3);
  // LFM2's by its tool list's markers, as llama.cpp's is_lfm2_template;
  // LFM2.5's plain "List of tools: [" stays chatml.
  EXPECT_EQ(detect_template("{{- bos_token -}}\"<|im_start|>system\\n\" + \"List of tools: <|tool_list_start|>[\" + "
                            "\"]<|tool_list_end|>\""),
            Template::kLfm2);
  EXPECT_EQ(detect_template("{{- bos_token -}}\"<|im_start|>system\\n\" + \"List of tools: [\" + \"]\""),
            Template::kChatml);
  // LFM2.5's by the plain list and its keep_past_thinking.
  EXPECT_EQ(detect_template("{%- set keep_past_thinking = keep_past_thinking | default(false) -%}"
                            "\"<|im_start|>system\\n\" + \"List of tools: [\""),
            Template::kLfm25);
  // SmolLM3's as llama.cpp ships it (Unsloth's edit); the original, which
  // writes today's date, is not rendered as SmolLM3's.
  EXPECT_EQ(detect_template(std::string(template_info(Template::kSmolLm3).jinja)), Template::kSmolLm3);
  EXPECT_EQ(detect_template("{{- \"<|im_start|>system\\n\" -}}{%- set reasoning_mode = \"/no_think\" -%}"
                            "{{- \"Today Date: \" ~ strftime_now(\"%d %B %Y\") -}}{{- \"Reasoning Mode: \" -}}"),
            Template::kChatml);
  EXPECT_EQ(family_template(std::string(template_info(Template::kChatml).jinja)), std::nullopt);
  EXPECT_EQ(detect_template("{{ '<|im_start|>' }}{{ '</think>' }}"), Template::kChatml);  // QwQ-like, no query index
  EXPECT_EQ(detect_template("{{ bos_token }}<start_of_turn>"), Template::kGemma);
  std::string warning;
  EXPECT_EQ(resolve_template("auto", qwen3, &warning), Template::kQwen3);
  EXPECT_EQ(warning, "");
}

TEST(ChatTemplates, AutoFallsBackToChatmlWithWarning) {
  std::string warning;
  EXPECT_EQ(resolve_template("auto", "", &warning), Template::kChatml);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(resolve_template("auto", std::string(all_templates()[1].jinja), &warning), Template::kLlama3);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(resolve_template("auto", "USER: {{ messages }}\nASSISTANT: and a long tail of template text", &warning),
            Template::kChatml);
  EXPECT_NE(warning.find("\"USER: {{ messages }} ASSISTANT: and a lo...\""), std::string::npos) << warning;
  EXPECT_NE(warning.find("chatml"), std::string::npos);
  EXPECT_EQ(resolve_template("gemma", "anything", &warning), Template::kGemma);
  EXPECT_NE(error_of([] { template_named("vicuna", "data.chat_template"); }).find("vicuna"), std::string::npos);
}

// A run on a model whose vocabulary carries Qwen3's own template keeps that
// string (tools and all) in its checkpoints, since it renders as it does;
// a template ggtrain only approximates by llama.cpp's heuristics becomes the
// rendered template's Jinja.
TEST(ChatTemplates, RunKeepsAFamilysOwnTemplate) {
  const std::string qwen3 = "{%- if tools %}{{ tools | tojson }}{%- endif %}{%- set ns = namespace("
                            "last_query_index=messages|length - 1) %}<|im_start|>...</think>";
  train::RunConfig c;
  c.data.format = train::DataFormat::kChat;
  c.data.chat_template = "auto";
  tokenizer::Tokenizer tok = spm();
  tok.set_chat_template(qwen3, 0);
  train::add_chat_vocabulary(tok, c, true);
  EXPECT_EQ(tok.chat_template(), qwen3);
  EXPECT_EQ(tok.eot_id(), tok.token_id("<|im_end|>"));
  tokenizer::Tokenizer plain = spm();
  plain.set_chat_template("{% for m in messages %}{{ '<|im_start|>' + m['role'] }}{% endfor %}", 0);
  train::add_chat_vocabulary(plain, c, true);
  EXPECT_EQ(plain.chat_template(), template_info(Template::kChatml).jinja);
}

// Only Qwen3.5's generation prompt opens the reasoning block (chat then
// hides the reply's start up to "</think>").
TEST(ChatTemplates, OnlyQwen35PromptOpensReasoning) {
  for (const TemplateInfo& t : all_templates())
    EXPECT_EQ(prompt_opens_reasoning(t.id), t.id == Template::kQwen35) << t.name;
}
