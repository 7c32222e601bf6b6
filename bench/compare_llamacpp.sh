#!/usr/bin/env bash
# Inference speed of ggtrain and llama.cpp on the same GGUF, same threads, in
# one run: pp P (a prompt of P tokens, BOS then random ids, into an empty
# cache) and tg N (N tokens one at a time), for the F32 model and its
# quantized exports (TYPES, default "f32 q8_0 q4_k_m"), and the ratios. llama.cpp runs through its C API
# (bench/llamacpp_anchor.cpp, llama-bench's definitions), built here against
# the shared libraries of the npm package @node-llama-cpp/linux-x64 (installed
# by scripts/test.sh) and the llama.h of the same release (node-llama-cpp's
# llama/gitRelease.bundle, cloned into build/llama.cpp-src). Never part of
# ggtrain or its tests. ggtrain runs `generate --temp 0 --ignore-eos`, which
# includes the greedy pick of each token (llama-bench's tg samples nothing).
# Both decode their N tokens after the P-token prompt (llama.cpp: tg N @ d P,
# llama-bench's -d), so long prompts also measure decode deep in a context.
#
#   bench/compare_llamacpp.sh [MODEL.gguf (default runs/kjv/weights/latest)] [THREADS (2)] [P (128)] [N (128)]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-runs/kjv/weights/latest}
THREADS=${2:-2}
P=${3:-128}
N=${4:-128}
[[ -f "$MODEL" ]] || { echo "no model at $MODEL (run scripts/run.sh first)" >&2; exit 1; }
NLC=tests/node/node_modules
LIB=$NLC/@node-llama-cpp/linux-x64/bins/linux-x64
BUNDLE=$NLC/node-llama-cpp/llama/gitRelease.bundle
[[ -d $LIB && -f $BUNDLE ]] || { echo "no llama.cpp libraries in $NLC (run scripts/test.sh once)" >&2; exit 1; }
GG=build/src/ggtrain
ANCHOR=build/bench/bench_llamacpp_anchor
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
if [[ ! -x $ANCHOR || bench/llamacpp_anchor.cpp -nt $ANCHOR ]]; then
  [[ -d build/llama.cpp-src ]] || git clone -q "$BUNDLE" build/llama.cpp-src 2>/dev/null
  mkdir -p build/bench
  g++ -O2 -std=c++17 bench/llamacpp_anchor.cpp -o "$ANCHOR" \
    -Ibuild/llama.cpp-src/include -Ibuild/llama.cpp-src/ggml/include \
    "$(ls "$LIB"/libllama.*so | head -1)" "$(ls "$LIB"/libggml.*so | head -1)" "$LIB/libggml-base.so" \
    -Wl,-rpath,"$PWD/$LIB"
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), flags: $(grep -o -w 'avx512f\|avx512_vnni\|avx_vnni\|amx_int8\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "llama.cpp: $(sed -n 's/.*"tag": "\(.*\)".*/\1/p' "$NLC/node-llama-cpp/llama/llama.cpp.info.json") (node-llama-cpp's release)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$MODEL" "$tmp/f32.gguf"
TYPES=${TYPES:-f32 q8_0 q4_k_m}
for t in $TYPES; do [[ $t == f32 ]] || "$GG" export "$MODEL" "$tmp/$t.gguf" --type "$t" >/dev/null; done
vocab=$("$GG" inspect "$MODEL" --json | sed -n 's/.*"llama.vocab_size": *\([0-9]*\).*/\1/p' | head -1)
ids=$(awk -v p="$P" -v v="${vocab:-4096}" 'BEGIN { srand(1); s = "1"; for (i = 1; i < p; i++) s = s "," int(rand() * v); print s }')
for t in $TYPES; do
  "$ANCHOR" "$tmp/$t.gguf" "$LIB" -p "$P" -n "$N" -d "$P" -t "$THREADS" -r 5 | sed "s/^/$t /"
  pp=0 tg=0
  for r in 1 2 3; do
    line=$("$GG" generate -m "$tmp/$t.gguf" --tokens "$ids" -n "$N" --temp 0 --ignore-eos -t "$THREADS" 2>&1 >/dev/null | tail -1)
    p1=$(sed -n 's/^prompt: [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' <<<"$line")
    t1=$(sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' <<<"$line")
    pp=$(awk -v a="$pp" -v x="$p1" 'BEGIN { print a + x / 3 }')
    tg=$(awk -v a="$tg" -v x="$t1" 'BEGIN { print a + x / 3 }')
  done
  printf '%s ggtrain generate: pp%d %.1f tokens/s, tg%d %.1f tokens/s (mean of 3)\n' "$t" "$P" "$pp" "$N" "$tg"
done
