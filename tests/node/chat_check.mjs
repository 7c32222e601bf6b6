// Chat cross-checks for tests/compat/llama_cpp_chat_check.sh.
//
//   node chat_check.mjs conversations N SEED
//       N varied conversations, one JSON line each: {"template", "messages",
//       "add_generation_prompt"}, over every template ggtrain renders.
//   node chat_check.mjs tool-conversations N SEED
//       N conversations with tools in OpenAI's shape, in turn for Qwen3's,
//       Llama 3.1's, Qwen3.5's, LFM2's and LFM2.5's templates: "tools" definitions (or an
//       empty list), assistant "tool_calls" (arguments as objects or JSON
//       strings; Qwen3 and Qwen3.5 one to three per turn, beside text or
//       not; Llama 3.1 one, alone; LFM2 and LFM2.5 none: their calls are
//       the answer's text), "tool" outputs, and answers.
//   node chat_check.mjs tools-jinja CONVERSATIONS.jsonl RENDERED.jsonl QWEN3_CONFIG.json LLAMA31.jinja QWEN35.jinja LFM2.jinja LFM25.jinja
//       Each conversation (with its tools) rendered by @huggingface/jinja
//       from the real template (Qwen3's tokenizer_config.json chat_template,
//       Meta's Llama 3.1 template, Qwen3.5's, LFM2's and LFM2.5's from llama.cpp's
//       models/templates), which must be the "jinja" ggtrain writes,
//       must give the "rendered" bytes, and the "trained" spans must be
//       exactly each assistant turn's text after its header through its end
//       of turn.
//   node chat_check.mjs jinja-inputs CONVERSATIONS.jsonl RENDERED.jsonl
//       llama_jinja_render's input: each conversation (with its tools) and
//       the "jinja" ggtrain writes for it.
//   node chat_check.mjs jinja CONVERSATIONS.jsonl RENDERED.jsonl
//       Renders each conversation with @huggingface/jinja from the "jinja"
//       of the matching RENDERED line and requires the "rendered" bytes;
//       exit 1 naming the first difference.
//   node chat_check.mjs compare-renders RENDERED.jsonl LLAMA.jsonl builtin|all
//       RENDERED's "rendered" strings against llama.cpp's (one JSON string
//       per line): its built-in renderer (tests/compat/llama_chat_render.cpp; rows
//       of a family's own template skipped) or its Jinja engine
//       (tests/compat/llama_jinja_render.cpp; all rows); exit 1 on a difference.
//   node chat_check.mjs family-inputs VOCAB.gguf CONVERSATIONS.jsonl
//       llama_jinja_render's input: the conversations with VOCAB's template.
//   node chat_check.mjs family VOCAB.gguf CONVERSATIONS.jsonl RENDERED.jsonl JINJA_OUT.jsonl
//       Rows of one model family's template (qwen3, gemma3, llama3) against
//       the real template string VOCAB.gguf carries: the same bytes from
//       llama.cpp's Jinja engine, the same ids from llama.cpp.
//   node chat_check.mjs differs RENDERED.jsonl JINJA_OUT.jsonl NAME
//       Control: exit 1 unless some row of RENDERED differs from JINJA_OUT.
//   node chat_check.mjs tokenize MODEL.gguf RENDERED.jsonl
//       llama.cpp's ids of each "rendered" text (BOS as the model asks,
//       special tokens parsed) against its "ids"; exit 1 on a difference.
//   node chat_check.mjs compare-chat GGTRAIN.jsonl LLAMA.jsonl MIN_STOPPED
//       `ggtrain chat --json` replies against `chat`'s: the same ids and the
//       same stop, for every prompt, and at least MIN_STOPPED replies stopped.
//   node chat_check.mjs chat MODEL.gguf PROMPTS.txt N [LORA.gguf]
//       Each line a new conversation (one user turn): the model's own
//       tokenizer.chat_template rendered with @huggingface/jinja
//       (add_generation_prompt), tokenized by llama.cpp with special tokens
//       parsed (BOS as the model asks), greedy tokens until llama.cpp calls
//       one end-of-generation (or N); one JSON line per prompt: {ids, stopped}.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Template } from "@huggingface/jinja";

