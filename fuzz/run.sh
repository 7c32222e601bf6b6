#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs
# them. For each target the regression corpus fuzz/regressions/<target>/ is
# replayed first (every input there once crashed a reader and must now be
# rejected cleanly), then the target is fuzzed for SECONDS from the seeds in
# fuzz/corpus/<target>/ (plus the GGUF fixtures of tests/fixtures/).
#
#   fuzz/run.sh TARGET|all SECONDS     targets: gguf_reader tokenizer config token_file documents chat_records
#                                      choice_tasks hf_tokenizer preference_records
#   fuzz/run.sh seeds                  regenerate fuzz/corpus/ (make_seeds)
#
# Environment: FUZZ_JOBS (targets run at the same time, default: number of
# cores), FUZZ_BUILD_JOBS (default: number of cores), FUZZ_BUILD_DIR (default
# build-fuzz), FUZZ_MAX_LEN (default 65536,
# 8192 for config).
# New interesting inputs go to $FUZZ_BUILD_DIR/corpus/<target>/ (not to the
# repository); a crashing input is saved as $FUZZ_BUILD_DIR/artifacts/<target>/crash-*:
# fix the code, then copy it to fuzz/regressions/<target>/.
# Prints one line per target: executions, seconds, corpus size, findings;
# exits non-zero if any target found a crash or a regression input fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
MAX_LEN=${FUZZ_MAX_LEN:-65536}
JOBS=${FUZZ_JOBS:-$(nproc)}
FIXTURES=${GGTRAIN_FIXTURES_DIR:-$ROOT/tests/fixtures}
ALL=(gguf_reader tokenizer config token_file documents chat_records choice_tasks hf_tokenizer preference_records)

usage() { sed -n '2,20p' "$0" >&2; exit 2; }
[[ $# -ge 1 ]] || usage

build() {
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None >/dev/null
  fi
  cmake --build "$BUILD" -j "${FUZZ_BUILD_JOBS:-$(nproc)}" >/dev/null
}

# Leaks are findings too (the readers keep nothing between inputs), and so
# is a huge allocation a reader attempts (-malloc_limit_mb below).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
if [[ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"

if [[ $1 == seeds ]]; then
  build
  rm -rf fuzz/corpus
  "$BUILD/make_seeds" fuzz/corpus "$FIXTURES"
  du -sh fuzz/corpus
  exit 0
fi
[[ $# -eq 2 ]] || usage
SECONDS_EACH=$2
if [[ $1 == all ]]; then TARGETS=("${ALL[@]}"); else TARGETS=("$1"); fi
for t in "${TARGETS[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (${ALL[*]})" >&2; exit 2; }
done

build
mkdir -p "$BUILD/logs"

# Seeds kept outside fuzz/corpus: the test fixtures (GGUF targets only).
seed_dirs() {
  local t=$1
  echo "$ROOT/fuzz/corpus/$t"
  if [[ ($t == gguf_reader || $t == tokenizer) && -d $FIXTURES ]]; then
    mkdir -p "$BUILD/seeds/fixtures"
    cp -f "$FIXTURES"/*.gguf "$BUILD/seeds/fixtures/" 2>/dev/null || true
    echo "$BUILD/seeds/fixtures"
  fi
}

run_target() {
  local t=$1 bin="$BUILD/fuzz_$1" log="$BUILD/logs/$1.log"
  local reg="$ROOT/fuzz/regressions/$t"
  : > "$log"
  if compgen -G "$reg/*" >/dev/null; then
    if ! "$bin" -runs=1 "$reg"/* >>"$log" 2>&1; then
      echo "$t: REGRESSION: an input in fuzz/regressions/$t crashes again (see $log)"
      return 1
    fi
  fi
  local n_reg=$(compgen -G "$reg/*" | wc -l)
  mkdir -p "$BUILD/corpus/$t" "$BUILD/artifacts/$t"
  local rc=0
  # -timeout: one input taking > 10 s is a finding (a hang); -rss_limit_mb:
  # so is a reader that tries to allocate GBs for a 64 KiB input.
  local max_len=$MAX_LEN
  [[ $t == config ]] && max_len=${FUZZ_MAX_LEN:-8192}  # configs are small; long texts only slow it down
  "$bin" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t/" \
    "$BUILD/corpus/$t" $(seed_dirs "$t") >>"$log" 2>&1 || rc=$?
  local execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  local secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1)
  local corpus=$(ls "$BUILD/corpus/$t" | wc -l)
  local crashes=$(ls "$BUILD/artifacts/$t" | wc -l)
  if (( rc != 0 )); then
    echo "$t: FINDING after ${execs:-?} executions (exit $rc); input in $BUILD/artifacts/$t/, log $log"
    grep -E 'ERROR: |FINDING|runtime error|==[0-9]+==' "$log" | head -5 | sed 's/^/    /'
    return 1
  fi
  echo "$t: ${execs:-?} executions in ${secs:-$SECONDS_EACH} s, corpus $corpus inputs, $n_reg regression inputs replayed, 0 findings (${crashes} saved inputs)"
}

# Up to JOBS targets at a time; one summary line each, in target order.
status=0
pids=()
for t in "${TARGETS[@]}"; do
  ( run_target "$t" > "$BUILD/logs/$t.summary" ) &
  pids+=($!)
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n || true; done
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$BUILD/logs/${TARGETS[$i]}.summary"
done
exit $status
