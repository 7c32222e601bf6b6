#!/usr/bin/env bash
# What quantization-aware training buys an export, in one invocation: a
# model trained here (SHAPE: the tiny preset widened to K-quant rows, or the
# s15 or smol135 preset; BASE_STEPS on Genesis to Deuteronomy, or for the
# presets every book but Matthew) is trained on for QAT_STEPS more: (a)
# plain, (c) with train.qat = TYPE. Both are
# exported as TYPE, and (a) also (b) with an importance matrix of its
# training text (`ggtrain imatrix`, then `export --imatrix`). Each file is
# scored on held-out text (Matthew): perplexity, and KL divergence against
# (a)'s F32 weights (`eval --kl-divergence`). Gap = PPL(export) - PPL((a)
# F32). Also the seconds per step of both runs and QAT's own share (qat_s). With
# LORA_RANK > 0 both runs train a LoRA adapter of that rank on all seven
# matrices instead of the whole model, and are exported merged
# (`export --merge-lora`); (a)'s F32 is then its merged F32 file.
#
# Several types (q4_0,q4_k_m) share the base and the plain run; each has its
# own QAT run. QAT_EVERY > 1 makes new blocks every that many steps (train.qat_every).
#
#   bench/qat_gain.sh [TYPE[,TYPE...] (q4_0)] [BASE_STEPS (600)] [QAT_STEPS (200)] [THREADS (2)] [LORA_RANK (0)] [QAT_EVERY (1)]
#                     [SHAPE (tiny256 | s15 | smol135)]
set -euo pipefail
cd "$(dirname "$0")/.."
GG=build/src/ggtrain
IFS=, read -r -a TYPES <<<"${1:-q4_0}"
BASE_STEPS=${2:-600}
QAT_STEPS=${3:-200}
THREADS=${4:-2}
LORA_RANK=${5:-0}
QAT_EVERY=${6:-1}
SHAPE=${7:-tiny256}
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
verses() { bible -f "$1" </dev/null | sed 's/^[^ ]* //'; }
# The preset every run starts from (its batch, window and learning rates),
# and the training text. The larger presets train on the whole Bible but
# Matthew, as the main job trains s15 on all of it but Ruth: on Genesis to
# Deuteronomy alone s15 learns the text by heart (Matthew's perplexity over 1000).
case $SHAPE in
  tiny256) preset=tiny shape=(--set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 --set model.n_heads=4)
    described="the tiny preset at d_model 256, 8 layers"
    verses Gen1:1-Deut34:12 >"$tmp/train.txt" ;;
  s15 | smol135) preset=$SHAPE shape=() described="the $SHAPE preset"
    { verses Gen1:1-Mal4:6; verses Mark1:1-Rev22:21; } >"$tmp/train.txt" ;;
  *) echo "qat_gain: SHAPE is tiny256, s15 or smol135, not '$SHAPE'" >&2; exit 2 ;;
esac
verses Matt1:1-Matt28:20 >"$tmp/heldout.txt"
"$GG" train --preset "$preset" --run-dir "$tmp/base" --set data.corpus="$tmp/train.txt" --set train.steps="$BASE_STEPS" \
  "${shape[@]}" --set train.threads="$THREADS" --quiet | head -1
# A LoRA adapter learns at a higher rate than the whole model (lr 2e-3, not 3e-4).
lora=(--set train.lr_max=3e-4)
what=""
if [ "$LORA_RANK" -gt 0 ]; then
  lora=(--set train.lr_max=2e-3 --set train.lora.rank="$LORA_RANK" --set train.lora.alpha="$LORA_RANK"
    --set 'train.lora.targets=["attn_q","attn_k","attn_v","attn_output","ffn_gate","ffn_up","ffn_down"]')
  what=" of a rank-$LORA_RANK LoRA adapter (lr 2e-3)"
