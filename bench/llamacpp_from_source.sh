#!/usr/bin/env bash
# llama.cpp as a user who builds it runs it: llama-bench built from the
# source node-llama-cpp ships (llama/gitRelease.bundle, the release its
# prebuilt libraries come from) with OpenMP and -march=native, then pp P /
# tg N @ d P (after a P-token prompt, as the other two decode) on MODEL.gguf
# and on its exports (TYPES, default "f32 q8_0 q4_k_m"); then compare_llamacpp.sh (the
# prebuilt libraries through the C API, and ggtrain generate), so the three
# come from one invocation. Build folders: build/llama.cpp-src and
# build/llama.cpp-build; nothing of it is part of ggtrain.
#
#   bench/llamacpp_from_source.sh [MODEL.gguf (default runs/kjv/weights/latest)] [THREADS (2)] [P (128)] [N (128)]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-runs/kjv/weights/latest}
THREADS=${2:-2}
P=${3:-128}
N=${4:-128}
# The same types as compare_llamacpp.sh (its TYPES, read there too).
export TYPES=${TYPES:-f32 q8_0 q4_k_m}
BUNDLE=tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
[[ -f $BUNDLE ]] || { echo "no $BUNDLE (run scripts/test.sh once)" >&2; exit 1; }
[[ -d build/llama.cpp-src ]] || git clone -q "$BUNDLE" build/llama.cpp-src 2>/dev/null
if [[ ! -x build/llama.cpp-build/bin/llama-bench ]]; then
  cmake -S build/llama.cpp-src -B build/llama.cpp-build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build build/llama.cpp-build --target llama-bench -j "$(nproc)" >/dev/null
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$MODEL" "$tmp/f32.gguf"
for t in $TYPES; do
  [[ $t == f32 ]] || build/src/ggtrain export "$MODEL" "$tmp/$t.gguf" --type "$t" >/dev/null
done
for t in $TYPES; do
  echo "== $t =="
  # pp P into an empty cache, then tg N @ d P: after the prompt, as the other two decode
  build/llama.cpp-build/bin/llama-bench -m "$tmp/$t.gguf" -p "$P" -n 0 -t "$THREADS" -r 5 -o md 2>/dev/null
  build/llama.cpp-build/bin/llama-bench -m "$tmp/$t.gguf" -p 0 -n "$N" -d "$P" -t "$THREADS" -r 5 -o md 2>/dev/null |
    grep -v '^| model\|^| ---'
done
echo "== prebuilt llama.cpp (C API) and ggtrain =="
bash bench/compare_llamacpp.sh "$MODEL" "$THREADS" "$P" "$N"
