#!/usr/bin/env bash
# Negative control of tests/support/compare.h: with GGTRAIN_TEST_POISON_COMPARE=1
# the helper turns one element of every compared array NaN, so each test below
# must FAIL, and fail on the NaN ("non-finite value" in its output). A test
# that passes under poison compares numbers some way that cannot see NaN.
#
# usage: nan_poison_check.sh BUILD_DIR/tests
#
# The tests are every test that compared numbers through the helper in this
# ctest run: each records its name in BUILD_DIR/tests/compare_users/
# <program>.txt when it calls compare() (CTest runs this check after them).
# Not poisoned: Compare.*, the helper's own tests, which poisoning is meant
# to break; negative controls that pass when their comparison fails (below);
# records of tests the program no longer has.
set -u

if [[ $# -ne 1 || ! -d $1 ]]; then
  echo "usage: $0 BUILD_DIR/tests" >&2
  exit 2
fi
bin_dir=$1
records=$bin_dir/compare_users
# Today 94 tests are poisoned here; far fewer recorded means
# the recording broke, and this check would pass while poisoning nothing.
min_recorded=80

# A comparison failing is what these tests check, and a NaN fails it too.
negative_controls=" MpiTest.TensorComparisonTellsANearbyRunApart "

# "program test" for every recorded test the program still has.
tests=()
for f in "$records"/*.txt; do
  [[ -f $f ]] || continue
  bin=$(basename "$f" .txt)
  [[ -x $bin_dir/$bin ]] || continue
  listed=$("$bin_dir/$bin" --gtest_list_tests | awk '/^[^ ]/ { suite = $1; next } { print suite $1 }')
  while read -r name; do
    [[ $name == Compare.* || $negative_controls == *" $name "* ]] && continue
    grep -qxF "$name" <<<"$listed" && tests+=("$bin $name")
  done < <(sort -u "$f")
done
if (( ${#tests[@]} < min_recorded )); then
  echo "nan_poison_check: only ${#tests[@]} tests recorded in $records (expected at least $min_recorded): is the recording in support/compare.h working?" >&2
  exit 1
fi
echo "nan_poison_check: ${#tests[@]} tests compared through support/compare.h; each must fail on the injected NaN"

# How test $2 ended in gtest output file $1: nan (failed, and its output
# names a non-finite value), other (failed on something else), passed, missing.
# A parameterised test's FAILED line carries ", where GetParam() = ...".
outcome_of() {
  awk -v t="$2" '
    $0 == "[ RUN      ] " t { inside = 1; ran = 1; next }
    inside && /non-finite value/ { nan = 1 }
    inside && (index($0, "[  FAILED  ] " t " (") == 1 || index($0, "[  FAILED  ] " t ", where") == 1) {
      failed = 1; inside = 0
    }
    inside && index($0, "[       OK ] " t " (") == 1 { inside = 0 }
    END { print !ran ? "missing" : !failed ? "passed" : nan ? "nan" : "other" }
  ' "$1"
}

declare -A filter
for entry in "${tests[@]}"; do
  read -r bin name <<<"$entry"
  filter[$bin]+="${filter[$bin]:+:}$name"
done

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
status=0
for bin in "${!filter[@]}"; do
  if [[ ! -x $bin_dir/$bin ]]; then
    echo "MISSING BINARY $bin_dir/$bin"
    status=1
    continue
  fi
  GGTRAIN_TEST_POISON_COMPARE=1 "$bin_dir/$bin" --gtest_filter="${filter[$bin]}" >"$log_dir/$bin.log" 2>&1
done

for entry in "${tests[@]}"; do
  read -r bin name <<<"$entry"
  [[ -f $log_dir/$bin.log ]] || continue
  case $(outcome_of "$log_dir/$bin.log" "$name") in
    nan) echo "ok: $name fails on the injected NaN" ;;
    other) echo "NOT ON NaN: $name failed, but its output names no non-finite value"; status=1 ;;
    passed) echo "BLIND TO NaN: $name passed with a NaN injected into its comparison"; status=1 ;;
    missing) echo "NOT RUN: $name is not in $bin"; status=1 ;;
  esac
done
if [[ $status -ne 0 ]]; then
  echo "nan_poison_check: some tests did not fail on the injected NaN; gtest summaries:"
  for f in "$log_dir"/*.log; do echo "=== $f"; grep -E '^\[  (FAILED|PASSED)|^\[       OK' "$f"; done
fi
exit $status
