#pragma once
// Chat templates, rendered byte for byte as llama.cpp's built-in
// llm_chat_apply_template renders them (src/llama-chat.cpp) or, for a model
// family's own template (Qwen3, Gemma 3), as that template renders in a
// Jinja engine (llama.cpp --jinja, transformers), each with the
// Jinja string that renders the same bytes (the GGUF's
// tokenizer.chat_template: llama.cpp recognises it by its heuristics and
// Jinja engines render it directly; tests/node checks both agree), and the
// render cut into spans so that training can put the loss on the answers.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/conversation.h"

namespace ggtrain::chat {

enum class Template {
  kChatml,
  kLlama3,
  kLlama2,
  kMistral,
  kGemma,
  kPhi3,
  kZephyr,
  kQwen3,
  kGemma3,
  kLlama31,
  kQwen35,
  kLfm2,
  kLfm25,
  kSmolLm3
};

// How a template renders tool definitions, calls and their outputs.
struct ToolSupport {
  bool renders = false;
  bool one_call_per_turn = false;  // more raise an error in the template
  bool text_beside_calls = true;  // false: a calling answer's text is dropped
  // false: the template drops a turn's tool_calls; the model writes its
  // calls in the answer's text, as calls_as_text shows
  bool calls = true;
  std::string_view calls_as_text;
};

struct TemplateInfo {
  Template id;
  // (fields in the order of all_templates()' initialisers)
  std::string_view name;  // data.chat_template's value
  // llama.cpp's name for it (llama_chat_builtin_templates); empty for a
  // model family's own template, which llama.cpp's built-in renderer does not
  // render as the family does (it takes Qwen3's for chatml, Gemma 3's for gemma).
  std::string_view llama_cpp_name;
  std::string_view jinja;  // tokenizer.chat_template
  // Texts that must be single (control) tokens of the vocabulary.
  std::vector<std::string_view> markers;
  std::string_view end_of_turn;  // the marker that ends an assistant turn: the eot token
  // The same rendering in ollama's Modelfile TEMPLATE syntax (Go
  // text/template over .Messages), ending with the generation prompt.
  // llama.cpp's trim() of llama3/gemma content has no counterpart there.
  std::string_view ollama;
  // Texts a model family's own tokenizer.chat_template holds, all of them:
  // how "auto" recognises it before llama.cpp's heuristics would take it for
  // another template. Empty for llama.cpp's built-in templates.
  std::vector<std::string_view> signature;
  ToolSupport tools;
};

const std::vector<TemplateInfo>& all_templates();
const TemplateInfo& template_info(Template t);
// Every template's name, "chatml, llama3, ...", for help and messages.
std::string template_names_text();
// data.chat_template's names; Error naming `key` and the known names.
Template template_named(std::string_view name, std::string_view key);

// data.chat_template resolved: a template's name, or "auto": the one
// llama.cpp recognises in `model_template` (a model's tokenizer.chat_template),
// else chatml. *warning is set when "auto" falls back although the model
// has a template (naming its first characters).
Template resolve_template(std::string_view setting, const std::string& model_template, std::string* warning);

// The template of `jinja`: a model family's own template by its signature,
// else llama.cpp's llm_chat_detect_template for the templates above; nullopt
// when llama.cpp would take it for another one or none.
std::optional<Template> detect_template(std::string_view jinja);
// A model family's own template (by signature only), or nullopt. A run that
// recognises one keeps the model's string in its checkpoints, so that Jinja
// engines render the finetuned model's conversations as the model's.
std::optional<Template> family_template(std::string_view jinja);

// A piece of rendered text; `trained` pieces carry the loss (an assistant's
// content and the marker that ends its turn).
struct Span {
  std::string text;
  bool trained = false;
};

// Error naming `where` when template `t` cannot render the conversation as
// its model's template would: tools, calls or tool outputs it renders none
// of (they are never dropped silently), or no question for Qwen3.5's.
void check_renders(Template t, const Conversation& c, std::string_view where);

// The conversation rendered as llama.cpp renders it (add_ass =
// add_generation_prompt), cut into spans; their concatenation is render().
std::vector<Span> render_spans(Template t, const Conversation& c, bool add_generation_prompt);
std::string render(Template t, const Conversation& c, bool add_generation_prompt);

// Whether t's generation prompt opens a reasoning block ("<think>\n"), so
// that a reply starts inside it.
bool prompt_opens_reasoning(Template t);

// llama.cpp's trim(): ASCII white space off both ends (isspace).
std::string trim(std::string_view s);

}  // namespace ggtrain::chat