function die(msg, code = 2) {
  console.error(`chat_check.mjs: ${msg}`);
  process.exit(code);
}

const TEMPLATES = ["chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "zephyr", "qwen3", "gemma3", "llama3.1",
  "qwen3.5", "lfm2", "lfm2.5", "smollm3"];

// Deterministic, varied text: words, punctuation, Jinja and template
// syntax, newlines, inner and outer ASCII spaces, non-ASCII letters and
// emoji (never non-ASCII white space at the ends: JavaScript's trim() takes
// those off and llama.cpp's isspace() does not).
function makeRng(seed) {
  let s = BigInt(seed) | 1n;
  return () => {
    s ^= s << 13n; s &= (1n << 64n) - 1n;
    s ^= s >> 7n;
    s ^= s << 17n; s &= (1n << 64n) - 1n;
    return Number(s % 1000003n) / 1000003;
  };
}
const PIECES = ["the", "LORD", "said", "unto", "Moses", ",", ".", "?", "!", "\n", "\n\n", "  ", "\t", "{{ x }}",
  "{% if %}", "<|im_end|>", "[INST]", "</s>", "'quoted'", "\"double\"", "\\", "é", "中文", "🙂", "naïve", "ß", "—", "42"];
function text(rng) {
  const n = 1 + Math.floor(rng() * 12);
  let t = "";
  for (let i = 0; i < n; i++) t += (i && rng() < 0.6 ? " " : "") + PIECES[Math.floor(rng() * PIECES.length)];
  if (rng() < 0.2) t = " " + t;
  if (rng() < 0.2) t = t + (rng() < 0.5 ? "\n" : " ");
  if (t.trim() === "") t = "word";
  return t;
}

// Qwen3's template reads reasoning out of answers ("<think>...</think>")
// and skips user turns that only wrap a tool's result when it looks for the
// last query: give it both, with newlines around the parts it strips.
function qwenAnswer(rng) {
  const r = rng();
  if (r < 0.4) return text(rng);
  const nl = () => "\n".repeat(Math.floor(rng() * 3));
  const open = rng() < 0.8 ? "<think>" + nl() : "";
  return open + (rng() < 0.3 ? "" : text(rng)) + nl() + "</think>" + nl() + text(rng);
}
function qwenUser(rng) {
  return rng() < 0.25 ? "<tool_response>" + text(rng) + "</tool_response>" : text(rng);
}

function cmdConversations(nText, seedText) {
  const rng = makeRng(Number(seedText));
  for (let i = 0; i < Number(nText); i++) {
    const template = TEMPLATES[i % TEMPLATES.length];
    const messages = [];
    if (template === "smollm3") {
      // its reasoning-mode flags anywhere in the system message, or alone
      const flag = ["", " /no_think", "/think ", "/no_think"][Math.floor(rng() * 4)];
      if (rng() < 0.6) messages.push({ role: "system", content: flag === "/no_think" ? flag : text(rng) + flag });
    } else if (rng() < 0.4) messages.push({ role: "system", content: text(rng) });
    const turns = 1 + Math.floor(rng() * 3);
    const gen = rng() < 0.5;
    // Qwen3.5's template raises unless some user turn is a question: the first is.
    const qwen = template.startsWith("qwen3");
    for (let k = 0; k < turns; k++) {
      messages.push({ role: "user", content: qwen && (k > 0 || template === "qwen3") ? qwenUser(rng) : text(rng) });
      if (k + 1 < turns || !gen)
        messages.push({ role: "assistant", content: qwen || template === "lfm2.5" ? qwenAnswer(rng)
          : template === "smollm3" && rng() < 0.3 ? "\n".repeat(1 + Math.floor(rng() * 2)) + text(rng) : text(rng) });
    }
    console.log(JSON.stringify({ template, messages, add_generation_prompt: gen }));
  }
}

