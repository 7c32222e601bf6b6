#!/usr/bin/env bash
# What an importance matrix buys a quantized export, in one invocation: a
# model (MODEL, or one trained here on Genesis to Deuteronomy), its
# importance matrix from its training text (`ggtrain imatrix`, Genesis),
# then for each TYPE (default "q4_0 q4_k_m") the export without and with the
# matrix, each scored on held-out text (the Gospel of Matthew) by perplexity
# and by KL divergence against the F32 model (`eval --kl-divergence`, as
# llama-perplexity reports it). Prints one row per file.
#
#   bench/imatrix_gain.sh [MODEL.gguf] [THREADS (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
GG=build/src/ggtrain
THREADS=${2:-2}
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bible -f Gen1:1-Deut34:12 </dev/null | sed 's/^[^ ]* //' >"$tmp/train.txt"
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >"$tmp/calib.txt"
bible -f Matt1:1-Matt28:20 </dev/null | sed 's/^[^ ]* //' >"$tmp/heldout.txt"
MODEL=${1:-}
if [[ -z $MODEL ]]; then
  # the tiny preset widened to K-quant rows (256) and 8 layers, 1000 steps
  "$GG" train --preset tiny --run-dir "$tmp/run" --set data.corpus="$tmp/train.txt" --set train.steps=1000 \
    --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 --set model.n_heads=4 \
    --set train.threads="$THREADS" --quiet | head -1
  MODEL=$tmp/run/weights/latest
fi
CTX=$("$GG" inspect "$MODEL" | awk '$1 ~ /\.context_length$/ { print $3 }')
"$GG" imatrix -m "$MODEL" -f "$tmp/calib.txt" -c "$CTX" -t "$THREADS" -o "$tmp/imatrix.gguf" | tail -1
score() { # FILE LABEL
  local ppl kld top
  ppl=$("$GG" eval -m "$1" --text "$tmp/heldout.txt" -c "$CTX" -t "$THREADS" 2>/dev/null |
    sed -n 's/^perplexity \([0-9.]*\).*/\1/p')
  if [[ $1 == "$MODEL" ]]; then
    printf '| %-18s | %8s | %9s | %-9s | %-8s |\n' "$2" "$ppl" "-" "-" "-"
    return
  fi
  out=$("$GG" eval -m "$1" --text "$tmp/heldout.txt" -c "$CTX" -t "$THREADS" --kl-divergence "$MODEL" 2>/dev/null)
  kld=$(sed -n 's/^Mean    KLD: *\([0-9.]*\).*/\1/p' <<<"$out")
  p99=$(sed -n 's/^99.0%   KLD: *\([0-9.]*\).*/\1/p' <<<"$out")
  top=$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' <<<"$out")
  printf '| %-18s | %8s | %9s | %-9s | %-8s |\n' "$2" "$ppl" "$kld" "$p99" "$top%"
}
echo "model $MODEL, context $CTX, $THREADS threads; imatrix from Genesis, scored on Matthew"
echo "| file               | PPL      | mean KLD  | 99% KLD   | same top |"
echo "|---|---|---|---|---|"
score "$MODEL" "F32"
for t in ${TYPES:-q4_0 q4_k_m}; do
  "$GG" export "$MODEL" "$tmp/$t.gguf" --type "$t" >/dev/null
  "$GG" export "$MODEL" "$tmp/$t-imatrix.gguf" --type "$t" --imatrix "$tmp/imatrix.gguf" >/dev/null
  score "$tmp/$t.gguf" "$t"
  score "$tmp/$t-imatrix.gguf" "$t + imatrix"
done
