#!/usr/bin/env bash
# Builds llama.cpp's llama-perplexity, llama-imatrix and llama-quantize from
# the source node-llama-cpp ships (llama/gitRelease.bundle, the release its
# prebuilt libraries come from) into DIR, once: DIR/src is the checkout,
# DIR/build the CMake tree, and DIR/build/bin/ the tools. Independent
# references for the tests (multiple-choice scoring, KL divergence,
# importance matrices and quantizing with them); nothing of it is part of
# ggtrain. Compiled through ccache when installed, so a CI clone whose
# DIR sits under the checkout (CCACHE_BASEDIR) reuses the last run's objects.
#
#   tests/support/build_llama_perplexity.sh DIR
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE="$HERE/node/node_modules/node-llama-cpp/llama/gitRelease.bundle"
TOOLS=(llama-perplexity llama-imatrix llama-quantize)
built() {
  local t
  for t in "${TOOLS[@]}"; do [[ -x $DIR/build/bin/$t ]] || return 1; done
}
built && exit 0
[[ -f $BUNDLE ]] || { echo "no $BUNDLE; run npm ci in tests/node (see scripts/test.sh)" >&2; exit 1; }
command -v git >/dev/null || { echo "'git' is missing (clones node-llama-cpp's source bundle)" >&2; exit 1; }
mkdir -p "$DIR"
# A lock: two tests may ask for the tool at once under ctest -j.
exec 9>"$DIR/.lock"
flock 9
built && exit 0
[[ -d $DIR/src ]] || git clone -q "$BUNDLE" "$DIR/src" 2>/dev/null
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$DIR/src" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DBUILD_SHARED_LIBS=OFF "${launcher[@]}" >"$DIR/configure.log" 2>&1 \
  || { tail -20 "$DIR/configure.log" >&2; exit 1; }
cmake --build "$DIR/build" --target "${TOOLS[@]}" -j "$(nproc)" >"$DIR/build.log" 2>&1 \
  || { tail -20 "$DIR/build.log" >&2; exit 1; }
built
