#!/usr/bin/env bash
# Exact resume through the CLI, at 1 and at 2 threads, for the program
# GGTRAIN_CPU selects (CTest runs it for each CPU level): a tiny run stopped
# after step 12 and resumed must start its second process at step 12 (from
# its own output) and end with the same weights as the run at the same
# thread count that was never stopped: the logits both final checkpoints
# give are the same bytes.
#
#   tests/e2e/resume_check.sh PATH/TO/ggtrain
set -euo pipefail
source "$(cd "$(dirname "$0")/.." && pwd)/support/fox_corpus.sh"
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "resume_check: $*"; exit 1; }

fox_corpus corpus.txt
ids=1,5,9,13,17,21,25,29,33,37
for threads in 1 2; do
  args=(--preset tiny --set data.corpus=corpus.txt --set train.steps=24 --set "train.threads=$threads"
        --set checkpoint.every=6)
  whole=whole-$threads cut=cut-$threads
  "$bin" train "${args[@]}" --run-dir "$whole" --quiet > whole.out 2>&1 || { cat whole.out; fail "the whole run failed"; }
  "$bin" train "${args[@]}" --run-dir "$cut" --stop-at 12 > cut.out 2>&1 || { cat cut.out; fail "the first part failed"; }
  grep -q "stopped after step 12/24 (--stop-at)" cut.out || { cat cut.out; fail "the first part did not stop at step 12"; }
  "$bin" train --resume --run-dir "$cut" > resumed.out 2>&1 || { cat resumed.out; fail "the resumed part failed"; }
  grep -q "^resuming run [0-9a-f]* at step 12$" resumed.out ||
    { cat resumed.out; fail "the resumed process did not start at step 12"; }
  grep -q "^trained steps 12\.\.24:" resumed.out || { cat resumed.out; fail "the resumed process did not train steps 12..24"; }
  for run in "$whole" "$cut"; do
    "$bin" eval -m "$run/weights/step_24.gguf" --tokens "$ids" --dump-logits "$run.f32" > /dev/null
  done
  cmp -s "$whole.f32" "$cut.f32" || fail "at $threads thread(s), the resumed run's step-24 logits differ from the uninterrupted run's"
done
echo "resume_check: $("$bin" --version): resumed at step 12 at 1 and 2 threads, step-24 logits identical"
