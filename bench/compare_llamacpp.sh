#!/usr/bin/env bash
# Generation speed of ggtrain and llama.cpp (node-llama-cpp's prebuilt build)
# on the same GGUF, same threads, in one run: prompt processing and decode
# tokens/s for the F32 model and its Q8_0 export, and the ratios.
# Usage: bench/compare_llamacpp.sh [MODEL.gguf (default runs/kjv/weights/latest)] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-runs/kjv/weights/latest}
THREADS=${2:-2}
[[ -f "$MODEL" ]] || { echo "no model at $MODEL (run scripts/run.sh first)" >&2; exit 1; }
[[ -d tests/node/node_modules/node-llama-cpp ]] || { echo "run scripts/test.sh once (installs tests/node)" >&2; exit 1; }
GG=build/src/ggtrain
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$GG" export "$MODEL" "$tmp/q8_0.gguf" --type q8_0 >/dev/null
cp "$MODEL" "$tmp/f32.gguf"
echo "And it came to pass after these things, that God did tempt Abraham, and said unto him, Abraham: and he said, Behold, here I am. And he said, Take now thy son, thine only son Isaac, whom thou lovest, and get thee into the land of Moriah" > "$tmp/prompt.txt"
ids="1,$("$GG" tokenize -m "$MODEL" --lines "$tmp/prompt.txt")"
N=128
for t in f32 q8_0; do
  ours=$(OMP_NUM_THREADS=$THREADS "$GG" generate -m "$tmp/$t.gguf" --tokens "$ids" -n $N --temp 0 2>&1 >/dev/null | tail -1)
  theirs=$(NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node tests/node/llama_cpp.mjs bench "$tmp/$t.gguf" "$ids" $N "$THREADS")
  echo "$t ggtrain:   $ours"
  echo "$t $theirs"
  op=$(sed -n 's/.*prompt: [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' <<<"$ours")
  od=$(sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' <<<"$ours")
  tp=$(sed -n 's/.*prompt [0-9]* tokens \([0-9.]*\) tokens\/s.*/\1/p' <<<"$theirs")
  td=$(sed -n 's/.*decode [0-9]* tokens \([0-9.]*\) tokens\/s.*/\1/p' <<<"$theirs")
  awk -v op="$op" -v od="$od" -v tp="$tp" -v td="$td" -v t="$t" \
    'BEGIN { printf "%s ratio ggtrain/llama.cpp: prompt %.2f, decode %.2f\n", t, op/tp, od/td }'
done
