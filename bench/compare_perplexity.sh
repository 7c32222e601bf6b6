#!/usr/bin/env bash
# Perplexity of a text, speed and value: `ggtrain eval --text` against
# llama.cpp's llama-perplexity (built here from the source node-llama-cpp
# ships, llama/gitRelease.bundle, with OpenMP and -march=native, as a user
# builds it; never part of ggtrain), same GGUF, text, context, threads and
# KV cache type (f16, both defaults), for the F32 model and its quantized
# exports (TYPES, default "f32 q8_0 q4_k_m"), in one invocation. Both cut
# the text into chunks of CTX tokens and score each chunk's second half;
# tokens/s is chunks x CTX over the time of the chunk loop, log-softmax
# included (llama-perplexity: between its log lines "calculating perplexity"
# and "Final estimate", whose timestamps read minutes.seconds.ms.us). The
# text: the Book of Revelation from Debian's bible-kjv.
#
#   bench/compare_perplexity.sh [MODEL.gguf (default runs/kjv/weights/latest)] [THREADS (2)] [CTX (the model's)]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-runs/kjv/weights/latest}
THREADS=${2:-2}
[[ -f "$MODEL" ]] || { echo "no model at $MODEL (run scripts/run.sh first)" >&2; exit 1; }
GG=build/src/ggtrain
CTX=${3:-$("$GG" inspect "$MODEL" | awk '$1 == "llama.context_length" { print $3 }')}
BUNDLE=tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
[[ -f $BUNDLE ]] || { echo "no $BUNDLE (run scripts/test.sh once)" >&2; exit 1; }
[[ -d build/llama.cpp-src ]] || git clone -q "$BUNDLE" build/llama.cpp-src 2>/dev/null
PPL=build/llama.cpp-build/bin/llama-perplexity
if [[ ! -x $PPL ]]; then
  cmake -S build/llama.cpp-src -B build/llama.cpp-build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build build/llama.cpp-build --target llama-perplexity -j "$(nproc)" >/dev/null
fi
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), flags: $(grep -o -w 'avx512f\|avx512_vnni\|avx_vnni\|amx_int8\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bible -f Rev1:1-Rev22:21 </dev/null | sed 's/^[^ ]* //' >"$tmp/text.txt"
echo "model $MODEL, context $CTX, $THREADS threads, text: Revelation ($(wc -c <"$tmp/text.txt") bytes)"
for t in ${TYPES:-f32 q8_0 q4_k_m}; do
  f=$tmp/$t.gguf
  if [[ $t == f32 ]]; then cp "$MODEL" "$f"; else "$GG" export "$MODEL" "$f" --type "$t" >/dev/null; fi
  ours=$("$GG" eval -m "$f" --text "$tmp/text.txt" -c "$CTX" -t "$THREADS" 2>/dev/null | tail -1)
  theirs=$("$PPL" -m "$f" -f "$tmp/text.txt" -c "$CTX" -b "$CTX" -t "$THREADS" -tb "$THREADS" 2>&1)
  our_ppl=$(sed -n 's/^perplexity \([0-9.]*\) .*/\1/p' <<<"$ours")
  our_rate=$(sed -n 's/.*, \([0-9.]*\) tokens\/s;.*/\1/p' <<<"$ours")
  their_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' <<<"$theirs")
  chunks=$(sed -n 's/.*over \([0-9]*\) chunks.*/\1/p' <<<"$ours")
  their_rate=$(awk -v tokens=$((chunks * CTX)) '
    function t(stamp, p) { split(stamp, p, "."); return p[1] * 60 + p[2] + p[3] / 1e3 + p[4] / 1e6 }
    /calculating perplexity over/ { t0 = t($1) }
    /Final estimate/ { printf "%.1f", tokens / (t($1) - t0) }' <<<"$theirs")
  echo "$t: ggtrain PPL $our_ppl at $our_rate tokens/s; llama-perplexity PPL $their_ppl at $their_rate tokens/s;" \
    "$chunks chunks; speed $(awk -v a="$our_rate" -v b="$their_rate" 'BEGIN { printf "%.2fx", a / b }')"
done
