#!/usr/bin/env bash
# The King James Bible from Debian's bible-kjv package, one verse a line
# without its reference: data/kjv.txt holds every book but Ruth, which is
# held out (the main job's tasks, the distillation demo's perplexity) in
# data/ruth.txt. Each is written once, atomically, and kept when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
verses() { for range in "$@"; do bible -f "$range" </dev/null; done | sed 's/^[^ ]* //'; }
if [[ ! -s data/kjv.txt ]]; then
  verses Gen1:1-Judg21:25 1Sam1:1-Rev22:21 > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [[ ! -s data/ruth.txt ]]; then
  verses Ruth1:1-Ruth4:22 > data/ruth.txt.tmp
  mv data/ruth.txt.tmp data/ruth.txt
fi
