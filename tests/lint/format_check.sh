#!/usr/bin/env bash
# Every C++ file git tracks is formatted as .clang-format says, by
# clang-format 14 (Debian 12's; another version formats some constructs
# otherwise, so the check names the one it needs). Fix: bash scripts/format.sh
#
# usage: format_check.sh SOURCE_DIR
set -euo pipefail
cd "${1:?usage: format_check.sh SOURCE_DIR}"
CF=$(command -v clang-format-14) || { echo "format_check: clang-format-14 is not installed (scripts/setup.sh installs it with the tests)" >&2; exit 1; }
# The check's own control: a badly formatted line must be flagged.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'int  f( int x ){return x ;}\n' >"$tmp/control.cpp"
if "$CF" --style=file:.clang-format --dry-run --Werror "$tmp/control.cpp" 2>/dev/null; then
  echo "format_check: clang-format accepted a badly formatted control file" >&2
  exit 1
fi
mapfile -d '' files < <(git ls-files -z '*.cpp' '*.h')
(( ${#files[@]} > 300 )) || { echo "format_check: only ${#files[@]} C++ files found under git" >&2; exit 1; }
if ! out=$("$CF" --dry-run --Werror "${files[@]}" 2>&1); then
  grep -oE '^[^:]+\.(cpp|h):[0-9]+' <<<"$out" | sort -u | head -20
  echo "format_check: the files above are not formatted as .clang-format says; run: bash scripts/format.sh" >&2
  exit 1
fi
echo "format_check: ${#files[@]} files formatted"