// Tool rows: no template marker in the texts (the trained spans are found
// by them) and no leading white space in answers (@huggingface/jinja
// 0.5.11 strips all of it where Qwen3's template strips newlines).
const TOOL_PIECES = PIECES.filter((p) => !p.startsWith("<|") && p !== "</s>" && p !== "[INST]");
function toolText(rng) {
  const n = 1 + Math.floor(rng() * 8);
  let t = "";
  for (let i = 0; i < n; i++) t += (i && rng() < 0.6 ? " " : "") + TOOL_PIECES[Math.floor(rng() * TOOL_PIECES.length)];
  t = t.replace(/^\s+/, "");
  return t === "" ? "word" : t;
}
const NAMES = ["get_weather", "search", "verse_lookup", "calc", "send_mail", "naïve_tool"];
// pythonic: no true, false or null, which Qwen3.5's template prints through
// Jinja's `string` filter (llama.cpp's engine writes True, False and None as
// Python does; @huggingface/jinja writes true and fails on null).
function jsonValue(rng, depth, pythonic) {
  const r = rng();
  if (r < 0.2) return toolText(rng);
  if (r < 0.3) return Math.floor(rng() * 2000) - 1000;
  // Floats the three engines print alike: JavaScript prints 1e-7 and
  // 0.000001 where Python and llama.cpp print 1e-07 and 1e-06, and
  // llama.cpp prints 123456.789 as 123457 (tests/chat/test_tool_calls.cpp
  // holds @huggingface/jinja's forms of those).
  if (r < 0.4) return [0.5, -2.25, 3.14159, 0.0001, 1e21, 2.5][Math.floor(rng() * 6)];
  if (r < 0.5) return pythonic ? toolText(rng) : rng() < 0.5;
  if (r < 0.55) return pythonic ? 7 : null;
  if (depth > 1 || r < 0.7) return toolText(rng);
  if (r < 0.85) return Array.from({ length: Math.floor(rng() * 3) }, () => jsonValue(rng, depth + 1, pythonic));
  return jsonObject(rng, depth + 1, pythonic);
}
function jsonObject(rng, depth, pythonic) {
  const o = {};
  const n = Math.floor(rng() * 4);
  const keys = ["city", "unit", "query", "limit", "book", "chapter", "deep", "Zeta", "alpha", "é", "with space"];
  for (let i = 0; i < n; i++) o[keys[Math.floor(rng() * keys.length)]] = jsonValue(rng, depth, pythonic);
  return o;
}
// Llama 3.1's template reads a call's "function" member: its rows always
// have one.
function toolDefinition(rng, name, wrapped) {
  const properties = jsonObject(rng, 1);
  const fn = { name, description: toolText(rng),
    parameters: { type: "object", properties, required: Object.keys(properties).slice(0, 1) } };
  return wrapped || rng() < 0.8 ? { type: "function", function: fn } : fn;
}
// Qwen3.5's template reads the arguments' members: its rows give objects.
function toolCall(rng, wrapped, qwen35) {
  const name = NAMES[Math.floor(rng() * NAMES.length)];
  const args = jsonObject(rng, 1, qwen35);
  const fn = { name, arguments: !qwen35 && rng() < 0.25 ? JSON.stringify(args) : args };
  return wrapped || rng() < 0.8 ? { type: "function", id: "call_" + Math.floor(rng() * 1e6), function: fn } : fn;
}

