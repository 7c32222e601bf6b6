# Sourced by the llama.cpp logit checks (llama_cpp_llama3_check.sh,
# llama_cpp_arch_check.sh). The caller sets GGTRAIN, HERE (tests/), CLI
# (tests/node/llama_cpp.mjs) and fail(), and runs in its temporary folder.

# PY: a python3 with numpy; GGUF_PY: llama.cpp's gguf-py, checked out of the
# source bundle node-llama-cpp ships into ./llama-src.
use_gguf_py() {
  local bundle="$HERE/node/node_modules/node-llama-cpp/llama/gitRelease.bundle" p
  command -v git >/dev/null || fail "'git' is missing (reads gguf-py from node-llama-cpp's source bundle)"
  [[ -f "$bundle" ]] || fail "no $bundle; run npm ci in tests/node (see scripts/test.sh)"
  PY=""
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
  done
  [[ -n $PY ]] || fail "no python3 with numpy (apt-get install python3-numpy)"
  git clone -q --no-checkout "$bundle" llama-src 2>/dev/null || fail "cannot clone $bundle"
  git -C llama-src checkout -q HEAD -- gguf-py || fail "no gguf-py in $bundle"
  export GGUF_PY=$PWD/llama-src/gguf-py
  export PYTHONDONTWRITEBYTECODE=1  # make_llama3_gguf.py imports gguf_as_arch.py: no __pycache__ in tests/
}

# ./llama_quantize: the C API harness (tests/compat/llama_quantize.cpp) built
# against node-llama-cpp's prebuilt libllama and the llama.h of the release it
# ships; needs ./llama-src (use_gguf_py's checkout of that release).
build_llama_quantize() {
  local lib="$HERE/node/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64" libllama libggml
  command -v g++ >/dev/null || fail "'g++' is missing (builds the llama.cpp C API harness)"
  libllama=$(ls "$lib"/libllama.*so 2>/dev/null | head -1)
  libggml=$(ls "$lib"/libggml.*so 2>/dev/null | head -1)
  [[ -f "$libllama" && -f "$libggml" ]] || fail "no libllama/libggml under $lib; run npm ci in tests/node"
  (cd llama-src && git archive HEAD include ggml/include) | tar -x || fail "no headers in the source bundle"
  g++ -O1 -std=c++17 -Iinclude -Iggml/include "$HERE/compat/llama_quantize.cpp" -o llama_quantize "$libllama" \
    "$libggml" "$lib/libggml-base.so" -Wl,-rpath,"$lib" || fail "cannot build the llama.cpp C API harness"
}

# ids: BOS and the first 59 tokens of corpus.txt's first three lines under MODEL.
set_prompt_ids() {
  ids=$(cut -d, -f1-60 <<<"1,$("$GGTRAIN" tokenize -m "$1" --lines <(head -n 3 corpus.txt | tr '\n' ' '; echo))")
  [[ $(tr -cd , <<<"$ids" | wc -c) -eq 59 ]] || fail "the prompt has fewer than 60 tokens: $ids"
}

# logits MODEL NAME [ADAPTER]: ggtrain's and llama.cpp's on $ids, as NAME-ours/theirs.f32
logits() {
  local lora=()
  [[ $# -lt 3 ]] || lora=(--lora "$3")
  "$GGTRAIN" eval --cache-type f32 -m "$1" "${lora[@]}" --tokens "$ids" --dump-logits "$2-ours.f32" >/dev/null
  node "$CLI" logits "$1" "$ids" "$2-theirs.f32" ${3:+"$3"} 2>/dev/null
}

# same NAME TOL WHAT [MEDIAN]: ggtrain's and llama.cpp's logits of NAME agree
# within TOL (max abs) and MEDIAN (median abs, when given)
same() {
  local report limits="$2${4:+, median $4}"
  report=$(node "$CLI" compare "$1-ours.f32" "$1-theirs.f32" "$2" ${4:+"$4"}) ||
    { echo "$report"; fail "$3: ggtrain and llama.cpp differ by more than $limits"; }
  echo "$3: $report (limit $limits)"
}

# differ A.f32 B.f32 MIN WHAT: a control; the two must differ by more than MIN
differ() {
  local report
  if report=$(node "$CLI" compare "$1" "$2" "$3" 2>/dev/null); then
    fail "control: $4 differ by only $report (what the check compares would go untested)"
  fi
  echo "control: $4: $(head -n 1 <<<"$report") (must exceed $3)"
}
