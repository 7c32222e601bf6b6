#!/usr/bin/env bash
# GRPO on the task of scripts/chat_demo.sh ("Which book of the Bible is this
# verse from?"), after it: the SFT model samples train.grpo.group replies to
# training questions, each scored 1 when it is the book's exact name, and
# learns from the groups' differences; then, on the same held-out verses as
# the SFT model:
#   - exact-name accuracy with `ggtrain chat --temp 0`, before and after;
#   - the reward per step (RUN/metrics.jsonl) and its plot, RUN/reward.svg;
#   - the share of a step spent sampling replies and training on them;
#   - whether llama.cpp's replies stop and are ggtrain's tokens (needs
#     tests/node, as scripts/test.sh installs it).
#
#   bash scripts/grpo_demo.sh [N_PROMPTS (default 4000)] [STEPS (default 300)]
# Run again, it resumes or keeps a GRPO run it finished (delete
# runs/kjv-grpo to train again).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/demo_lib.sh
N_PROMPTS=${1:-4000}
STEPS=${2:-300}
GG=build/src/ggtrain
D=data/kjv-chat
SFT=$(ls -v runs/kjv-chat/weights/step_*.gguf 2>/dev/null | tail -n1 || true)
[[ -n $SFT && -f $D/prompts.txt ]] || { echo "no SFT model or test prompts: run scripts/chat_demo.sh first" >&2; exit 1; }
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
P=data/kjv-grpo
OUT=runs/kjv-grpo
mkdir -p "$P"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores); SFT model $SFT"

# An even sample of the training questions (chat records: the user's
# question, the assistant's book, which the reward compares with).
awk -v n="$N_PROMPTS" 'NR == FNR { total++; next } (FNR - 1) % int(total / n > 1 ? total / n : 1) == 0 && kept < n { print; kept++ }' \
  "$D/train.jsonl" "$D/train.jsonl" >"$P/prompts.jsonl"
echo "prompts: $(wc -l <"$P/prompts.jsonl") training questions"

"$GG" chat -m "$SFT" --prompt-file "$D/prompts.txt" --temp 0 -n 16 --json >"$P/before.jsonl" 2>/dev/null
echo "before (the SFT model): $(accuracy "$P/before.jsonl" "$D/answers.txt")"

t0=$SECONDS
if [[ -L $OUT/weights/latest ]]; then
  "$GG" train --resume --run-dir "$OUT" 2>&1 | grep -v '^step' || true
else
  # Windows of 160 tokens hold one to three questions; 8 windows a step
  # (about 17 prompts), 8 replies each of up to 8 tokens (the longest book
  # name and <|im_end|>). At 3e-5 for 100 steps of 4 windows the reward
  # did not move (0.249 -> 0.257).
  "$GG" train --run-dir "$OUT" --set init.from="$SFT" --set data.corpus="$P/prompts.jsonl" --set data.format=chat \
    --set data.overflow=skip --set train.objective=grpo --set train.grpo.reward=exact --set train.grpo.group=8 \
    --set train.grpo.max_tokens=8 --set train.seq_len=160 --set train.batch=8 --set train.steps="$STEPS" \
    --set train.lr_max=1e-4 --set train.lr_min=1e-5 --set train.warmup_steps=10 --set train.eval_every=100 \
    --set train.eval_batches=8 --set data.val_fraction=0.02 --set train.sample_every=0 --set checkpoint.every=100 \
    2>&1 | grep -v '^step'
fi
echo "grpo: $((SECONDS - t0)) s wall"
node -e '
  const fs = require("fs");
  const recs = fs.readFileSync(process.argv[1] + "/metrics.jsonl", "utf8").trim().split("\n").map(JSON.parse);
  const steps = recs.filter((r) => "reward" in r && "loss" in r);
  const mean = (a, k) => a.reduce((s, r) => s + r[k], 0) / a.length;
  const tenth = Math.max(1, Math.floor(steps.length / 10));
  console.log(`reward: first ${tenth} steps ${mean(steps.slice(0, tenth), "reward").toFixed(3)}, ` +
              `last ${tenth} ${mean(steps.slice(-tenth), "reward").toFixed(3)}; reply ` +
              `${mean(steps, "completion_length").toFixed(2)} tokens; a step: ${mean(steps, "rollout_s").toFixed(2)} s ` +
              `sampling ${mean(steps, "prompts").toFixed(1)} x 8 replies, ${mean(steps, "train_s").toFixed(2)} s training`);
  for (const v of recs.filter((r) => "val_reward" in r))
    console.log(`  validation at step ${v.step}: greedy reward ${v.val_reward.toFixed(3)} over ${v.val_prompts} ` +
                `prompts, answers loss ${v.val_loss.toFixed(4)}`);' "$OUT"

"$GG" chat -m "$OUT/weights/latest" --prompt-file "$D/prompts.txt" --temp 0 -n 16 --json >"$P/after.jsonl" 2>/dev/null
echo "after GRPO ($STEPS steps): $(accuracy "$P/after.jsonl" "$D/answers.txt")"
llama_cpp_replies "$(readlink -f "$OUT/weights/latest")" "$D/prompts.txt" "$P/after.jsonl" " (GRPO)"