function cmdToolConversations(nText, seedText) {
  const rng = makeRng(Number(seedText));
  for (let i = 0; i < Number(nText); i++) {
    const messages = [];
    const template = ["qwen3", "llama3.1", "qwen3.5", "lfm2", "lfm2.5"][i % 5];
    const llama = template === "llama3.1", qwen35 = template === "qwen3.5", lfm2 = template.startsWith("lfm2");
    if (rng() < 0.4) messages.push({ role: "system", content: toolText(rng) });
    const row = { template };
    const r = rng();
    if (r < 0.8) row.tools = NAMES.slice(0, 1 + Math.floor(rng() * 3)).map((n) => toolDefinition(rng, n, llama));
    else if (r < 0.9) row.tools = [];
    const turns = 1 + Math.floor(rng() * 2);
    for (let k = 0; k < turns && lfm2; k++) {  // LFM2's calls are the answer's text: no tool turns
      messages.push({ role: "user", content: toolText(rng) });
      messages.push({ role: "assistant", content: rng() < 0.6 ? lfm2Call(rng) + (rng() < 0.5 ? "" : " " + toolText(rng))
                                                              : toolText(rng) });
    }
    for (let k = 0; k < turns && !lfm2; k++) {
      messages.push({ role: "user", content: llama || (qwen35 && k === 0) ? toolText(rng) : qwenUserTool(rng) });
      const n = llama ? 1 : 1 + Math.floor(rng() * 3);
      const calls = rng() < 0.8 ? Array.from({ length: n }, () => toolCall(rng, llama, qwen35)) : [];
      if (calls.length) {
        messages.push({ role: "assistant", content: llama || rng() < 0.5 ? "" : toolText(rng), tool_calls: calls });
        for (const c of calls) messages.push({ role: "tool", content: toolText(rng) });
      }
      messages.push({ role: "assistant", content: toolText(rng) });
    }
    // A prompt: the conversation up to a tool's output or a new question.
    const gen = rng() < 0.3;
    if (gen) {
      const cut = messages.findLastIndex((m) => m.role === "tool");
      if (cut > 0 && rng() < 0.5) messages.length = cut + 1;
      else messages.push({ role: "user", content: toolText(rng) });
    }
    row.messages = messages;
    row.add_generation_prompt = gen;
    console.log(JSON.stringify(row));
  }
}
// A call as LFM2 writes it: <|tool_call_start|>[name(arg="value", n=3)]<|tool_call_end|>.
function lfm2Call(rng) {
  const args = Object.entries(jsonObject(rng, 2, true)).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return `<|tool_call_start|>[${NAMES[Math.floor(rng() * NAMES.length)]}(${args.join(", ")})]<|tool_call_end|>`;
}
function qwenUserTool(rng) {
  return rng() < 0.2 ? "<tool_response>" + toolText(rng) + "</tool_response>" : toolText(rng);
}

// Each assistant turn's text after its header through its end of turn (not
// the generation prompt's).
const TURN_MARKS = { qwen3: ["<|im_start|>assistant\n", "<|im_end|>"], "qwen3.5": ["<|im_start|>assistant\n", "<|im_end|>"],
  lfm2: ["<|im_start|>assistant\n", "<|im_end|>"], "lfm2.5": ["<|im_start|>assistant\n", "<|im_end|>"],
  "llama3.1": ["<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"] };
function assistantSpans(text, name) {
  const [open, close] = TURN_MARKS[name];
  const out = [];
  for (let at = text.indexOf(open); at >= 0; at = text.indexOf(open, at + 1)) {
    const end = text.indexOf(close, at);
    if (end < 0) break;
    out.push(text.slice(at + open.length, end + close.length));
  }
  return out;
}

