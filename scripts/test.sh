#!/usr/bin/env bash
# Installs everything the tests need (Debian packages, the npm packages of
# tests/node), builds, and runs the whole CTest suite; then the fuzz targets
# (fuzz/run.sh) and the suite again under ASan + UBSan
# (scripts/test_sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
GGTRAIN_WITH_NODE=1 GGTRAIN_WITH_FUZZ=1 bash scripts/setup.sh
if [[ ! -d tests/node/node_modules ]] || [[ tests/node/package-lock.json -nt tests/node/node_modules ]]; then
  (cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund)
  touch tests/node/node_modules
fi
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900)

# Fuzzing (issue 9): each libFuzzer target for GGTRAIN_FUZZ_SECONDS (default
# 60; 0 skips), after its regression inputs; about 3 minutes on 2 cores.
if [[ "${GGTRAIN_FUZZ_SECONDS:-60}" != 0 ]]; then
  bash fuzz/run.sh all "${GGTRAIN_FUZZ_SECONDS:-60}"
fi

# The whole CTest suite again under ASan + UBSan (build-asan/); about
# 6 minutes on 2 cores, most of it the build. GGTRAIN_SANITIZERS=0 skips it.
if [[ "${GGTRAIN_SANITIZERS:-1}" != 0 ]]; then
  bash scripts/test_sanitizers.sh
fi
