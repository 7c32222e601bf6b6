#!/usr/bin/env bash
# Writes a two-choice task from the King James Bible (package bible-kjv) in
# llama-perplexity's Winogrande CSV form, for `ggtrain eval --task` and
# llama-perplexity --winogrande alike: "which word fills the blank". Each
# task is a verse of RANGE with one of its words (letters only, 4 or more)
# blanked, the verse's word and a word from another verse of RANGE as the two
# choices, in an order drawn too. Deterministic: the draws come from a
# Park-Miller generator (seed 1), exact in any awk.
#
#   bash scripts/make_word_task.sh RANGE N OUT      e.g. Ruth1:1-Ruth4:22 60 ruth.csv
#
# Keep RANGE out of the training text to measure on held-out verses.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 RANGE N OUT  (e.g. Ruth1:1-Ruth4:22 60 ruth.csv)" >&2; exit 2; }
range=$1 n=$2 out=$3
command -v bible >/dev/null || { echo "$0: 'bible' is missing; install bible-kjv" >&2; exit 1; }
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a positive number of tasks, not '$n'" >&2; exit 2; }
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
bible -f "$range" </dev/null | sed 's/^[^ ]* //' | awk -v n="$n" -v range="$range" '
  function draw(k) { seed = (seed * 16807) % 2147483647; return int(seed / 2147483647 * k) }
  # the words of verse v that may be blanked, into w[1..]; returns their count
  function words(v, w,   all, k, c) {
    c = 0
    for (k = 1; k <= split(verse[v], all, " "); ++k) if (all[k] ~ /^[A-Za-z][A-Za-z][A-Za-z][A-Za-z]+$/) w[++c] = all[k]
    return c
  }
  { verse[NR] = $0 }
  END {
    if (NR < 4) { printf "make_word_task: %s has %d verses; at least 4 are needed\n", range, NR > "/dev/stderr"; exit 1 }
    seed = 1
    t = 0
    for (i = 1; i <= NR && t < n; i += (NR > n ? NR / n : 1)) {
      v = int(i)
      split("", w); c = words(v, w)
      if (c == 0) continue
      right = w[1 + draw(c)]
      other = ""
      for (tries = 0; tries < 20 && other == ""; ++tries) {
        j = 1 + draw(NR)
        if (j == v) continue
        split("", u); d = words(j, u)
        if (d > 0) { x = u[1 + draw(d)]; if (x != right) other = x }
      }
      if (other == "") continue
      at = index(" " verse[v] " ", " " right " ")  # the word itself, not inside another
      if (at == 0) continue
      sentence = substr(verse[v], 1, at - 1) "_" substr(verse[v], at + length(right))
      if (draw(2) == 0) printf "%d,\"%s\",%s,%s,1\n", t, sentence, right, other
      else printf "%d,\"%s\",%s,%s,2\n", t, sentence, other, right
      ++t
    }
  }' > "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out ($(wc -l < "$out") tasks from $range)"