function cmdToolsJinja(convPath, renderedPath, qwenConfigPath, llamaPath, qwen35Path, lfm2Path, lfm25Path) {
  const convs = lines(convPath), rendered = lines(renderedPath);
  if (convs.length !== rendered.length || convs.length === 0) die(`${convs.length} conversations, ${rendered.length} renders`, 1);
  // Meta's file ends with a newline that Jinja engines drop.
  const real = { qwen3: JSON.parse(readFileSync(qwenConfigPath, "utf8")).chat_template,
    "llama3.1": readFileSync(llamaPath, "utf8").replace(/\n$/, ""),
    "qwen3.5": readFileSync(qwen35Path, "utf8").replace(/\n$/, ""),
    lfm2: readFileSync(lfm2Path, "utf8").replace(/\n$/, ""), "lfm2.5": readFileSync(lfm25Path, "utf8").replace(/\n$/, "") };
  const templates = Object.fromEntries(Object.entries(real).map(([k, v]) => [k, new Template(v)]));
  let calls = 0, outputs = 0;
  const rows = {};
  for (let i = 0; i < convs.length; i++) {
    const name = convs[i].template;
    if (rendered[i].jinja !== real[name]) die(`line ${i + 1}: ggtrain writes another tokenizer.chat_template than ${name}'s own`, 1);
    const template = templates[name];
    rows[name] = (rows[name] ?? 0) + 1;
    const vars = { messages: convs[i].messages, add_generation_prompt: convs[i].add_generation_prompt,
      bos_token: "", eos_token: "" };
    if (convs[i].tools) vars.tools = convs[i].tools;
    const out = template.render(vars);
    if (out !== rendered[i].rendered)
      die(`line ${i + 1}: @huggingface/jinja renders ${JSON.stringify(out)}, ggtrain ${JSON.stringify(rendered[i].rendered)}`, 1);
    const want = assistantSpans(out, name).join("\u0000"), got = rendered[i].trained.join("\u0000");
    if (want !== got) die(`line ${i + 1}: trained spans ${JSON.stringify(rendered[i].trained)}, the assistant's turns ` +
                          `${JSON.stringify(assistantSpans(out, name))}`, 1);
    for (const m of convs[i].messages) {
      calls += m.tool_calls?.length ?? 0;
      outputs += m.role === "tool" ? 1 : 0;
    }
  }
  console.log(`@huggingface/jinja: ${convs.length} tool conversations (${JSON.stringify(rows)}; ${calls} calls, ` +
              `${outputs} tool outputs) rendered byte-identically by the real templates; the loss on exactly the ` +
              "assistant's turns");
}

function cmdJinjaInputs(convPath, renderedPath) {
  const convs = lines(convPath), rendered = lines(renderedPath);
  if (convs.length !== rendered.length) die(`${convs.length} conversations, ${rendered.length} renders`, 1);
  convs.forEach((c, i) => {
    const vars = { messages: c.messages, bos_token: "", eos_token: "" };
    if (c.add_generation_prompt) vars.add_generation_prompt = true;
    if (c.tools) vars.tools = c.tools;
    console.log(JSON.stringify({ jinja: rendered[i].jinja, vars }));
  });
}

function lines(path) {
  return readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
}

function cmdJinja(convPath, renderedPath) {
  const convs = lines(convPath), rendered = lines(renderedPath);
  if (convs.length !== rendered.length) die(`${convs.length} conversations, ${rendered.length} renders`, 1);
  const cache = new Map();
  let skipped = 0;
  for (let i = 0; i < convs.length; i++) {
    // @huggingface/jinja 0.5.11 ignores the argument of strip/lstrip/rstrip
    // (it strips all white space), which Qwen3's template relies on; the
    // Jinja engines that render that template (Python's Jinja2 in
    // transformers, llama.cpp's) honour it: those rows go to llama.cpp's.
    // Qwen3.5's and SmolLM3's templates rely on it too.
    if (convs[i].template.startsWith("qwen3") || convs[i].template === "smollm3") {
      skipped++;
      continue;
    }
    const jinja = rendered[i].jinja;
    if (!cache.has(jinja)) cache.set(jinja, new Template(jinja));
    // BOS comes from the tokenizer (Llama 3.1's template writes bos_token).
    const out = cache.get(jinja).render({
      messages: convs[i].messages,
      add_generation_prompt: convs[i].add_generation_prompt,
      bos_token: "",
      eos_token: "</s>",
    });
    if (out !== rendered[i].rendered) {
      die(`line ${i + 1} (${convs[i].template}): @huggingface/jinja renders ${JSON.stringify(out)}, ggtrain ` +
          `${JSON.stringify(rendered[i].rendered)}`, 1);
    }
  }
  console.log(`@huggingface/jinja: ${convs.length - skipped} conversations rendered byte-identically ` +
              `(${skipped} of qwen3, qwen3.5 and smollm3 left to llama.cpp's Jinja engine)`);
}

