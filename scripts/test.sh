#!/usr/bin/env bash
# Installs everything the tests need (Debian packages, the npm packages of
# tests/node), builds with MPI required, and runs the whole CTest suite; then
# the arm64 build's suites under qemu-user (scripts/test_aarch64.sh), the
# clean-install check (scripts/check_clean_install.sh), the fuzz targets
# (fuzz/run.sh) and the suite again under ASan + UBSan
# (scripts/test_sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# node-llama-cpp 3.22.1 (tests/node) needs Node.js >= 20; Debian 12's own
# nodejs is 18. Say so in one line instead of failing deep inside npm.
NODE_MAJOR_NEEDED=20
if command -v node >/dev/null; then
  node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if (( node_major < NODE_MAJOR_NEEDED )); then
    echo "test.sh: Node.js >= $NODE_MAJOR_NEEDED is needed (node-llama-cpp 3.22.1); found $(node --version) at $(command -v node)" >&2
    exit 1
  fi
fi

# Each phase prints how long it took, and the EXIT line lists them all: the
# CI log keeps only its last lines, and they say where the time went.
t_start=$(date +%s)
phase_times=()
phases_line() {
  local IFS=,
  echo "test.sh: phases: ${phase_times[*]:-none}; $(( $(date +%s) - t_start )) s in all" | sed 's/,/, /g'
}
trap phases_line EXIT
# run_phase NAME COMMAND...: runs COMMAND and records its seconds.
run_phase() {
  local name=$1 t0
  shift
  t0=$(date +%s)
  echo "test.sh: $name, from $(( t0 - t_start )) s"
  "$@"
  phase_times+=("$name $(( $(date +%s) - t0 )) s")
}

# ccache keys on paths relative to the checkout and not on the working
# folder, so a clone in another folder (CI's) reuses what the last run
# compiled. The cache itself is ccache's default (~/.cache/ccache).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
# Its counts from here on (printed at the end).
if command -v ccache >/dev/null; then ccache --zero-stats >/dev/null; fi

# MPI is required here (GGTRAIN_MPI=ON): without it the `mpi` tests would
# silently not exist.
GGTRAIN_MPI=ON GGTRAIN_WITH_TESTS=1 GGTRAIN_WITH_NODE=1 GGTRAIN_WITH_FUZZ=1 GGTRAIN_WITH_DEBOOTSTRAP=1 \
  GGTRAIN_WITH_AARCH64=1 run_phase setup bash scripts/setup.sh
node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < NODE_MAJOR_NEEDED )); then
  echo "test.sh: Node.js >= $NODE_MAJOR_NEEDED is needed (node-llama-cpp 3.22.1); found $(node --version) at $(command -v node)" >&2
  exit 1
fi
if [[ ! -d tests/node/node_modules ]] || [[ tests/node/package-lock.json -nt tests/node/node_modules ]]; then
  (cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund)
  touch tests/node/node_modules
fi

# In CI (CI=true) a test that skips (GTEST_SKIP for want of root, a
# namespace, a mount) fails instead: see tests/support/skip.h.
run_phase tests ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
n_mpi=$(ctest --test-dir build -N -L mpi | sed -n 's/^Total Tests: //p')
if [[ -z $n_mpi || $n_mpi -eq 0 ]]; then
  echo "test.sh: no test labelled mpi ran (is Open MPI installed and the build configured with it?)" >&2
  exit 1
fi
echo "test.sh: $n_mpi mpi-labelled tests ran"

# 64-bit ARM: cross-built, its engine suites run under qemu-user
# (build-aarch64/). GGTRAIN_AARCH64=0 skips it outside CI.
if [[ "${GGTRAIN_AARCH64:-1}" != 0 || "${CI:-}" == true ]]; then
  GGTRAIN_MPI=ON run_phase aarch64 bash scripts/test_aarch64.sh
fi

# The README's set-up from a bare Debian 12: about 10 minutes,
# most of it apt and the build. GGTRAIN_CLEAN_INSTALL=0 skips it outside CI.
if [[ "${GGTRAIN_CLEAN_INSTALL:-1}" != 0 || "${CI:-}" == true ]]; then
  run_phase clean-install bash scripts/check_clean_install.sh
fi

# Fuzzing: each libFuzzer target for GGTRAIN_FUZZ_SECONDS (default 30; 0
# skips), after its regression inputs; nine targets, two at a time: about 2.5 minutes on 2 cores. CI's whole
# run has to fit 90 minutes on 2 cores: longer campaigns are for
# `bash fuzz/run.sh all SECONDS` by hand.
if [[ "${GGTRAIN_FUZZ_SECONDS:-30}" != 0 ]]; then
  run_phase fuzz bash fuzz/run.sh all "${GGTRAIN_FUZZ_SECONDS:-30}"
fi

# The CTest suite again under ASan + UBSan (build-asan/).
# GGTRAIN_SANITIZERS=0 skips it. Its 600 test lines go to
# build/sanitizers.log (so the phase times stay in CI's last lines); a
# failure prints the failing tests and the log's end.
sanitizers() {
  local log=build/sanitizers.log
  if bash scripts/test_sanitizers.sh >"$log" 2>&1; then
    grep -E '^(sanitizers:|[0-9]+% tests passed|Total Test time)' "$log"
  else
    grep -E 'Failed|Timeout|Not Run|ERROR: AddressSanitizer|runtime error' "$log" | head -n 40 || true
    tail -n 150 "$log"
    echo "test.sh: the sanitizer run failed (whole log: $log)" >&2
    return 1
  fi
}
if [[ "${GGTRAIN_SANITIZERS:-1}" != 0 ]]; then
  run_phase sanitizers sanitizers
fi
if command -v ccache >/dev/null; then
  echo "test.sh: ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += $2 } $1 == "cache_miss" { miss = $2 } END { printf "%d hits, %d misses", hit, miss }')"
fi
