#!/usr/bin/env bash
# No test measures an error with a NaN-blind maximum. `worst =
# std::max(worst, |a - b|)` keeps `worst` when |a - b| is NaN, so a kernel
# that returned NaN passed such loops; tests compare through
# tests/support/compare.h instead (it fails on any non-finite element, and
# nan_poison_check proves each of its users does). This flags a std::max or
# std::max_element whose argument is the absolute value of a difference.
#
# usage: compare_lint.sh TESTS_SOURCE_DIR
set -euo pipefail
dir=${1:?usage: compare_lint.sh TESTS_SOURCE_DIR}
pattern='std::max(_element)?\(\{?[^;]*\b(std::)?f?abs\([^;()]*(\([^;()]*\)[^;()]*)*[^-]-[^->=]'
# The pattern's own controls: lines it must flag, and lines it must not.
must_flag=('worst = std::max(worst, double(std::fabs(y[i] - x[i])));'
           'w = std::max({w, std::abs(r.d_chosen - dc), std::abs(r.d_rejected - dr)});'
           'e = std::max(e, std::abs(r.loss - want) / std::max(1.0, std::abs(want)));')
must_pass=('amax = std::max(amax, std::fabs(x[b * 32 + j]));'
           'const double h = 1e-5 * std::max(1.0, std::abs(at));'
           'worst = max_keeping_nan(worst, c.max_abs_diff);')
for line in "${must_flag[@]}"; do
  grep -qE "$pattern" <<<"$line" || { echo "compare_lint: the pattern misses: $line" >&2; exit 1; }
done
for line in "${must_pass[@]}"; do
  if grep -qE "$pattern" <<<"$line"; then echo "compare_lint: the pattern wrongly flags: $line" >&2; exit 1; fi
done

hits=$(find "$dir" -path "$dir/node" -prune -o \( -name '*.cpp' -o -name '*.h' \) -print |
  grep -v '/support/compare\.h$' | sort | xargs grep -nE "$pattern" || true)
if [[ -n $hits ]]; then
  echo "$hits"
  echo "compare_lint: the lines above take a maximum of |a - b|, which drops NaN; compare through support/compare.h (compare(), within_abs, max_keeping_nan)" >&2
  exit 1
fi
echo "compare_lint: no NaN-blind error maximum in $dir"
