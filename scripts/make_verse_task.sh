#!/usr/bin/env bash
# Writes a multiple-choice task from the King James Bible (package
# bible-kjv) in llama-perplexity's HellaSwag form, for `ggtrain eval --task`
# and llama-perplexity --hellaswag alike: "which of four verses follows this
# one". Each task's context is a verse of RANGE, the right ending the verse
# after it, the three others verses drawn from elsewhere in RANGE; the right
# one's place is drawn too. Deterministic: the draws come from a
# Park-Miller generator (seed 1), exact in any awk.
#
#   bash scripts/make_verse_task.sh RANGE N OUT      e.g. Exod1:1-Exod40:38 200 exodus.hellaswag
#
# Keep RANGE out of the training text to measure on held-out verses.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 RANGE N OUT  (e.g. Exod1:1-Exod40:38 200 exodus.hellaswag)" >&2; exit 2; }
range=$1 n=$2 out=$3
command -v bible >/dev/null || { echo "$0: 'bible' is missing; install bible-kjv" >&2; exit 1; }
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a positive number of tasks, not '$n'" >&2; exit 2; }
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
bible -f "$range" </dev/null | sed 's/^[^ ]* //' | awk -v n="$n" -v range="$range" '
  function draw(k) { seed = (seed * 16807) % 2147483647; return int(seed / 2147483647 * k) }
  { verse[NR] = $0 }
  END {
    if (NR < 8) { printf "make_verse_task: %s has %d verses; at least 8 are needed\n", range, NR > "/dev/stderr"; exit 1 }
    if (n > NR - 1) n = NR - 1
    seed = 1
    step = (NR - 1) / n
    for (t = 0; t < n; ++t) {
      i = 1 + int(t * step)
      gold = draw(4)
      print verse[i]
      print gold
      for (e = 0; e < 4; ++e) {
        if (e == gold) { print verse[i + 1]; continue }
        do { j = 1 + draw(NR) } while (j == i || j == i + 1)
        print verse[j]
      }
    }
  }' > "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out ($(( $(wc -l < "$out") / 6 )) tasks from $range)"
