#!/usr/bin/env bash
# The README's quick start, run as written: the commands between its
# quickstart markers, in a fresh folder, with `ggtrain` the binary under
# test. Each must exit 0 and leave what the README says it leaves.
#
#   tests/e2e/quickstart_check.sh BIN README.md
set -euo pipefail
bin=$(realpath "$1")
readme=$(realpath "$2")
repo=$(dirname "$readme")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

mapfile -t commands < <(sed -n '/<!-- quickstart:begin -->/,/<!-- quickstart:end -->/p' "$readme" |
                        grep -E '^(ggtrain|bash scripts/)' | sed 's/[[:space:]]*#.*$//')
(( ${#commands[@]} >= 6 )) || { echo "quickstart_check: found ${#commands[@]} commands in $readme"; exit 1; }
for c in "${commands[@]}"; do
  run=${c/#ggtrain /\"$bin\" }
  run=${run/#bash scripts\//bash \"$repo\"/scripts/}
  echo "+ $c"
  # chat reads its question from standard input, as a user types it.
  if ! echo 'What follows "This License applies to"?' | eval "$run" > out.txt 2>&1; then
    cat out.txt; echo "quickstart_check: failed: $c"; exit 1
  fi
  tail -n 4 out.txt
  case "$c" in
    *" train "*) grep -q '^trained steps 0\.\.' out.txt || { echo "quickstart_check: no training summary"; exit 1; } ;;
    *" generate "*) [[ $(head -c 200 out.txt | wc -c) -gt 20 ]] || { echo "quickstart_check: nothing generated"; exit 1; } ;;
    *" eval "*) grep -q '^perplexity [0-9]' out.txt || { echo "quickstart_check: no perplexity"; exit 1; } ;;
    *" chat "*) grep -v '^chat:' out.txt | grep -q '[^[:space:]]' || { echo "quickstart_check: no reply"; exit 1; } ;;
    *" export "*) grep -q '^wrote .*Modelfile' out.txt || { echo "quickstart_check: no Modelfile"; exit 1; } ;;
  esac
done
for f in runs/mine/weights/latest runs/mine/loss.svg runs/chat/weights/latest chat-q8_0.gguf chat-q8_0.Modelfile; do
  [[ -e $f ]] || { echo "quickstart_check: $f is missing"; exit 1; }
done
echo "quickstart_check: ${#commands[@]} commands of the README's quick start passed"
