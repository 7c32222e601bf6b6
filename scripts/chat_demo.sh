#!/usr/bin/env bash
# Instruction tuning on a task with a checkable answer, end to end: the KJV
# model of scripts/run.sh is finetuned to answer "Which book of the Bible is
# this verse from?" with the book's name, on a chat set built from Debian's
# bible-kjv (every 10th verse held out for the test), and then
#   - accuracy on held-out verses before (the base model, chatml prompt) and
#     after, with `ggtrain chat --temp 0` (exact book name);
#   - the share of replies that stop by themselves in llama.cpp (the
#     finetuned GGUF, its own template, greedy), and whether llama.cpp's
#     replies are the same tokens as ggtrain's (needs tests/node installed,
#     as scripts/test.sh does).
#
#   bash scripts/chat_demo.sh [N_TEST (default 500)] [STEPS (default 800)]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/demo_lib.sh
N_TEST=${1:-500}
STEPS=${2:-800}
GG=build/src/ggtrain
BASE=runs/kjv/weights/latest
OUT=runs/kjv-chat
[[ -f $BASE ]] || { echo "no $BASE: run scripts/run.sh first" >&2; exit 1; }
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
mkdir -p data/kjv-chat
D=data/kjv-chat
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores)"

# Verses with their references -> chat records; every 10th verse is test.
bible -f Gen1:1-Rev22:21 </dev/null | awk -v test="$D/test.tsv" -v train="$D/train.jsonl" '
BEGIN {
  n = split("Ge Genesis|Exo Exodus|Lev Leviticus|Num Numbers|Deu Deuteronomy|Josh Joshua|Jdgs Judges|Ruth Ruth|" \
    "1Sm 1 Samuel|2Sm 2 Samuel|1Ki 1 Kings|2Ki 2 Kings|1Chr 1 Chronicles|2Chr 2 Chronicles|Ezra Ezra|Neh Nehemiah|" \
    "Est Esther|Job Job|Psa Psalms|Prv Proverbs|Eccl Ecclesiastes|SSol Song of Solomon|Isa Isaiah|Jer Jeremiah|" \
    "Lam Lamentations|Eze Ezekiel|Dan Daniel|Hos Hosea|Joel Joel|Amos Amos|Obad Obadiah|Jonah Jonah|Mic Micah|" \
    "Nahum Nahum|Hab Habakkuk|Zep Zephaniah|Hag Haggai|Zec Zechariah|Mal Malachi|Mat Matthew|Mark Mark|Luke Luke|" \
    "John John|Acts Acts|Rom Romans|1Cor 1 Corinthians|2Cor 2 Corinthians|Gal Galatians|Eph Ephesians|" \
    "Phi Philippians|Col Colossians|1Th 1 Thessalonians|2Th 2 Thessalonians|1Tim 1 Timothy|2Tim 2 Timothy|" \
    "Titus Titus|Phmn Philemon|Heb Hebrews|Jas James|1Pet 1 Peter|2Pet 2 Peter|1Jn 1 John|2Jn 2 John|3Jn 3 John|" \
    "Jude Jude|Rev Revelation", pairs, "|")
  for (i = 1; i <= n; i++) { k = pairs[i]; sub(/ .*/, "", k); v = pairs[i]; sub(/^[^ ]* /, "", v); name[k] = v }
}
{
  ref = $1; sub(/^[^ ]* /, ""); book = ref; sub(/[0-9]+:[0-9]+$/, "", book)
  if (!(book in name)) { print "unknown book " book > "/dev/stderr"; exit 1 }
  q = "Which book of the Bible is this verse from? " $0
  gsub(/\\/, "\\\\", q); gsub(/"/, "\\\"", q)
  if (NR % 10 == 0) print name[book] "\t" q > test
  else printf "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"%s\"}]}\n", q, name[book] > train
}'
# An even sample of N_TEST held-out verses.
awk -v n="$N_TEST" -v total="$(wc -l <"$D/test.tsv")" 'NR % int(total / n) == 0 && c < n { print; c++ }' \
  "$D/test.tsv" >"$D/test_sample.tsv"
cut -f1 "$D/test_sample.tsv" >"$D/answers.txt"
cut -f2 "$D/test_sample.tsv" >"$D/prompts.txt"
echo "data: $(wc -l <"$D/train.jsonl") training questions, $(wc -l <"$D/test.tsv") held out, $(wc -l <"$D/prompts.txt") tested"
cut -f1 "$D/test.tsv" | sort | uniq -c | sort -rn | head -1 |
  awk -v t="$(wc -l <"$D/test.tsv")" '{ n = $1; $1 = ""; printf "always answering the most common book,%s, would be right on %.1f%% of the held-out verses\n", $0, 100 * n / t }'

"$GG" chat -m "$BASE" --chat-template chatml --prompt-file "$D/prompts.txt" --temp 0 -n 16 --json \
  >"$D/before.jsonl" 2>/dev/null
echo "before (base model, chatml prompt): $(accuracy "$D/before.jsonl" "$D/answers.txt")"

if [[ ! -f $OUT/weights/step_$STEPS.gguf ]]; then
  rm -rf "$OUT"
  t0=$SECONDS
  "$GG" train --run-dir "$OUT" --set init.from="$BASE" \
    --set data.corpus="$D/train.jsonl" --set data.format=chat --set train.steps="$STEPS" --set train.batch=8 \
    --set train.seq_len=256 --set train.lr_max=3e-4 --set train.lr_min=3e-5 --set train.warmup_steps=50 \
    --set train.eval_every=200 --set train.sample_every=0 --set checkpoint.every=400 2>&1 | grep -v '^step'
  echo "finetune: $((SECONDS - t0)) s wall"
fi
M=$OUT/weights/step_$STEPS.gguf
"$GG" chat -m "$M" --prompt-file "$D/prompts.txt" --temp 0 -n 16 --json >"$D/after.jsonl" 2>/dev/null
echo "after ($STEPS steps): $(accuracy "$D/after.jsonl" "$D/answers.txt")"

llama_cpp_replies "$M" "$D/prompts.txt" "$D/after.jsonl" ""