// A model family's own template (qwen3, gemma3: no llama.cpp built-in name)
// is rendered otherwise by llama.cpp's built-in renderer; those rows are
// checked against the real template string by `family`.
function cmdCompareRenders(renderedPath, llamaPath, which) {
  const ours = lines(renderedPath), theirs = lines(llamaPath);
  if (ours.length !== theirs.length) die(`${ours.length} renders, ${theirs.length} from llama.cpp`, 1);
  if (which === "all") {
    for (let i = 0; i < ours.length; i++)
      if (ours[i].rendered !== theirs[i])
        die(`line ${i + 1}: llama.cpp's Jinja engine renders ${JSON.stringify(theirs[i])}, ggtrain ` +
            `${JSON.stringify(ours[i].rendered)}`, 1);
    console.log(`llama.cpp's Jinja engine: ${ours.length} conversations rendered byte-identically`);
    return;
  }
  let compared = 0;
  for (let i = 0; i < ours.length; i++) {
    if (ours[i].llama_cpp === "") continue;
    compared++;
    if (ours[i].rendered !== theirs[i])
      die(`line ${i + 1}: llama.cpp renders ${JSON.stringify(theirs[i])}, ggtrain ${JSON.stringify(ours[i].rendered)}`, 1);
  }
  if (compared === 0) die("no conversation of a llama.cpp built-in template", 1);
  console.log(`llama.cpp's built-in renderer: ${compared} conversations rendered byte-identically ` +
              `(${ours.length - compared} of model families' own templates, which it renders otherwise)`);
}

async function loadVocab(vocabPath) {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ build: "never", skipDownload: true, gpu: false, maxThreads: 1,
    logLevel: LlamaLogLevel.error, progressLogs: false });
  const model = await llama.loadModel({ modelPath: resolve(vocabPath), gpuLayers: 0, vocabOnly: true });
  const jinja = model.fileInfo.metadata?.tokenizer?.chat_template;
  if (typeof jinja !== "string") die(`${vocabPath}: no tokenizer.chat_template`, 1);
  return { llama, model, jinja };
}

// Input for tests/compat/llama_jinja_render.cpp: each conversation with the
// tokenizer.chat_template VOCAB.gguf carries (BOS comes from the tokenizer:
// bos_token is empty, as llama.cpp strips it when it adds BOS itself).
async function cmdFamilyInputs(vocabPath, convPath) {
  const { llama, model, jinja } = await loadVocab(vocabPath);
  for (const c of lines(convPath)) {
    const vars = { messages: c.messages, bos_token: "", eos_token: "" };
    if (c.add_generation_prompt) vars.add_generation_prompt = true;
    if (c.tools) vars.tools = c.tools;
    console.log(JSON.stringify({ jinja, vars }));
  }
  await model.dispose();
  await llama.dispose();
}

