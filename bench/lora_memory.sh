#!/usr/bin/env bash
# Peak RSS of finetuning the SmolLM2-135M shape: a full F32 finetune
# (init.from the F32 model) vs LoRA (rank 8 on attn_q, attn_v) on the same
# F32 model and on its Q8_0 and Q4_K_M exports (whose matrices stay in their
# blocks in memory), same batch, a few steps each, measured with
# /usr/bin/time -v.
#
#   bench/lora_memory.sh [BUILD_DIR] [STEPS]
set -euo pipefail
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
B=$(realpath "${1:-build}")
STEPS=${2:-3}
G=$B/src/ggtrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$B/bench/make_random_model" smol.gguf smol135
"$G" export smol.gguf smol-q8_0.gguf --type q8_0 >/dev/null
"$G" export smol.gguf smol-q4_k_m.gguf --type q4_k_m >/dev/null
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
common=(--set data.corpus=corpus.txt --set train.steps="$STEPS" --set train.batch=4 --set train.seq_len=256
        --set train.eval_every=0 --set train.sample_every=0 --set checkpoint.every=0 --quiet)
peak() { /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p'; }
full=$(peak "$G" train --run-dir full --set init.from=smol.gguf "${common[@]}")
lora32=$(peak "$G" train --run-dir lora32 --set init.from=smol.gguf --set train.lora.rank=8 "${common[@]}")
lora=$(peak "$G" train --run-dir lora --set init.from=smol-q8_0.gguf --set train.lora.rank=8 "${common[@]}")
lora4=$(peak "$G" train --run-dir lora4 --set init.from=smol-q4_k_m.gguf --set train.lora.rank=8 "${common[@]}")
ratio() { awk -v a="$1" -v b="$full" 'BEGIN{printf "%.2f", a/b}'; }
echo "SmolLM2-135M shape, batch 4 x 256, $STEPS steps:"
echo "  full finetune (F32 base):      peak RSS $((full / 1024)) MiB"
echo "  LoRA rank 8 q,v (F32 base):    peak RSS $((lora32 / 1024)) MiB  ($(ratio "$lora32")x)"
echo "  LoRA rank 8 q,v (Q8_0 base):   peak RSS $((lora / 1024)) MiB  ($(ratio "$lora")x)"
echo "  LoRA rank 8 q,v (Q4_K_M base): peak RSS $((lora4 / 1024)) MiB  ($(ratio "$lora4")x)"
