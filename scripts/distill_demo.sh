#!/usr/bin/env bash
# Distillation on the King James Bible (the main job's corpus, every book but
# Ruth): a teacher bigger than the default model is trained, exported as
# Q8_0, and an s15 student is trained three times for the same steps and tokens
# from the same start: on the text alone (SFT), distilled from the Q8_0
# teacher (train.objective = "distill", forward KL, top 32), and distilled
# with the hard-label loss mixed in at alpha 0.5. Printed: each
# model's perplexity on the held-out book (Ruth, `ggtrain eval --text`) and
# the students' last validation records (val_nll is the distilled ones'
# loss on the text itself).
#
#   bash scripts/distill_demo.sh [STUDENT_STEPS (default 400)] [TEACHER_STEPS (default 800)]
# Run again, it keeps what it finished (delete runs/kjv-distill-* to redo).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
TEACHER_STEPS=${2:-800}
GG=build/src/ggtrain
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
bash scripts/kjv_corpus.sh  # data/kjv.txt and the held-out data/ruth.txt
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores)"
R=runs/kjv-distill
# The teacher: s15's recipe wider and deeper (d_model 384, 8 layers, d_ff
# 1024: about 2.4x s15's block parameters), trained twice as many steps.
if [[ ! -f $R-teacher/weights/step_$TEACHER_STEPS.gguf ]]; then
  rm -rf "$R-teacher"
  "$GG" train --preset s15 --run-dir "$R-teacher" --set data.corpus=data/kjv.txt --set train.steps="$TEACHER_STEPS" \
    --set model.d_model=384 --set model.n_layers=8 --set model.n_heads=6 --set model.n_kv_heads=6 \
    --set model.d_ff=1024 --set train.sample_every=0 --set checkpoint.every="$TEACHER_STEPS"
fi
TEACHER=$R-teacher/teacher-q8_0.gguf
[[ -f $TEACHER ]] || "$GG" export "$R-teacher/weights/step_$TEACHER_STEPS.gguf" "$TEACHER" --type q8_0
# Both students: s15 from scratch on the teacher's vocabulary, same seed,
# steps, batches and schedule.
student() {
  local name=$1; shift
  [[ -f $R-$name/weights/step_$STEPS.gguf ]] && return
  rm -rf "$R-$name"
  "$GG" train --preset s15 --run-dir "$R-$name" --set data.corpus=data/kjv.txt --set train.steps="$STEPS" \
    --set data.tokenizer="$R-teacher/tokenizer.model" --set train.sample_every=0 --set checkpoint.every="$STEPS" \
    --set train.eval_every="$STEPS" "$@"
}
student sft
student kd --set train.objective=distill --set train.teacher="$TEACHER" --set train.distill.top_k=32
student kd-mix --set train.objective=distill --set train.teacher="$TEACHER" --set train.distill.top_k=32 \
  --set train.distill.alpha=0.5
echo
echo
echo "== perplexity on the held-out book (Ruth), llama-perplexity's rule, 256-token windows =="
for m in "$R-teacher/weights/step_$TEACHER_STEPS.gguf" "$TEACHER" "$R-sft/weights/step_$STEPS.gguf" \
         "$R-kd/weights/step_$STEPS.gguf" "$R-kd-mix/weights/step_$STEPS.gguf"; do
  printf '%s: ' "$m"
  "$GG" eval -m "$m" --text data/ruth.txt -c 256 2>&1 | tail -n1
done
echo
echo "== the last validation records (KJV validation windows) =="
for name in sft kd kd-mix; do echo "$name: $(grep '"val_loss"' "$R-$name/metrics.jsonl" | tail -n1)"; done
