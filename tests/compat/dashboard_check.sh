#!/usr/bin/env bash
# The dashboard in a real browser (Debian's chromium through playwright-core,
# tests/node/dashboard_check.mjs), against the run folders' own files:
#   1. a finished run's report.html (written by `ggtrain train` itself):
#      every chart's record counts and last steps equal metrics.jsonl's, every
#      evaluation drawn, samples and checkpoints listed, a non-blank chart,
#      no console error, no request;
#   2. the same run with a torn last metrics line (a crash mid-write) still
#      renders, with its complete records; control: the check fails when
#      metrics.jsonl holds one record more than the page;
#   3. `ggtrain serve A B` while B trains: both overlaid, a validation
#      record B writes shows within 5 s without reloading, B reads as failed
#      within 5 s of a SIGKILL, every request to 127.0.0.1;
#   4. a 100k-step run: lines downsampled to a few points per pixel column,
#      ending at the last step, every validation point drawn.
#
#   tests/compat/dashboard_check.sh PATH/TO/ggtrain
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/ggtrain" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CHECK="$HERE/node/dashboard_check.mjs"
fail() { echo "dashboard_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $CHROMIUM ]] || fail "$CHROMIUM is missing; install Debian's chromium (scripts/setup.sh does with GGTRAIN_WITH_TESTS=1)"
[[ -d "$HERE/node/node_modules/playwright-core" ]] || fail "run npm ci in tests/node (see scripts/test.sh)"
export CHROMIUM

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"
bible -f Gen1:1-Exo40:38 </dev/null | sed 's/^[^ ]* //' >corpus.txt

# 1. A finished run and the report it wrote.
"$GGTRAIN" train --preset tiny --run-dir A --set data.corpus=corpus.txt --set train.steps=80 \
  --set train.eval_every=10 --set train.sample_every=20 --set checkpoint.every=40 --set train.threads=1 --quiet >A.log
[[ -f A/report.html ]] || fail "the run wrote no report.html"
node "$CHECK" report A/report.html A

# 2. A torn last line; and the control.
cp -r A C
printf '{"step": 81, "loss": 1.2' >>C/metrics.jsonl
"$GGTRAIN" report C -o c.html >/dev/null
node "$CHECK" report c.html C
cp -r A D
grep '"loss"' A/metrics.jsonl | tail -n 1 | sed 's/"step":80/"step":81/' >>D/metrics.jsonl
if node "$CHECK" report A/report.html D 2>control.txt; then fail "control: a page one record short passed"; fi
grep -q "shows 80 records, metrics.jsonl has 81\|last step is 80, metrics.jsonl's 81" control.txt ||
  fail "control failed otherwise than expected: $(cat control.txt)"
echo "control: a page one record short of metrics.jsonl fails ($(cut -c1-90 control.txt))"

# 3. Live: B trains (long) while the page watches A and B.
"$GGTRAIN" train --preset tiny --run-dir B --set data.corpus=corpus.txt --set train.steps=10000000 \
  --set train.eval_every=40 --set checkpoint.every=1000000 --set train.threads=1 --quiet >B.log 2>&1 &
pid_b=$!
disown "$pid_b"
pids+=("$pid_b")
for _ in $(seq 100); do [[ -s B/metrics.jsonl ]] && break; sleep 0.2; done
[[ -s B/metrics.jsonl ]] || fail "run B logged nothing: $(cat B.log)"
"$GGTRAIN" serve A B --port 0 >serve.log 2>&1 &
pids+=("$!")
disown "$!"
for _ in $(seq 50); do grep -q "http://" serve.log && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/' serve.log) || fail "ggtrain serve printed no address: $(cat serve.log)"
node "$CHECK" live "$url" A B "$pid_b"

# 4. 100k steps and 1000 evaluations, written as a run writes them.
mkdir -p L/weights
cp A/config.toml L/
node -e '
  const lines = [];
  for (let s = 1; s <= 100000; s++) {
    lines.push(JSON.stringify({ elapsed_s: s * 0.01, grad_norm: 1 + Math.sin(s / 500), loss: 4 / Math.sqrt(s) + 0.1 * Math.sin(s),
      lr: 0.001, step: s, tokens_per_s: 5000 + (s % 97) }));
    if (s % 100 === 0) lines.push(JSON.stringify({ step: s, val_bpb: 3 / Math.log(s + 2), val_loss: 4 / Math.sqrt(s) }));
  }
  require("fs").writeFileSync("L/metrics.jsonl", lines.join("\n") + "\n");'
"$GGTRAIN" report L -o large.html >/dev/null
node "$CHECK" large large.html L
echo "dashboard_check: OK"