fi
more() { # RUN_DIR SETS...
  local dir=$1
  shift
  "$GG" train "${lora[@]}" --preset "$preset" --run-dir "$dir" --set init.from="$tmp/base/weights/latest" \
    --set data.corpus="$tmp/train.txt" --set train.steps="$QAT_STEPS" --set train.warmup_steps=10 \
    --set train.threads="$THREADS" --quiet "$@" | head -1
}
more "$tmp/plain"
for t in "${TYPES[@]}"; do more "$tmp/qat-$t" --set train.qat="$t" --set train.qat_every="$QAT_EVERY"; done
CTX=$("$GG" inspect "$tmp/base/weights/latest" | awk '$1 ~ /\.context_length$/ { print $3 }')
# export RUN OUT TYPE: the run's weights, or its adapter merged into the base
export_run() {
  if [ "$LORA_RANK" -gt 0 ]; then
    "$GG" export --merge-lora "$tmp/base/weights/latest" "$tmp/$1/weights/latest" "$2" --type "$3" >/dev/null
  else
    "$GG" export "$tmp/$1/weights/latest" "$2" --type "$3" >/dev/null
  fi
}
F32=$tmp/plain/weights/latest
if [ "$LORA_RANK" -gt 0 ]; then
  F32=$tmp/plain-f32.gguf
  export_run plain "$F32" f32
fi
ppl() { "$GG" eval -m "$1" --text "$tmp/heldout.txt" -c "$CTX" -t "$THREADS" 2>/dev/null | sed -n 's/^perplexity \([0-9.]*\).*/\1/p'; }
kld() {
  "$GG" eval -m "$1" --text "$tmp/heldout.txt" -c "$CTX" -t "$THREADS" --kl-divergence "$F32" 2>/dev/null |
    sed -n 's/^Mean    KLD: *\([0-9.]*\).*/\1/p'
}
# (b): (a)'s F32 weights quantized with the importance matrix of its training
# text (its first 400 windows).
"$GG" imatrix -m "$F32" -f "$tmp/train.txt" -c "$CTX" --chunks 400 -t "$THREADS" -o "$tmp/imatrix.gguf" >/dev/null 2>&1
for t in "${TYPES[@]}"; do
  export_run plain "$tmp/plain-$t.gguf" "$t"
  "$GG" export "$F32" "$tmp/plain-imatrix-$t.gguf" --type "$t" --imatrix "$tmp/imatrix.gguf" >/dev/null
  export_run "qat-$t" "$tmp/qat-$t.gguf" "$t"
done
base_ppl=$(ppl "$F32")
echo "model: $described; $BASE_STEPS steps, then $QAT_STEPS more$what; QAT every $QAT_EVERY steps; context $CTX," \
  "$THREADS threads"
echo "| file | PPL | gap to (a) F32 | mean KLD vs (a) F32 |"
echo "|---|---|---|---|"
echo "| (a) plain, F32 | $base_ppl | - | - |"
for f in "${TYPES[@]/#/plain-}" "${TYPES[@]/#/plain-imatrix-}" "${TYPES[@]/#/qat-}"; do
  p=$(ppl "$tmp/$f.gguf")
  printf '| %s | %s | %.4f | %s |\n' "$f" "$p" "$(awk -v a="$p" -v b="$base_ppl" 'BEGIN { print a - b }')" \
    "$(kld "$tmp/$f.gguf")"
done
# seconds per step (the mean of the step records' elapsed_s differences is
# noisy; the records' own per-step fields are used where they exist)
for run in plain "${TYPES[@]/#/qat-}"; do
  awk -v run="$run" '/"loss"/ { n++; if (match($0, /"qat_s":[0-9.e-]+/)) q += substr($0, RSTART + 8, RLENGTH - 8) }
    END { printf "%s: %d steps", run, n; if (q > 0) printf ", qat_s %.3f s per step", q / n; print "" }' \
    "$tmp/$run/metrics.jsonl"
  grep -o '"elapsed_s":[0-9.]*' "$tmp/$run/metrics.jsonl" | tail -1 | sed "s/\"elapsed_s\":/  elapsed s: /"
done
