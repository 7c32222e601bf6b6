#!/usr/bin/env bash
# Installs everything the tests need (Debian packages, the npm packages of
# tests/node), builds, and runs the whole CTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
GGTRAIN_WITH_NODE=1 bash scripts/setup.sh
if [[ ! -d tests/node/node_modules ]] || [[ tests/node/package-lock.json -nt tests/node/node_modules ]]; then
  (cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund)
  touch tests/node/node_modules
fi
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 900
