#!/usr/bin/env bash
# A same-vocabulary draft model for llama.cpp's speculative decoding, after
# scripts/distill_demo.sh: llama-speculative-simple, built from the source
# node-llama-cpp ships, decodes with the demo's teacher as the target and
# each s15 student (distilled, distilled with the hard label mixed in, and
# trained on the text alone) as the draft,
# greedy, on the same prompts; printed per draft: tokens drafted, accepted,
# the acceptance rate and the decode speed; and the target alone with
# llama-bench (tg N), in the same invocation. Build folders:
# build/llama.cpp-src and build/llama.cpp-spec; nothing of it is part of
# ggtrain.
#
#   bench/speculative_draft.sh [THREADS (2)] [N (200)] [DRAFT_MAX (8)]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
N=${2:-200}
DRAFT_MAX=${3:-8}
R=runs/kjv-distill
TARGET=$(ls -v $R-teacher/weights/step_*.gguf | tail -n1)
SFT=$(ls -v $R-sft/weights/step_*.gguf | tail -n1)
KD=$(ls -v $R-kd/weights/step_*.gguf | tail -n1)
MIX=$(ls -v $R-kd-mix/weights/step_*.gguf | tail -n1)
BUNDLE=tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
[[ -d build/llama.cpp-src ]] || git clone -q "$BUNDLE" build/llama.cpp-src 2>/dev/null
B=build/llama.cpp-spec
if [[ ! -x $B/bin/llama-speculative-simple || ! -x $B/bin/llama-bench ]]; then
  cmake -S build/llama.cpp-src -B $B -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build $B --target llama-speculative-simple llama-bench -j "$(nproc)" >/dev/null
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; target $TARGET"
echo "| draft | drafted | accepted | acceptance | decode t/s |"
echo "|---|---|---|---|---|"
for draft in "$KD" "$MIX" "$SFT"; do
  drafted=0 accepted=0 secs=0 toks=0
  for prompt in "In the beginning" "And the LORD said unto Moses," "Blessed are the"; do
    out=$($B/bin/llama-speculative-simple -m "$TARGET" -md "$draft" -p "$prompt" -n "$N" -t "$THREADS" \
      -td "$THREADS" --temp 0 --spec-type draft-simple --spec-draft-n-max "$DRAFT_MAX" --spec-draft-n-min 0 -c 256 2>&1)
    drafted=$((drafted + $(sed -n 's/.*n_drafted *= *//p' <<<"$out")))
    accepted=$((accepted + $(sed -n 's/.*n_accept *= *//p' <<<"$out")))
    read -r t s < <(sed -n 's/.*decoded *\([0-9]*\) tokens in *\([0-9.]*\) seconds.*/\1 \2/p' <<<"$out")
    toks=$((toks + t))
    secs=$(awk -v a="$secs" -v b="$s" 'BEGIN { print a + b }')
  done
  awk -v d="$draft" -v n="$drafted" -v a="$accepted" -v t="$toks" -v s="$secs" \
    'BEGIN { printf "| %s | %d | %d | %.1f%% | %.1f |\n", d, n, a, 100 * a / n, t / s }'
done
echo
echo "the target alone (llama-bench tg $N, $THREADS threads):"
$B/bin/llama-bench -m "$TARGET" -p 0 -n "$N" -t "$THREADS" -o md 2>/dev/null | tail -n +1
