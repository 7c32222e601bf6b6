#!/usr/bin/env bash
# The main job on the embedded default. For now (until `ggtrain train` lands)
# it builds ggtrain, prints its help, and lists a llama.cpp model with it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/src/ggtrain --help
if [[ -f ../shared/fixtures/tiny-gpt2.gguf ]]; then
  ./build/src/ggtrain inspect ../shared/fixtures/tiny-gpt2.gguf
fi
