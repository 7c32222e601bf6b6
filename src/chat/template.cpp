#include "chat/template.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/tojson.h"
#include "tokenizer/tokenizer.h"
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

// Qwen3.5's own template, as llama.cpp's models/templates/Qwen3.5-4B.jinja
// holds it (the Qwen3.5 models' tokenizer_config.json): its vision parts
// render nothing for text.
constexpr std::string_view kQwen35Jinja = R"jinja({%- set image_count = namespace(value=0) %}
{%- set video_count = namespace(value=0) %}
{%- macro render_content(content, do_vision_count, is_system_content=false) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is iterable and content is not mapping %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain images.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set image_count.value = image_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Picture ' ~ image_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' }}
            {%- elif 'video' in item or item.type == 'video' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain videos.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set video_count.value = video_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Video ' ~ video_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' }}
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- else %}
                {{- raise_exception('Unexpected item type in content.') }}
            {%- endif %}
        {%- endfor %}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages provided.') }}
{%- endif %}
{%- if tools and tools is iterable and tools is not mapping %}
    {{- '<|im_start|>system\n' }}
    {{- "# Tools\n\nYou have access to the following functions:\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>" }}
    {{- '\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>' }}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {%- if content %}
            {{- '\n\n' + content }}
        {%- endif %}
    {%- endif %}
    {{- '<|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set content = render_content(message.content, false)|trim %}
        {%- if not(content.startswith('<tool_response>') and content.endswith('</tool_response>')) %}
            {%- set ns.multi_step_tool = false %}
            {%- set ns.last_query_index = index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if ns.multi_step_tool %}
    {{- raise_exception('No user query found in messages.') }}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true)|trim %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- raise_exception('System message must be at the beginning.') }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls and message.tool_calls is iterable and message.tool_calls is not mapping %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {%- if loop.first %}
                    {%- if content|trim %}
                        {{- '\n\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- else %}
                        {{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- endif %}
                {%- else %}
                    {{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                {%- endif %}
                {%- if tool_call.arguments is defined %}
                    {%- for args_name, args_value in tool_call.arguments|items %}
                        {{- '<parameter=' + args_name + '>\n' }}
                        {%- set args_value = args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string %}
                        {{- args_value }}
                        {{- '\n</parameter>\n' }}
                    {%- endfor %}
                {%- endif %}
                {{- '</function>\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>\n' }}
        {%- elif loop.last %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unexpected message role.') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %})jinja";

// LFM2's own template (LiquidAI's, as llama.cpp's
// models/templates/LFM2-8B-A1B.jinja carries it).
constexpr std::string_view kLfm2Jinja = R"jinja({{- bos_token -}}
{%- set system_prompt = "" -%}
{%- set ns = namespace(system_prompt="") -%}
{%- if messages[0]["role"] == "system" -%}
	{%- set ns.system_prompt = messages[0]["content"] -%}
	{%- set messages = messages[1:] -%}
{%- endif -%}
{%- if tools -%}
	{%- set ns.system_prompt = ns.system_prompt + ("\n" if ns.system_prompt else "") + "List of tools: <|tool_list_start|>[" -%}
	{%- for tool in tools -%}
		{%- if tool is not string -%}
			{%- set tool = tool | tojson -%}
		{%- endif -%}
		{%- set ns.system_prompt = ns.system_prompt + tool -%}
		{%- if not loop.last -%}
			{%- set ns.system_prompt = ns.system_prompt + ", " -%}
		{%- endif -%}
	{%- endfor -%}
	{%- set ns.system_prompt = ns.system_prompt + "]<|tool_list_end|>" -%}
{%- endif -%}
{%- if ns.system_prompt -%}
	{{- "<|im_start|>system\n" + ns.system_prompt + "<|im_end|>\n" -}}
{%- endif -%}
{%- for message in messages -%}
	{{- "<|im_start|>" + message["role"] + "\n" -}}
	{%- set content = message["content"] -%}
	{%- if content is not string -%}
		{%- set content = content | tojson -%}
	{%- endif -%}
	{%- if message["role"] == "tool" -%}
		{%- set content = "<|tool_response_start|>" + content + "<|tool_response_end|>" -%}
	{%- endif -%}
	{{- content + "<|im_end|>\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
	{{- "<|im_start|>assistant\n" -}}
{%- endif -%})jinja";

// LFM2.5's (llama.cpp's models/templates/LFM2.5-Instruct.jinja, that of
// LFM2.5-1.2B-Instruct): the tool list without markers, and reasoning
// dropped from every answer but the last.
constexpr std::string_view kLfm25Jinja = R"jinja({{- bos_token -}}
{%- set keep_past_thinking = keep_past_thinking | default(false) -%}
{%- set ns = namespace(system_prompt="") -%}
{%- if messages[0]["role"] == "system" -%}
    {%- set ns.system_prompt = messages[0]["content"] -%}
    {%- set messages = messages[1:] -%}
{%- endif -%}
{%- if tools -%}
    {%- set ns.system_prompt = ns.system_prompt + ("\n" if ns.system_prompt else "") + "List of tools: [" -%}
    {%- for tool in tools -%}
        {%- if tool is not string -%}
            {%- set tool = tool | tojson -%}
        {%- endif -%}
        {%- set ns.system_prompt = ns.system_prompt + tool -%}
        {%- if not loop.last -%}
            {%- set ns.system_prompt = ns.system_prompt + ", " -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set ns.system_prompt = ns.system_prompt + "]" -%}
{%- endif -%}
{%- if ns.system_prompt -%}
    {{- "<|im_start|>system\n" + ns.system_prompt + "<|im_end|>\n" -}}
{%- endif -%}
{%- set ns.last_assistant_index = -1 -%}
{%- for message in messages -%}
    {%- if message["role"] == "assistant" -%}
        {%- set ns.last_assistant_index = loop.index0 -%}
    {%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
    {{- "<|im_start|>" + message["role"] + "\n" -}}
    {%- set content = message["content"] -%}
    {%- if content is not string -%}
        {%- set content = content | tojson -%}
    {%- endif -%}
    {%- if message["role"] == "assistant" and not keep_past_thinking and loop.index0 != ns.last_assistant_index -%}
        {%- if "</think>" in content -%}
            {%- set content = content.split("</think>")[-1] | trim -%}
        {%- endif -%}
    {%- endif -%}
    {{- content + "<|im_end|>\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- "<|im_start|>assistant\n" -}}
{%- endif -%})jinja";

// SmolLM3's (llama.cpp's models/templates/HuggingFaceTB-SmolLM3-3B.jinja):
// a metadata system turn with the reasoning mode, tools and calls dropped.
constexpr std::string_view kSmolLm3Jinja = R"jinja({#- Copyright 2025-present the Unsloth team. All rights reserved. #}
{#- Licensed under the Apache License, Version 2.0 (the "License") #}
{#- Edits made by Unsloth to make it work for most inference engines #}
{# ───── defaults ───── #}
{%- if enable_thinking is not defined -%}
    {%- set enable_thinking = true -%}
{%- endif -%}
{# ───── reasoning mode ───── #}
{%- if enable_thinking -%}
    {%- set reasoning_mode = "/think" -%}
{%- else -%}
    {%- set reasoning_mode = "/no_think" -%}
{%- endif -%}
{# ───── header (system message) ───── #}
{{- "<|im_start|>system\n" -}}
{%- if messages[0].role == "system" -%}
    {%- set system_message = messages[0].content -%}
    {%- if "/no_think" in system_message -%}
        {%- set reasoning_mode = "/no_think" -%}
    {%- elif "/think" in system_message -%}
        {%- set reasoning_mode = "/think" -%}
    {%- endif -%}
    {%- set custom_instructions = system_message.replace("/no_think", "") -%}
    {%- set custom_instructions = custom_instructions.replace("/think", "") -%}
    {%- set custom_instructions = custom_instructions.rstrip() -%}
{%- endif -%}
{{- "## Metadata\n\n" -}}
{{- "Knowledge Cutoff Date: June 2025\n" -}}
{{- "Reasoning Mode: " + reasoning_mode + "\n\n" -}}
{{- "## Custom Instructions\n\n" -}}
{%- if custom_instructions -%}
    {{- custom_instructions + "\n\n" -}}
{%- elif reasoning_mode == "/think" -%}
    {{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring questions through a systematic thinking process before providing the final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, explorations, and reflections from the Thought section, systematically present the final solution that you deem correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n" -}}
{%- else -%}
    {{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n" -}}
{%- endif -%}
{{- "<|im_end|>\n" -}}
{# ───── main loop ───── #}
{%- for message in messages -%}
    {%- set content = message.content if message.content is string else "" -%}
    {%- if message.role == "user" -%}
        {{ "<|im_start|>" + message.role + "\n" + content + "<|im_end|>\n" }}
    {%- elif message.role == "assistant" -%}
        {%- if reasoning_mode == "/think" -%}
            {{ "<|im_start|>assistant\n" + content.lstrip("\n") + "<|im_end|>\n" }}
        {%- else -%}
            {{ "<|im_start|>assistant\n" + "<think>\n\n</think>\n" + content.lstrip("\n") + "<|im_end|>\n" }}
        {%- endif -%}
    {%- elif message.role == "tool" -%}
        {{ "<|im_start|>" + "user\n" + content + "<|im_end|>\n" }}
    {%- endif -%}
{%- endfor -%}
{# ───── generation prompt ───── #}
{%- if add_generation_prompt -%}
    {%- if reasoning_mode == "/think" -%}
        {{ "<|im_start|>assistant\n" }}
    {%- else -%}
        {{ "<|im_start|>assistant\n" + "<think>\n\n</think>\n" }}
    {%- endif -%}
{%- endif -%})jinja";

// Qwen3's own template, as Qwen3's tokenizer_config.json ships it (and
// llama.cpp's models/templates/Qwen-Qwen3-0.6B.jinja): the system message
// (under the tool definitions when the record has tools), the index of the
// last real user query (a user turn that only wraps a <tool_response> is
// none), then each turn. An answer holding "</think>" splits into its
// reasoning and its reply; the reasoning is kept only after the last query,
// and the last answer always gets a <think> block, empty if it had none.
// Calls follow an answer in <tool_call> blocks; consecutive tool outputs
// share one user turn.
constexpr std::string_view kQwen3Jinja = R"jinja({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})jinja";
// Gemma 3's own template: as gemma, but the system message goes into the
// first user turn untrimmed.
constexpr std::string_view kGemma3Jinja =
    "{%- if messages[0]['role'] == 'system' %}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set first_user_prefix = '' %}"
    "{%- set loop_messages = messages %}{%- endif %}{%- for message in loop_messages %}{{ '<start_of_turn>' + "
    "('model' if message['role'] == 'assistant' else message['role']) + '\\n' + (first_user_prefix if loop.first "
    "else '') + (message['content'] | trim) + '<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<start_of_turn>model\\n' }}{%- endif %}";

// Llama 3.1's own template, as Meta ships it (llama.cpp's
// models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja; 3.3's is the
// same): a system turn with the knowledge and today dates always; tools, when
// the record has them, in the first user turn; one call per answer.
constexpr std::string_view kLlama31Jinja = R"jinja({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})jinja";

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

// Llama 3.1's system turn (dates, then the system message), then llama3's
// turns.
constexpr std::string_view kLlama31Ollama =
    "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"
    "\n\n{{ range .Messages }}{{ if eq .Role \"system\" }}{{ .Content }}{{ end }}{{ end }}<|eot_id|>"
    "{{- range .Messages }}{{ if ne .Role \"system\" }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n"
    "{{ .Content }}<|eot_id|>{{ end }}{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n";

// ollama gives .Content without the reasoning, so Qwen3's history renders as
// chatml; Go templates have no trim, so Gemma 3's is gemma's.
constexpr std::string_view kQwen3Ollama = kChatmlOllama;
// Qwen3.5's prompt opens the reasoning block.
constexpr std::string_view kQwen35Ollama =
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
    "<think>\n";
constexpr std::string_view kGemma3Ollama = kGemmaOllama;
// SmolLM3's system turn opens with its metadata and reasoning mode; the
// custom instructions default to one text per mode.
constexpr std::string_view kSmolLm3Metadata =
    "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ";
constexpr std::string_view kSmolLm3ThinkingDefault =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
    "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.";
constexpr std::string_view kSmolLm3PlainDefault =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";
// ollama's rendering of it, in Go templates, which cannot take the flags
// out of a message or strip its ends: always the "/think" mode, the last
// system message as it is, answers as they are, a tool's output as a user
// turn.
const std::string& smollm3_ollama() {
  static const std::string t =
      std::string(kSmolLm3Metadata) + "/think\n\n## Custom Instructions\n\n{{ $sys := \"\" }}{{ range .Messages }}" +
      "{{ if eq .Role \"system\" }}{{ $sys = .Content }}{{ end }}{{ end }}{{ if $sys }}{{ $sys }}{{ else }}" +
      std::string(kSmolLm3ThinkingDefault) +
      "{{ end }}\n\n<|im_end|>\n{{ range .Messages }}{{ if ne .Role \"system\" }}" +
      "<|im_start|>{{ if eq .Role \"tool\" }}user{{ else }}{{ .Role }}{{ end }}\n{{ .Content }}<|im_end|>\n{{ end }}" +
      "{{ end }}<|im_start|>assistant\n";
  return t;
}
// LFM2's: a tool's output between its response markers.
constexpr std::string_view kLfm2Ollama =
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ if eq .Role \"tool\" }}<|tool_response_start|>{{ .Content }}"
    "<|tool_response_end|>{{ else }}{{ .Content }}{{ end }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";

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

// A llama3 turn's header.
std::string llama3_header(std::string_view role) {
  return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n";
}

void render_llama3(std::vector<Span>& o, const Conversation& c, bool gen) {
  for (const Message& m : c) {
    add(o, llama3_header(m.role), false);
    add(o, trim(m.content) + "<|eot_id|>", m.role == "assistant");
  }
  if (gen) add(o, llama3_header("assistant"), false);
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

// Qwen3's tool block: the definitions in <tools>, one JSON line each, and
// the shape of a call.
constexpr std::string_view kQwen3ToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kQwen3ToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// The system turn: the system message, and the tools when there are any.
void render_qwen3_system(std::vector<Span>& o, const Conversation& c) {
  const bool system = c[0].role == "system";
  if (!c.tools || c.tools->empty()) {
    if (system) add(o, fmt::format("<|im_start|>system\n{}<|im_end|>\n", c[0].content), false);
    return;
  }
  std::string s = "<|im_start|>system\n" + (system ? c[0].content + "\n\n" : std::string());
  s += kQwen3ToolsHead;
  for (const std::string& tool : *c.tools) s.append("\n").append(tojson(tool));
  add(o, s + std::string(kQwen3ToolsTail), false);
}

// An answer's calls, each in a <tool_call> block, on a new line after any
// text.
std::string qwen3_tool_calls(const std::vector<ToolCall>& calls, std::string_view content) {
  std::string s;
  for (size_t k = 0; k < calls.size(); ++k) {
    if (k > 0 || !content.empty()) s += "\n";
    std::string arguments;
    if (!json_string_value(calls[k].arguments, &arguments)) arguments = tojson(calls[k].arguments);
    s += "<tool_call>\n{\"name\": \"" + calls[k].name + "\", \"arguments\": " + arguments + "}\n</tool_call>";
  }
  return s;
}

void render_qwen3(std::vector<Span>& o, const Conversation& c, bool gen) {
  const auto only_tool_response = [](std::string_view s) {
    return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
  };
  render_qwen3_system(o, c);
  size_t last_query = c.size() - 1;
  for (size_t i = c.size(); i-- > 0;)
    if (c[i].role == "user" && !only_tool_response(c[i].content)) {
      last_query = i;
      break;
    }
  for (size_t i = 0; i < c.size(); ++i) {
    const Message& m = c[i];
    if (m.role == "user") {
      add(o, "<|im_start|>user\n" + m.content + "<|im_end|>\n", false);
    } else if (m.role == "tool") {
      // A tool's output is the world's text: no loss on it.
      if (i == 0 || c[i - 1].role != "tool") add(o, "<|im_start|>user", false);
      add(o, "\n<tool_response>\n" + m.content + "\n</tool_response>", false);
      if (i + 1 == c.size() || c[i + 1].role != "tool") add(o, "<|im_end|>\n", false);
    } else if (m.role == "assistant") {
      const ThinkingAnswer a = split_thinking(m.content);
      add(o, "<|im_start|>assistant\n", false);
      // The answer, the <think> block before it and the calls after it carry
      // the loss: the model learns to write the block (empty when the data
      // has no reasoning) and to call.
      const std::string calls = qwen3_tool_calls(m.tool_calls, a.reply);
      if (i > last_query && (i + 1 == c.size() || !a.reasoning.empty()))
        add(o,
            fmt::format("<think>\n{}\n</think>\n\n{}{}<|im_end|>", strip_newlines(a.reasoning),
                        lstrip_newlines(a.reply), calls),
            true);
      else add(o, std::string(a.reply) + calls + "<|im_end|>", true);
      add(o, "\n", false);
    }
  }
  if (gen) add(o, "<|im_start|>assistant\n", false);
}

// Qwen3.5's tool block: the definitions in <tools>, one JSON line each, and
// the XML shape of a call.
constexpr std::string_view kQwen35ToolsHead =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kQwen35ToolsTail =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple "
    "lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
    "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML "
    "tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
    "question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>";

// Qwen3.5's last question: the last user turn that does not only wrap a
// tool's output (trimmed); c.size() when there is none, which its template
// raises on (check_renders).
size_t qwen35_last_question(const Conversation& c) {
  for (size_t i = c.size(); i-- > 0;) {
    const std::string content = trim(c[i].content);
    if (c[i].role == "user" && !(content.starts_with("<tool_response>") && content.ends_with("</tool_response>")))
      return i;
  }
  return c.size();
}

// The system turn: the tools first, then the (trimmed) system message.
void render_qwen35_system(std::vector<Span>& o, const Conversation& c) {
  const bool system = c[0].role == "system";
  const std::string content = system ? trim(c[0].content) : std::string();
  if (!c.tools || c.tools->empty()) {
    if (system) add(o, fmt::format("<|im_start|>system\n{}<|im_end|>\n", content), false);
    return;
  }
  std::string s(kQwen35ToolsHead);
  for (const std::string& tool : *c.tools) s.append("\n").append(tojson(tool));
  s += kQwen35ToolsTail;
  if (!content.empty()) s += "\n\n" + content;
  add(o, s + "<|im_end|>\n", false);
}

// An answer's calls as <tool_call><function=NAME><parameter=KEY> blocks.
std::string qwen35_tool_calls(const std::vector<ToolCall>& calls, std::string_view content) {
  std::string s;
  for (size_t k = 0; k < calls.size(); ++k) {
    s += k > 0 ? "\n" : !trim(content).empty() ? "\n\n" : "";
    s += "<tool_call>\n<function=" + calls[k].name + ">\n";
    for (const auto& [key, value] : argument_members(calls[k].arguments))
      s += "<parameter=" + key + ">\n" + value + "\n</parameter>\n";
    s += "</function>\n</tool_call>";
  }
  return s;
}

// Qwen3.5's own template: every message trimmed, a <think> block on each
// answer after the last question (empty when the data has no reasoning),
// and a generation prompt that opens the reasoning.
void render_qwen35(std::vector<Span>& o, const Conversation& c, bool gen) {
  render_qwen35_system(o, c);
  const size_t last_query = qwen35_last_question(c);
  for (size_t i = 0; i < c.size(); ++i) {
    const Message& m = c[i];
    const std::string content = trim(m.content);
    if (m.role == "user") {
      add(o, "<|im_start|>user\n" + content + "<|im_end|>\n", false);
    } else if (m.role == "tool") {
      if (i > 0 && c[i - 1].role != "tool") add(o, "<|im_start|>user", false);
      add(o, "\n<tool_response>\n" + content + "\n</tool_response>", false);
      if (i + 1 == c.size() || c[i + 1].role != "tool") add(o, "<|im_end|>\n", false);
    } else if (m.role == "assistant") {
      const ThinkingAnswer a = split_thinking(content);
      add(o, "<|im_start|>assistant\n", false);
      const std::string calls = qwen35_tool_calls(m.tool_calls, a.reply);
      if (i > last_query)
        add(o, fmt::format("<think>\n{}\n</think>\n\n{}{}<|im_end|>", trim(a.reasoning), a.reply, calls), true);
      else add(o, std::string(a.reply) + calls + "<|im_end|>", true);
      add(o, "\n", false);
    }
  }
  if (gen) add(o, "<|im_start|>assistant\n<think>\n", false);
}

// isspace()'s ASCII white space, which llama.cpp's trim() and Python's
// rstrip() take off (the texts the templates see have no other at their ends).
constexpr std::string_view kAsciiSpace = " \t\n\v\f\r";

std::string_view rstrip_space(std::string_view s) {
  const size_t e = s.find_last_not_of(kAsciiSpace);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

// SmolLM3's: the reasoning mode is "/think" unless the system message says
// "/no_think"; the custom instructions are that message without its mode
// flags, else the mode's default. In "/no_think" mode the template opens
// every answer with an empty reasoning block itself (no loss on it: the
// generation prompt writes it too).
void render_smollm3(std::vector<Span>& o, const Conversation& c, bool gen) {
  bool thinking = true;
  std::string custom;
  if (!c.empty() && c[0].role == "system") {
    const std::string& s = c[0].content;
    if (contains(s, "/no_think")) thinking = false;
    custom = rstrip_space(tokenizer::replace_all(tokenizer::replace_all(s, "/no_think", ""), "/think", ""));
  }
  const std::string_view fallback = thinking ? kSmolLm3ThinkingDefault : kSmolLm3PlainDefault;
  add(o,
      fmt::format("{}{}\n\n## Custom Instructions\n\n{}\n\n<|im_end|>\n", kSmolLm3Metadata,
                  thinking ? "/think" : "/no_think", custom.empty() ? fallback : std::string_view(custom)),
      false);
  const std::string opening = thinking ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n";
  for (const Message& m : c) {
    if (m.role == "user") add(o, "<|im_start|>user\n" + m.content + "<|im_end|>\n", false);
    if (m.role != "assistant") continue;
    add(o, opening, false);
    add(o, std::string(lstrip_newlines(m.content)) + "<|im_end|>", true);
    add(o, "\n", false);
  }
  if (gen) add(o, opening, false);
}

// The system turn of LFM2's templates: the system message and the tool
// list, left out when both are empty.
void render_lfm2_system(std::vector<Span>& o, const Conversation& c, std::string_view list_open,
                        std::string_view list_close) {
  std::string prompt = c[0].role == "system" ? c[0].content : std::string();
  if (c.tools && !c.tools->empty()) {
    prompt += (prompt.empty() ? "List of tools: " : "\nList of tools: ") + std::string(list_open);
    for (size_t k = 0; k < c.tools->size(); ++k) prompt += (k > 0 ? ", " : "") + tojson((*c.tools)[k]);
    prompt += list_close;
  }
  if (!prompt.empty()) add(o, "<|im_start|>system\n" + prompt + "<|im_end|>\n", false);
}

// LFM2's own template (lfm25 false): the tool list between its markers;
// nothing is trimmed. LFM2.5's (its default keep_past_thinking = false): the
// list unmarked, and every answer but the last reduced to its text after its
// last "</think>", trimmed. Calls are the answer's own text in both:
// check_renders refuses the tool_calls member, which the templates drop, and
// with it the tool turns that only follow calls (LFM2's would wrap them in
// <|tool_response_start|>...<|tool_response_end|>).
void render_lfm2(std::vector<Span>& o, const Conversation& c, bool gen, bool lfm25) {
  if (lfm25) render_lfm2_system(o, c, "[", "]");
  else render_lfm2_system(o, c, "<|tool_list_start|>[", "]<|tool_list_end|>");
  size_t last_answer = c.size();
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].role == "assistant") last_answer = i;
  for (size_t i = c[0].role == "system" ? 1 : 0; i < c.size(); ++i) {
    const Message& m = c[i];
    const bool a = m.role == "assistant";
    std::string content = m.content;
    if (lfm25 && a && i != last_answer && contains(content, "</think>")) content = trim(split_thinking(content).reply);
    add(o, "<|im_start|>" + m.role + "\n", false);
    add(o, content + "<|im_end|>", a);
    add(o, "\n", false);
  }
  if (gen) add(o, "<|im_start|>assistant\n", false);
}

// Llama 3.1's (and 3.3's) tool prompt: the definitions go into the first
// user turn, one indented JSON each.
constexpr std::string_view kLlama31ToolsIntro =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that "
    "best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary "
    "of argument name and its value}.Do not use variables.\n\n";

// Llama 3.1's own template with its defaults (tools in the first user turn,
// "Today Date: 26 Jul 2024", no built-in tools): a system turn always, then
// the turns; a call is the answer's whole text, a tool's output a JSON string
// in an "ipython" turn.
void render_llama31(std::vector<Span>& o, const Conversation& c, bool gen) {
  size_t i = 0;
  std::string system_message;
  if (c[0].role == "system") system_message = trim(c[i++].content);
  std::string s = llama3_header("system");
  if (c.tools) s += "Environment: ipython\n";
  s += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" + system_message + "<|eot_id|>";
  if (c.tools) {
    if (i == c.size()) fail("chat: Llama 3.1's template puts the tools in the first user turn, and there is none");
    s += llama3_header("user") + std::string(kLlama31ToolsIntro);
    for (const std::string& tool : *c.tools) s += tojson(tool, 4) + "\n\n";
    s += trim(c[i++].content) + "<|eot_id|>";
  }
  add(o, s, false);
  for (; i < c.size(); ++i) {
    const Message& m = c[i];
    if (m.role == "tool") {
      add(o, llama3_header("ipython") + json_quote(m.content) + "<|eot_id|>", false);
    } else if (!m.tool_calls.empty()) {
      add(o, llama3_header("assistant"), false);
      const ToolCall& call = m.tool_calls[0];
      add(o, "{\"name\": \"" + call.name + "\", \"parameters\": " + tojson(call.arguments) + "}<|eot_id|>", true);
    } else {
      add(o, llama3_header(m.role), false);
      add(o, trim(m.content) + "<|eot_id|>", m.role == "assistant");
    }
  }
  if (gen) add(o, llama3_header("assistant"), false);
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

bool prompt_opens_reasoning(Template t) {
  const Conversation question{{"user", "?"}};
  return render(t, question, true).ends_with("<think>\n");
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kAsciiSpace);
  return b == std::string_view::npos ? std::string() : std::string(rstrip_space(s.substr(b)));
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
       {},
       {}},
      {Template::kLlama3,
       "llama3",
       "llama3",
       kLlama3Jinja,
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "<|eot_id|>",
       kLlama3Ollama,
       {},
       {}},
      {Template::kLlama2, "llama2", "llama2", kLlama2Jinja, {"</s>"}, "</s>", kLlama2Ollama, {}, {}},
      {Template::kMistral,
       "mistral",
       "mistral-v7",
       kMistralJinja,
       {"[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "</s>"},
       "</s>",
       kMistralOllama,
       {},
       {}},
      {Template::kGemma,
       "gemma",
       "gemma",
       kGemmaJinja,
       {"<start_of_turn>", "<end_of_turn>"},
       "<end_of_turn>",
       kGemmaOllama,
       {},
       {}},
      {Template::kPhi3,
       "phi3",
       "phi3",
       kPhi3Jinja,
       {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"},
       "<|end|>",
       kPhi3Ollama,
       {},
       {}},
      {Template::kZephyr,
       "zephyr",
       "zephyr",
       kZephyrJinja,
       {"<|system|>", "<|user|>", "<|assistant|>", "<|endoftext|>"},
       "<|endoftext|>",
       kZephyrOllama,
       {},
       {}},
      // before qwen3: its template holds Qwen3's signature too
      {Template::kQwen35,
       "qwen3.5",
       "",
       kQwen35Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kQwen35Ollama,
       {"<|im_start|>", "</think>", "last_query_index", "<function="},
       {.renders = true}},
      {Template::kQwen3,
       "qwen3",
       "",
       kQwen3Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kQwen3Ollama,
       {"<|im_start|>", "</think>", "last_query_index"},
       {.renders = true}},
      {Template::kGemma3,
       "gemma3",
       "",
       kGemma3Jinja,
       {"<start_of_turn>", "<end_of_turn>"},
       "<end_of_turn>",
       kGemma3Ollama,
       {"<start_of_turn>", "first_user_prefix"},
       {}},
      {Template::kLlama31,
       "llama3.1",
       "",
       kLlama31Jinja,
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "<|eot_id|>",
       kLlama31Ollama,
       {"<|start_header_id|>", "Cutting Knowledge Date", "tools_in_user_message", "builtin_tools"},
       {.renders = true, .one_call_per_turn = true, .text_beside_calls = false}},
      // llama.cpp's is_lfm2_template: the tool list's markers
      {Template::kLfm2,
       "lfm2",
       "",
       kLfm2Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kLfm2Ollama,
       {"<|im_start|>", "<|tool_list_start|>", "<|tool_list_end|>"},
       {.renders = true, .calls = false, .calls_as_text = "<|tool_call_start|>[name(arg=\"value\")]<|tool_call_end|>"}},
      // the plain list, as llama.cpp's LFM2.5 detection; keep_past_thinking
      // tells it from LFM2.5-8B-A1B's, which renders calls itself
      {Template::kLfm25,
       "lfm2.5",
       "",
       kLfm25Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       kChatmlOllama,
       {"<|im_start|>", "List of tools: [", "keep_past_thinking"},
       {.renders = true, .calls = false, .calls_as_text = "<|tool_call_start|>[name(arg=\"value\")]<|tool_call_end|>"}},
      {Template::kSmolLm3,
       "smollm3",
       "",
       kSmolLm3Jinja,
       {"<|im_start|>", "<|im_end|>"},
       "<|im_end|>",
       smollm3_ollama(),
       // Unsloth's edit, which llama.cpp ships; the original writes today's
       // date and its tools, which this renderer does not
       {"<|im_start|>", "Reasoning Mode: ", "/no_think", "Edits made by Unsloth"},
       {}},
  };
  return kAll;
}

const TemplateInfo& template_info(Template t) {
  for (const TemplateInfo& i : all_templates())
    if (i.id == t) return i;
  fail("chat: unknown template id {}", int(t));
}

std::string template_names_text() {
  std::string names;
  for (const TemplateInfo& i : all_templates()) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return names;
}

Template template_named(std::string_view name, std::string_view key) {
  for (const TemplateInfo& i : all_templates())
    if (i.name == name) return i.id;
  fail("{} = \"{}\": not a chat template (auto, {})", key, name, template_names_text());
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

void check_renders(Template t, const Conversation& c, std::string_view where) {
  if (t == Template::kQwen35 && qwen35_last_question(c) == c.size())
    fail("{}: Qwen3.5's template needs a user question, and every user turn of the record only wraps a tool's "
         "output (<tool_response>...</tool_response>); its template raises on such a conversation",
         where);
  const TemplateInfo& info = template_info(t);
  if (!c.uses_tools()) return;
  if (!info.tools.renders) {
    std::string with_tools;
    for (const TemplateInfo& i : all_templates())
      if (i.tools.renders) with_tools += (with_tools.empty() ? "" : ", ") + std::string(i.name);
    fail("{}: the record has tool definitions, calls or outputs, and chat template \"{}\" renders none of them; "
         "use a template that does ({}) or leave such records out",
         where, info.name, with_tools);
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (!info.tools.calls && !c[i].tool_calls.empty())
      fail("{}: message {} has tool_calls, which chat template \"{}\" does not render: its model writes a call as "
           "the answer's own text ({}); put the calls there",
           where, i, info.name, info.tools.calls_as_text);
    if (info.tools.one_call_per_turn && c[i].tool_calls.size() > 1)
      fail("{}: message {} makes {} tool calls; chat template \"{}\" renders one per turn (split them into turns, "
           "each followed by its output)",
           where, i, c[i].tool_calls.size(), info.name);
    if (!info.tools.text_beside_calls && !c[i].tool_calls.empty() && !trim(c[i].content).empty())
      fail("{}: message {} has text beside its tool calls; chat template \"{}\" renders only the call (move the "
           "text to a turn of its own or leave it out)",
           where, i, info.name);
  }
}

std::vector<Span> render_spans(Template t, const Conversation& c, bool gen) {
  check_renders(t, c, "chat");
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
    case Template::kQwen35: render_qwen35(o, c, gen); break;
    case Template::kGemma3: render_gemma3(o, c, gen); break;
    case Template::kLlama31: render_llama31(o, c, gen); break;
    case Template::kLfm2: render_lfm2(o, c, gen, false); break;
    case Template::kLfm25: render_lfm2(o, c, gen, true); break;
    case Template::kSmolLm3: render_smollm3(o, c, gen); break;
  }
  return o;
}

std::string render(Template t, const Conversation& c, bool gen) {
  std::string s;
  for (const Span& sp : render_spans(t, c, gen)) s += sp.text;
  return s;
}

}  // namespace ggtrain::chat