// The model's own template (as the GGUF carries it, imported from its
// tokenizer_config.json) rendered by llama.cpp's Jinja engine (JINJA_OUT)
// must give ggtrain's bytes, ggtrain must recognise that template as the
// rows' one, and llama.cpp must tokenize the render (special tokens parsed,
// BOS as the model asks) to ggtrain's ids.
async function cmdFamily(vocabPath, convPath, renderedPath, jinjaOutPath) {
  const { llama, model } = await loadVocab(vocabPath);
  const convs = lines(convPath), rendered = lines(renderedPath), theirs = lines(jinjaOutPath);
  if (convs.length !== rendered.length || convs.length !== theirs.length || convs.length === 0)
    die(`${convs.length} conversations, ${rendered.length} renders, ${theirs.length} from llama.cpp`, 1);
  let tokens = 0;
  for (let i = 0; i < convs.length; i++) {
    if (rendered[i].model_template !== convs[i].template)
      die(`line ${i + 1}: ggtrain takes ${vocabPath}'s template for "${rendered[i].model_template}", not ${convs[i].template}`, 1);
    if (theirs[i] !== rendered[i].rendered)
      die(`line ${i + 1} (${convs[i].template}): the model's template renders ${JSON.stringify(theirs[i])} in ` +
          `llama.cpp, ggtrain ${JSON.stringify(rendered[i].rendered)}`, 1);
    const ids = model.tokenize(theirs[i], true);
    if (model.tokens.shouldPrependBosToken) ids.unshift(model.tokens.bos);
    if (ids.join(",") !== rendered[i].ids.join(","))
      die(`line ${i + 1}: llama.cpp gives [${ids}], ggtrain [${rendered[i].ids}] for ${JSON.stringify(theirs[i])}`, 1);
    tokens += ids.length;
  }
  console.log(`family: ${convs.length} ${convs[0].template} conversations: the model's own template renders ` +
              `ggtrain's bytes in llama.cpp's Jinja engine; llama.cpp gives the same ${tokens} ids`);
  await model.dispose();
  await llama.dispose();
}

// A negative control: at least one of RENDERED's rows differs from JINJA_OUT's.
function cmdDiffers(renderedPath, jinjaOutPath, name) {
  const ours = lines(renderedPath), theirs = lines(jinjaOutPath);
  if (ours.length !== theirs.length || ours.length === 0) die(`${ours.length} renders vs ${theirs.length}`, 1);
  const n = ours.filter((r, i) => r.rendered !== theirs[i]).length;
  if (n === 0) die(`${name} renders all ${ours.length} rows as the model's template does`, 1);
  console.log(`control: ${name} renders ${n} of ${ours.length} of these rows otherwise`);
}

function cmdCompareChat(oursPath, llamaPath, minStoppedText) {
  const ours = lines(oursPath), theirs = lines(llamaPath);
  if (ours.length !== theirs.length || ours.length === 0) die(`${ours.length} replies vs ${theirs.length}`, 1);
  let stopped = 0;
  for (let i = 0; i < ours.length; i++) {
    if (ours[i].prompt_ids.join(",") !== theirs[i].prompt_ids.join(","))
      die(`prompt ${i + 1}: ggtrain's prompt ids [${ours[i].prompt_ids}], llama.cpp's [${theirs[i].prompt_ids}]`, 1);
    const a = ours[i].ids.join(","), b = theirs[i].ids.join(",");
    if (a !== b || ours[i].stopped !== theirs[i].stopped)
      die(`prompt ${i + 1}: ggtrain [${a}] (stopped ${ours[i].stopped}), llama.cpp [${b}] (stopped ${theirs[i].stopped})`, 1);
    stopped += theirs[i].stopped ? 1 : 0;
  }
  if (stopped < Number(minStoppedText))
    die(`only ${stopped} of ${ours.length} replies stopped at an end-of-generation token (want >= ${minStoppedText})`, 1);
  console.log(`chat: ${ours.length} greedy replies identical to llama.cpp's; ${stopped} stopped at end of turn`);
}

