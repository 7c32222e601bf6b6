#!/usr/bin/env bash
# What each CPU level of a portable build gives on this machine, in one run
# (GGTRAIN_CPU forces the level): s15 training tokens/s (STEPS steps on the
# KJV, fresh run folder each time; the first 5 steps are warm-up and not
# counted), and prompt / decode tokens/s of `generate` on an s15 model as F32,
# Q8_0 and Q4_K_M (pp P, tg N after it, greedy). Users on an AVX2 machine
# read the v3 row. Needs scripts/run.sh's model (runs/kjv) and data/kjv.txt.
#
#   bench/cpu_levels.sh [THREADS (2)] [STEPS (40)] [P (128)] [N (128)]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
STEPS=${2:-40}
P=${3:-128}
N=${4:-128}
GG=$PWD/build/src/ggtrain
MODEL=runs/kjv/weights/latest
[[ -x build/src/ggtrain-v2 ]] || { echo "not a portable build (build/src/ggtrain-v2 is missing)" >&2; exit 1; }
[[ -f $MODEL && -f data/kjv.txt ]] || { echo "run scripts/run.sh first (runs/kjv, data/kjv.txt)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads"
for t in q8_0 q4_k_m; do "$GG" export "$MODEL" "$tmp/$t.gguf" --type "$t" >/dev/null; done
prompt=$(seq -s, 1 "$P" | sed 's/^1,/1,/')
printf '| level | s15 training tokens/s | F32 pp%s / tg%s | Q8_0 pp%s / tg%s | Q4_K_M pp%s / tg%s |\n|---|---|---|---|---|---|\n' \
  "$P" "$N" "$P" "$N" "$P" "$N"
for level in v2 v3 v4; do
  if ! GGTRAIN_CPU=$level "$GG" --version >/dev/null 2>&1; then echo "| $level | (this CPU does not run it) | | | |"; continue; fi
  rm -rf "$tmp/run"
  GGTRAIN_CPU=$level "$GG" train --preset s15 --run-dir "$tmp/run" --set data.corpus=data/kjv.txt \
    --set data.tokenizer=runs/kjv/tokenizer.model --set train.steps="$STEPS" --set train.threads="$THREADS" \
    --set checkpoint.every=0 --set train.eval_every=0 --set train.sample_every=0 --quiet >/dev/null
  train=$(awk -F'"tokens_per_s":' 'NR > 5 && NF > 1 { split($2, a, /[,}]/); s += a[1]; n++ } END { printf "%.0f", s / n }' "$tmp/run/metrics.jsonl")
  row="| $level | $train"
  for m in "$MODEL" "$tmp/q8_0.gguf" "$tmp/q4_k_m.gguf"; do
    line=$(GGTRAIN_CPU=$level "$GG" generate -m "$m" --tokens "$prompt" -n "$N" --temp 0 --ignore-eos -t "$THREADS" 2>&1 >/dev/null | tail -1)
    pp=$(sed -n 's/^prompt: .*(\([0-9.]*\) tokens\/s); generated.*/\1/p' <<<"$line")
    tg=$(sed -n 's/.*generated .*(\([0-9.]*\) tokens\/s)$/\1/p' <<<"$line")
    row+=" | $pp / $tg"
  done
  echo "$row |"
done
