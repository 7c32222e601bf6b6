#!/usr/bin/env bash
# The committed fixtures are the bytes their README describes: every file in
# tests/fixtures/ has its SHA-256 in SHA256SUMS and matches it, and every
# listed file is there. A fixture edited, truncated or replaced by a git
# filter (LFS pointer, line-ending conversion) fails here, naming the file,
# instead of as a numeric mismatch deep in a suite.
#
# usage: fixtures_check.sh FIXTURES_DIR
set -euo pipefail
dir=${1:?usage: fixtures_check.sh FIXTURES_DIR}
# check DIR: 0 when DIR's files and SHA256SUMS agree; says what differs.
check() (
  local dir=$1 status=0 listed present unlisted missing out
  cd "$dir"
  [[ -s SHA256SUMS ]] || { echo "fixtures_check: $dir/SHA256SUMS is missing or empty" >&2; exit 1; }
  listed=$(awk '{ sub(/^\*/, "", $2); print $2 }' SHA256SUMS | sort)
  present=$(find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name README.md -printf '%f\n' | sort)
  unlisted=$(comm -13 <(echo "$listed") <(echo "$present"))
  missing=$(comm -23 <(echo "$listed") <(echo "$present"))
  if [[ -n $unlisted ]]; then
    echo "fixtures_check: in $dir but not in SHA256SUMS (add it: sha256sum FILE >> SHA256SUMS): $unlisted" >&2
    status=1
  fi
  if [[ -n $missing ]]; then
    echo "fixtures_check: listed in $dir/SHA256SUMS but absent: $missing" >&2
    status=1
  fi
  if ! out=$(sha256sum --quiet --strict -c SHA256SUMS 2>&1); then
    echo "$out" | sed "s|^|fixtures_check: |" >&2
    echo "fixtures_check: a fixture in $dir differs from its SHA-256 (SHA256SUMS)" >&2
    status=1
  fi
  exit $status
)

check "$dir" || exit 1

# Negative controls on a copy: one flipped byte, one unlisted file and one
# deleted file must each fail the check.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
first=$(awk 'NR == 1 { sub(/^\*/, "", $2); print $2 }' "$dir/SHA256SUMS")
for mutation in flip extra delete; do
  rm -rf "$tmp/f" && cp -r "$dir" "$tmp/f" && chmod -R u+w "$tmp/f"
  case $mutation in
    flip)
      byte=$(od -An -tu1 -j100 -N1 "$tmp/f/$first")
      printf "\\x$(printf %02x $(( byte ^ 255 )))" | dd of="$tmp/f/$first" bs=1 seek=100 conv=notrunc status=none ;;
    extra) echo x >"$tmp/f/unlisted.bin" ;;
    delete) rm "$tmp/f/$first" ;;
  esac
  if check "$tmp/f" 2>/dev/null; then
    echo "fixtures_check: the check passed a copy with one $mutation ($first): it cannot fail" >&2
    exit 1
  fi
done
echo "fixtures_check: $(grep -c . "$dir/SHA256SUMS") fixtures match SHA256SUMS (and a flipped byte, an unlisted and a missing file each fail)"
