#include "chat/template.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"

namespace ggtrain::chat {

namespace {

// Each Jinja string renders what the C++ below renders for conversations
// that pass check_conversation. They name no bos_token: like llama.cpp's
// built-in renderers, BOS comes from the tokenizer (add_bos_token).
constexpr std::string_view kChatmlJinja =
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";
constexpr std::string_view kLlama3Jinja =
    "{%- for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "(message['content'] | trim) + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
// llama.cpp's "llama2" (no <<SYS>> block: a system message is the first
// turn's text and a newline).
constexpr std::string_view kLlama2Jinja =
    "{%- for message in messages %}{%- if loop.first or messages[loop.index0 - 1]['role'] == 'assistant' %}"
    "{{ '[INST] ' }}{%- endif %}{%- if message['role'] == 'system' %}{{ message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'user' %}{{ message['content'] + ' [/INST]' }}"
    "{%- else %}{{ message['content'] + '</s>' }}{%- endif %}{%- endfor %}";
// llama.cpp's "mistral-v7".
constexpr std::string_view kMistralJinja =
    "{%- for message in messages %}{%- if message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + "
    "'[/SYSTEM_PROMPT]' }}{%- elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}"
    "{%- else %}{{ ' ' + message['content'] + '</s>' }}{%- endif %}{%- endfor %}";
// The system message goes into the first user turn (gemma has no system role).
constexpr std::string_view kGemmaJinja =
    "{%- for message in messages %}{%- if message['role'] != 'system' %}{{ '<start_of_turn>' + "
    "('model' if message['role'] == 'assistant' else message['role']) + '\\n' }}{%- if loop.index0 == 1 and "
    "messages[0]['role'] == 'system' %}{{ (messages[0]['content'] | trim) + '\\n\\n' }}{%- endif %}"
    "{{ (message['content'] | trim) + '<end_of_turn>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<start_of_turn>model\\n' }}{%- endif %}";
constexpr std::string_view kPhi3Jinja =
    "{%- for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|assistant|>\\n' }}{%- endif %}";
// '<|' + 'assistant|>': llama.cpp takes a template holding both "<|user|>"
// and "<|assistant|>" for glmedge, so the second is never written whole.
constexpr std::string_view kZephyrJinja =
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{{ '<|user|>\\n' }}{%- else %}"
    "{{ '<|' + message['role'] + '|>\\n' }}{%- endif %}{{ message['content'] + '<|endoftext|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|' + 'assistant|>\\n' }}{%- endif %}";

// Qwen3's own template for conversations without tools, in the same order:
// the system message, the index of the last real user query (a user turn
// that only wraps a <tool_response> is none), then each turn. An answer
// holding "</think>" splits into its reasoning and its reply; the reasoning
// is kept only after the last query, and the last answer always gets a
// <think> block, empty if it had none.
constexpr std::string_view kQwen3Jinja =
    "{%- if messages[0]['role'] == 'system' %}{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}{%- set ns = namespace(found=false, last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}{%- if not ns.found and message['role'] == 'user' and not "
    "(message['content'].startswith('<tool_response>') and message['content'].endswith('</tool_response>')) %}"
    "{%- set ns.found = true %}{%- set ns.last_query_index = (messages|length - 1) - loop.index0 %}{%- endif %}"
    "{%- endfor %}{%- for message in messages %}{%- if message['role'] == 'user' %}"
    "{{ '<|im_start|>user\\n' + message['content'] + '<|im_end|>\\n' }}{%- elif message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}{%- set reasoning = '' %}{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}"
    "{{ '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') + "
    "'<|im_end|>\\n' }}{%- else %}{{ '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";
// Gemma 3's own template: as gemma, but the system message goes into the
// first user turn untrimmed.
constexpr std::string_view kGemma3Jinja =
    "{%- if messages[0]['role'] == 'system' %}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set first_user_prefix = '' %}"
    "{%- set loop_messages = messages %}{%- endif %}{%- for message in loop_messages %}{{ '<start_of_turn>' + "
    "('model' if message['role'] == 'assistant' else message['role']) + '\\n' + (first_user_prefix if loop.first "
    "else '') + (message['content'] | trim) + '<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<start_of_turn>model\\n' }}{%- endif %}";

// ollama's TEMPLATE for each (Go text/template; .Messages holds the system
// message too).
constexpr std::string_view kChatmlOllama =
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";
constexpr std::string_view kLlama3Ollama =
    "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n";
constexpr std::string_view kLlama2Ollama =
    "{{- $prev := \"\" }}[INST] {{ range .Messages }}{{ if eq $prev \"assistant\" }}[INST] {{ end }}"
    "{{ if eq .Role \"system\" }}{{ .Content }}\n{{ else if eq .Role \"user\" }}{{ .Content }} [/INST]"
    "{{ else }}{{ .Content }}</s>{{ end }}{{ $prev = .Role }}{{ end }}";
constexpr std::string_view kMistralOllama =
    "{{- range .Messages }}{{ if eq .Role \"system\" }}[SYSTEM_PROMPT] {{ .Content }}[/SYSTEM_PROMPT]"
    "{{ else if eq .Role \"user\" }}[INST] {{ .Content }}[/INST]{{ else }} {{ .Content }}</s>{{ end }}{{ end }}";
constexpr std::string_view kGemmaOllama =
    "{{- $sys := \"\" }}{{ range .Messages }}{{ if eq .Role \"system\" }}{{ $sys = .Content }}{{ else }}"
    "<start_of_turn>{{ if eq .Role \"assistant\" }}model{{ else }}{{ .Role }}{{ end }}\n"
    "{{ if and $sys (eq .Role \"user\") }}{{ $sys }}\n\n{{ $sys = \"\" }}{{ end }}{{ .Content }}<end_of_turn>\n"
    "{{ end }}{{ end }}<start_of_turn>model\n";
constexpr std::string_view kPhi3Ollama =
    "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n";
constexpr std::string_view kZephyrOllama =
    "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|endoftext|>\n{{ end }}<|assistant|>\n";

// ollama gives .Content without the reasoning, so Qwen3's history renders as
// chatml; Go templates have no trim, so Gemma 3's is gemma's.
constexpr std::string_view kQwen3Ollama = kChatmlOllama;
constexpr std::string_view kGemma3Ollama = kGemmaOllama;

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Appends to the last span when it has the same `trained`, so that spans
// alternate.
void add(std::vector<Span>& out, std::string_view text, bool trained) {
  if (text.empty()) return;
  if (!out.empty() && out.back().trained == trained) {
    out.back().text += text;
    return;
  }
  out.push_back({std::string(text), trained});
}

void render_chatml(std::vector<Span>& o, const Conversation& c, bool gen) {
  for (const Message& m : c) {
    const bool a = m.role == "assistant";
    add(o, "<|im_start|>" + m.role + "\n", false);
    add(o, m.content + "<|im_end|>", a);
    add(o, "\n", false);
  }
  if (gen) add(o, "<|im_start|>assistant\n", false);
}

void render_llama3(std::vector<Span>& o, const Conversation& c, bool gen) {
  for (const Message& m : c) {
    add(o, "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
    add(o, trim(m.content) + "<|eot_id|>", m.role == "assistant");
  }
  if (gen) add(o, "<|start_header_id|>assistant<|end_header_id|>\n\n", false);
}

void render_llama2(std::vector<Span>& o, const Conversation& c) {
  bool inside_turn = true;
  add(o, "[INST] ", false);
  for (const Message& m : c) {
    if (!inside_turn) {
      inside_turn = true;
      add(o, "[INST] ", false);
    }
    if (m.role == "system") {
      add(o, m.content + "\n", false);
    } else if (m.role == "user") {
      add(o, m.content + " [/INST]", false);
    } else {
      add(o, m.content + "</s>", true);
      inside_turn = false;
    }
  }
}

void render_mistral(std::vector<Span>& o, const Conversation& c) {
  for (const Message& m : c) {
    if (m.role == "system") add(o, "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]", false);
    else if (m.role == "user") add(o, "[INST] " + m.content + "[/INST]", false);
    else add(o, " " + m.content + "</s>", true);
  }
}

void render_gemma(std::vector<Span>& o, const Conversation& c, bool gen) {
  std::string system_prompt;
  for (const Message& m : c) {
    if (m.role == "system") {
      system_prompt += trim(m.content);
      continue;
    }
    const bool a = m.role == "assistant";
    add(o, "<start_of_turn>" + std::string(a ? "model" : m.role) + "\n", false);
    if (!system_prompt.empty() && !a) {
      add(o, system_prompt + "\n\n", false);
      system_prompt.clear();
    }
    add(o, trim(m.content) + "<end_of_turn>", a);
    add(o, "\n", false);
  }
  if (gen) add(o, "<start_of_turn>model\n", false);
}

// phi3 and zephyr: "<|role|>\n" + content + end marker + "\n".
void render_role_tags(std::vector<Span>& o, const Conversation& c, bool gen, std::string_view end) {
  for (const Message& m : c) {
    add(o, "<|" + m.role + "|>\n", false);
    add(o, m.content + std::string(end), m.role == "assistant");
    add(o, "\n", false);
  }
  if (gen) add(o, "<|assistant|>\n", false);
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string_view lstrip_newlines(std::string_view s) { return s.substr(std::min(s.size(), s.find_first_not_of('\n'))); }
std::string_view rstrip_newlines(std::string_view s) {
  const size_t last = s.find_last_not_of('\n');
  return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// An answer split as Qwen3's template splits it at "</think>".
struct ThinkingAnswer {
  std::string_view reasoning;  // between the last "<think>" and the first "</think>"
  std::string_view reply;  // after the last "</think>"
};

ThinkingAnswer split_thinking(std::string_view answer) {
  constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  const size_t first_close = answer.find(kClose);
  if (first_close == std::string_view::npos) return {{}, answer};
  const std::string_view reply = lstrip_newlines(answer.substr(answer.rfind(kClose) + kClose.size()));
  std::string_view before = rstrip_newlines(answer.substr(0, first_close));
  if (const size_t open = before.rfind(kOpen); open != std::string_view::npos)
    before = before.substr(open + kOpen.size());
  return {lstrip_newlines(before), reply};
}

void render_qwen3(std::vector<Span>& o, const Conversation& c, bool gen) {
  const auto only_tool_response = [](std::string_view s) {
    return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
  };
  size_t last_query = c.size() - 1;
  for (size_t i = c.size(); i-- > 0;)
    if (c[i].role == "user" && !only_tool_response(c[i].content)) {
      last_query = i;
      break;
    }
  for (size_t i = 0; i < c.size(); ++i) {
    const Message& m = c[i];
    if (m.role != "assistant") {
      add(o, "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n", false);
      continue;
    }
    const ThinkingAnswer a = split_thinking(m.content);
    add(o, "<|im_start|>assistant\n", false);
    // The answer and the <think> block before it carry the loss: the model
    // learns to write the block (empty when the data has no reasoning).
    if (i > last_query && (i + 1 == c.size() || !a.reasoning.empty()))
      add(o,
          fmt::format("<think>\n{}\n</think>\n\n{}<|im_end|>", strip_newlines(a.reasoning), lstrip_newlines(a.reply)),
          true);
    else add(o, std::string(a.reply) + "<|im_end|>", true);
    add(o, "\n", false);
  }
  if (gen) add(o, "<|im_start|>assistant\n", false);
}

void render_gemma3(std::vector<Span>& o, const Conversation& c, bool gen) {
  const bool system = !c.empty() && c[0].role == "system";
  for (size_t i = system ? 1 : 0; i < c.size(); ++i) {
    const bool a = c[i].role == "assistant";
    const bool first = i == (system ? 1u : 0u);
    add(o,
        "<start_of_turn>" + std::string(a ? "model" : c[i].role) + "\n" +
            (first && system ? c[0].content + "\n\n" : std::string()),
        false);
    add(o, trim(c[i].content) + "<end_of_turn>", a);
    add(o, "\n", false);
  }
  if (gen) add(o, "<start_of_turn>model\n", false);
}

}  // namespace

std::string trim(std::string_view s) {
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

const std::vector<TemplateInfo>& all_templates() {
  static const std::vector<TemplateInfo> kAll{
      {Template::kChatml,
       "chatml",
       "chatml",
       kChatmlJinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kChatmlOllama,
       {}},
      {Template::kLlama3,
       "llama3",
       "llama3",
       kLlama3Jinja,
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "<|eot_id|>",
       kLlama3Ollama,
       {}},
      {Template::kLlama2, "llama2", "llama2", kLlama2Jinja, {"</s>"}, "</s>", kLlama2Ollama, {}},
      {Template::kMistral,
       "mistral",
       "mistral-v7",
       kMistralJinja,
       {"[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "</s>"},
       "</s>",
       kMistralOllama,
       {}},
      {Template::kGemma,
       "gemma",
       "gemma",
       kGemmaJinja,
       {"<start_of_turn>", "<end_of_turn>"},
       "<end_of_turn>",
       kGemmaOllama,
       {}},
      {Template::kPhi3,
       "phi3",
       "phi3",
       kPhi3Jinja,
       {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"},
       "<|end|>",
       kPhi3Ollama,
       {}},
      {Template::kZephyr,
       "zephyr",
       "zephyr",
       kZephyrJinja,
       {"<|system|>", "<|user|>", "<|assistant|>", "<|endoftext|>"},
       "<|endoftext|>",
       kZephyrOllama,
       {}},
      {Template::kQwen3,
       "qwen3",
       "",
       kQwen3Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kQwen3Ollama,
       {"<|im_start|>", "</think>", "last_query_index"}},
      {Template::kGemma3,
       "gemma3",
       "",
       kGemma3Jinja,
       {"<start_of_turn>", "<end_of_turn>"},
       "<end_of_turn>",
       kGemma3Ollama,
       {"<start_of_turn>", "first_user_prefix"}},
  };
  return kAll;
}

const TemplateInfo& template_info(Template t) {
  for (const TemplateInfo& i : all_templates())
    if (i.id == t) return i;
  fail("chat: unknown template id {}", int(t));
}

Template template_named(std::string_view name, std::string_view key) {
  std::string known;
  for (const TemplateInfo& i : all_templates()) {
    if (i.name == name) return i.id;
    known += (known.empty() ? "" : ", ") + std::string(i.name);
  }
  fail("{} = \"{}\": not a chat template (auto, {})", key, name, known);
}

std::optional<Template> family_template(std::string_view t) {
  for (const TemplateInfo& i : all_templates())
    if (!i.signature.empty() &&
        std::all_of(i.signature.begin(), i.signature.end(), [&](std::string_view s) { return contains(t, s); }))
      return i.id;
  return std::nullopt;
}

// A family's own template first; then the branches of
// llm_chat_detect_template that lead to ours, in its order (an earlier
// branch of another template wins, as there).
std::optional<Template> detect_template(std::string_view t) {
  if (const auto family = family_template(t)) return family;
  for (const TemplateInfo& i : all_templates())
    if (!i.llama_cpp_name.empty() && t == i.llama_cpp_name) return i.id;
  if (contains(t, "<|im_start|>")) {
    if (contains(t, "<|im_sep|>") || contains(t, "<end_of_utterance>")) return std::nullopt;  // phi4, smolvlm
    return Template::kChatml;
  }
  if (t.starts_with("mistral") || contains(t, "[INST]")) {
    if (contains(t, "[SYSTEM_PROMPT]")) return Template::kMistral;
    if (contains(t, "' [INST] ' + system_message") || contains(t, "[AVAILABLE_TOOLS]")) return std::nullopt;
    if (contains(t, "<<SYS>>") || contains(t, "bos_token + '[INST]") || contains(t, "content.strip()"))
      return std::nullopt;  // llama2's other variants
    return Template::kLlama2;
  }
  if (contains(t, "<|assistant|>") && contains(t, "<|end|>")) return Template::kPhi3;
  if (contains(t, "[gMASK]<sop>")) return std::nullopt;
  if (contains(t, "<|assistant|>") && contains(t, "<|user|>")) return std::nullopt;  // falcon3, glmedge
  if (contains(t, "<|{{ item['role'] }}|>") && contains(t, "<|begin_of_image|>")) return std::nullopt;
  if (contains(t, "<|user|>") && contains(t, "<|endoftext|>")) return Template::kZephyr;
  if (contains(t, "bos_token + message['role']")) return std::nullopt;  // monarch
  if (contains(t, "<start_of_turn>")) return Template::kGemma;
  if (contains(t, "'\\n\\nAssistant: ' + eos_token") || contains(t, "GPT4 Correct ") ||
      (contains(t, "USER: ") && contains(t, "ASSISTANT: ")) ||
      (contains(t, "### Instruction:") && contains(t, "<|EOT|>")) ||
      (contains(t, "<|START_OF_TURN_TOKEN|>") && contains(t, "<|USER_TOKEN|>")))
    return std::nullopt;
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")) return Template::kLlama3;
  return std::nullopt;
}

Template resolve_template(std::string_view setting, const std::string& model_template, std::string* warning) {
  if (setting != "auto") return template_named(setting, "data.chat_template");
  if (model_template.empty()) return Template::kChatml;
  if (const auto t = detect_template(model_template)) return *t;
  std::string head = model_template.substr(0, 40);
  std::replace(head.begin(), head.end(), '\n', ' ');
  *warning = fmt::format("data.chat_template = \"auto\": the model's tokenizer.chat_template (\"{}{}\") is none "
                         "that ggtrain renders; using chatml",
                         head, model_template.size() > 40 ? "..." : "");
  return Template::kChatml;
}

std::vector<Span> render_spans(Template t, const Conversation& c, bool gen) {
  std::vector<Span> o;
  switch (t) {
    case Template::kChatml: render_chatml(o, c, gen); break;
    case Template::kLlama3: render_llama3(o, c, gen); break;
    case Template::kLlama2: render_llama2(o, c); break;
    case Template::kMistral: render_mistral(o, c); break;
    case Template::kGemma: render_gemma(o, c, gen); break;
    case Template::kPhi3: render_role_tags(o, c, gen, "<|end|>"); break;
    case Template::kZephyr: render_role_tags(o, c, gen, "<|endoftext|>"); break;
    case Template::kQwen3: render_qwen3(o, c, gen); break;
    case Template::kGemma3: render_gemma3(o, c, gen); break;
  }
  return o;
}

std::string render(Template t, const Conversation& c, bool gen) {
  std::string s;
  for (const Span& sp : render_spans(t, c, gen)) s += sp.text;
  return s;
}

}  // namespace ggtrain::chat