async function cmdTokenize(modelPath, renderedPath) {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ build: "never", skipDownload: true, gpu: false, maxThreads: 1,
    logLevel: LlamaLogLevel.error, progressLogs: false });
  const model = await llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0 });
  const rendered = lines(renderedPath);
  for (let i = 0; i < rendered.length; i++) {
    const ids = model.tokenize(rendered[i].rendered, true);
    if (model.tokens.shouldPrependBosToken) ids.unshift(model.tokens.bos);
    if (ids.join(",") !== rendered[i].ids.join(","))
      die(`line ${i + 1}: llama.cpp gives [${ids}], ggtrain [${rendered[i].ids}] for ${JSON.stringify(rendered[i].rendered)}`, 1);
  }
  console.log(`tokenize: ${rendered.length} rendered conversations, identical ids (special tokens parsed)`);
  await model.dispose();
  await llama.dispose();
}

async function cmdChat(modelPath, promptsPath, nText, loraPath) {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ build: "never", skipDownload: true, gpu: false, maxThreads: 1,
    logLevel: LlamaLogLevel.error, progressLogs: false });
  const model = await llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0, defaultContextFlashAttention: false });
  const jinja = model.fileInfo.metadata?.tokenizer?.chat_template;
  if (typeof jinja !== "string") die(`${modelPath}: no tokenizer.chat_template`, 1);
  const template = new Template(jinja);
  const n = Number(nText);
  const prompts = readFileSync(promptsPath, "utf8").split("\n").filter((l) => l.length > 0);
  for (const prompt of prompts) {
    const text = template.render({ messages: [{ role: "user", content: prompt }], add_generation_prompt: true,
      bos_token: "", eos_token: "" });
    const ids = model.tokenize(text, true);
    if (model.tokens.shouldPrependBosToken) ids.unshift(model.tokens.bos);
    const context = await model.createContext({ sequences: 1, contextSize: ids.length + n + 1, batchSize: ids.length,
      flashAttention: false, threads: 1, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
      lora: loraPath ? { adapters: [{ filePath: resolve(loraPath) }] } : undefined });
    const sequence = context.getSequence();
    const step = async (toks) => {
      const res = await sequence.controlledEvaluate(toks.map((t, i) => i + 1 === toks.length
        ? [t, { generateNext: { logits: true } }] : t));
      const m = res[res.length - 1]?.next?.logits;
      if (!(m instanceof Map)) die("no logits", 1);
      let best = -1, bestV = -Infinity;
      for (const [tok, v] of m) if (v > bestV || (v === bestV && tok < best)) { best = tok; bestV = v; }
      return best;
    };
    const out = [];
    let stopped = false;
    let next = await step(ids);
    for (let i = 0; i < n; i++) {
      out.push(next);
      if (model.isEogToken(next)) { stopped = true; break; }
      if (i + 1 < n) next = await step([next]);
    }
    console.log(JSON.stringify({ prompt_ids: ids, ids: out, stopped }));
    await context.dispose();
  }
  await model.dispose();
  await llama.dispose();
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "conversations" && args.length === 2) cmdConversations(...args);
else if (cmd === "tool-conversations" && args.length === 2) cmdToolConversations(...args);
else if (cmd === "tools-jinja" && args.length === 7) cmdToolsJinja(...args);
else if (cmd === "jinja-inputs" && args.length === 2) cmdJinjaInputs(...args);
else if (cmd === "jinja" && args.length === 2) cmdJinja(...args);
else if (cmd === "compare-renders" && args.length === 3) cmdCompareRenders(...args);
else if (cmd === "family-inputs" && args.length === 2) await cmdFamilyInputs(...args);
else if (cmd === "family" && args.length === 4) await cmdFamily(...args);
else if (cmd === "differs" && args.length === 3) cmdDiffers(...args);
else if (cmd === "tokenize" && args.length === 2) await cmdTokenize(...args);
else if (cmd === "compare-chat" && args.length === 3) cmdCompareChat(...args);
else if (cmd === "chat" && (args.length === 3 || args.length === 4)) await cmdChat(...args);
else die("usage: see the comment at the top of chat_check.mjs");
