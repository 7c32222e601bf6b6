#!/usr/bin/env bash
# Step time of DPO against SFT on the same tokens, from the main job's model
# (runs/kjv/weights/latest, s15): 4000 pairs made from the KJV (the prompt a
# verse, the chosen answer the verse that follows it, the rejected one a
# verse drawn from elsewhere), trained with DPO; the same conversations
# (each pair's prompt + chosen and prompt + rejected, two chat examples)
# trained with SFT; the same batch (8 x 256), threads and steps, fully and
# with LoRA (rank 16 on every block matrix). Reported: seconds per step over
# steps 6..N (the first ones warm up) and DPO's one-off reference pass. DPO
# runs the blocks once and the output head twice per step; its reference
# costs no step anything.
#
#   bench/compare_preference.sh [STEPS (default 30)]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
GG=build/src/ggtrain
BASE=runs/kjv/weights/latest
[[ -f $BASE && -s data/kjv.txt ]] || { echo "no $BASE or data/kjv.txt: run scripts/run.sh first" >&2; exit 1; }
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
node -e '
  const fs = require("fs");
  const v = fs.readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.length > 0 && l.length < 300);
  const pairs = [], sft = [];
  let seed = 7;
  const next = () => (seed = (seed * 48271) % 2147483647);
  for (let i = 0; pairs.length < 4000 && i + 1 < v.length; i += 7) {
    const rejected = v[next() % v.length];
    pairs.push(JSON.stringify({prompt: v[i], chosen: v[i + 1], rejected}));
    for (const a of [v[i + 1], rejected])
      sft.push(JSON.stringify({messages: [{role: "user", content: v[i]}, {role: "assistant", content: a}]}));
  }
  fs.writeFileSync(process.argv[2] + "/pairs.jsonl", pairs.join("\n") + "\n");
  fs.writeFileSync(process.argv[2] + "/sft.jsonl", sft.join("\n") + "\n");' data/kjv.txt "$tmp"

mean_step() {  # run dir -> seconds per step over steps 6..N, and tokens/s
  node -e '
    const fs = require("fs");
    const s = fs.readFileSync(process.argv[1] + "/metrics.jsonl", "utf8").trim().split("\n").map(JSON.parse)
      .filter((r) => "tokens_per_s" in r && r.step > 5);
    const dt = (s[s.length - 1].elapsed_s - s[0].elapsed_s) / (s.length - 1);
    console.log(dt.toFixed(4) + " " + (8 * 256 / dt).toFixed(0));' "$1"
}
run() {  # name, --set arguments...
  local name=$1
  shift
  "$GG" train --run-dir "$tmp/$name" --set init.from="$BASE" --set train.steps="$STEPS" --set train.batch=8 \
    --set train.seq_len=256 --set train.eval_every=0 --set train.sample_every=0 --set checkpoint.every=0 \
    --set data.val_fraction=0 --set train.threads="$(nproc)" "$@" >"$tmp/$name.log" 2>&1 ||
    { tail -n 5 "$tmp/$name.log" >&2; exit 1; }
}
# A first full SFT run grows the vocabulary by chatml's markers; LoRA needs a base that has them.
run sft-full --set data.corpus="$tmp/sft.jsonl" --set data.format=chat
run dpo-full --set data.corpus="$tmp/pairs.jsonl" --set data.format=preference --set train.objective=dpo
LORA_BASE=$(ls "$tmp"/sft-full/weights/step_*.gguf | head -n1)
LORA=(--set init.from="$LORA_BASE" --set train.lora.rank=16
      --set train.lora.targets=attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down)
run sft-lora --set data.corpus="$tmp/sft.jsonl" --set data.format=chat "${LORA[@]}"
run dpo-lora --set data.corpus="$tmp/pairs.jsonl" --set data.format=preference --set train.objective=dpo "${LORA[@]}"
for kind in full lora; do
  read -r s_dt s_tps <<<"$(mean_step "$tmp/sft-$kind")"
  read -r d_dt d_tps <<<"$(mean_step "$tmp/dpo-$kind")"
  echo "$kind: SFT $s_dt s/step ($s_tps tok/s), DPO $d_dt s/step ($d_tps tok/s): DPO/SFT $(awk -v a="$d_dt" -v b="$s_dt" 'BEGIN { printf "%.3f", a / b }')"
  grep -h '^reference:' "$tmp/dpo-$kind.log" | sed "s|$tmp/||" || true
done
