#!/usr/bin/env bash
# Cross-checks ggtrain's GGUF writer and reader against @huggingface/gguf:
# writes a sample with every metadata type and tensor type (default and 64-byte
# alignment), then compares `ggtrain inspect --json` with hf-gguf's parse of
# the same file, for the samples and for llama.cpp-written fixtures.
#
#   tests/node/run_hf_check.sh PATH/TO/ggtrain PATH/TO/make_sample_gguf
#
# Needs node and `npm ci` (or `npm install`) in tests/node.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fixtures="${GGTRAIN_FIXTURES_DIR:-$here/../fixtures}"

if [ $# -ne 2 ]; then
  echo "usage: $0 PATH/TO/ggtrain PATH/TO/make_sample_gguf" >&2
  exit 2
fi
ggtrain="$1"
make_sample="$2"

if ! command -v node >/dev/null 2>&1; then
  echo "run_hf_check: node is not installed" >&2
  exit 1
fi
if [ ! -f "$here/node_modules/@huggingface/gguf/package.json" ]; then
  echo "run_hf_check: $here/node_modules/@huggingface/gguf is missing;" \
       "run 'npm ci' in $here first" >&2
  exit 1
fi
for bin in "$ggtrain" "$make_sample"; do
  if [ ! -x "$bin" ]; then
    echo "run_hf_check: $bin is not an executable" >&2
    exit 1
  fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

check() {
  local gguf="$1" json="$tmp/$(basename "$1").json"
  "$ggtrain" inspect --json "$gguf" > "$json"
  node "$here/hf_gguf_check.mjs" "$gguf" "$json"
}

"$make_sample" "$tmp/sample.gguf"
"$make_sample" "$tmp/sample-align64.gguf" 64
check "$tmp/sample.gguf"
check "$tmp/sample-align64.gguf"
for f in tiny-gpt2.gguf tiny-spm.gguf; do
  if [ ! -f "$fixtures/$f" ]; then
    echo "run_hf_check: fixture $fixtures/$f is missing" >&2
    exit 1
  fi
  check "$fixtures/$f"
done
echo "run_hf_check: ggtrain and @huggingface/gguf agree on every file"
