#!/usr/bin/env bash
# Writes a small text of your own kind to try ggtrain on, when you have none
# at hand, and chat examples made from it:
#
#   bash scripts/make_sample_data.sh [DIR]     writes DIR/my.txt and DIR/chat.jsonl (default: .)
#
# The text is the software licences every Debian system ships
# (/usr/share/common-licenses, package base-files): about 1200 lines of
# ordinary English with digits, quotes and brackets (76+ distinct
# characters). The chat examples ask for the words that follow a line's
# first words ({"messages": [user, assistant]}, one per line), from one line
# in four: about 200, which a finetune's default 3 epochs go through in
# seconds with the tiny preset.
set -euo pipefail
dir=${1:-.}
mkdir -p "$dir"
licenses=/usr/share/common-licenses
cat "$licenses/GPL-3" "$licenses/Apache-2.0" "$licenses/MPL-2.0" | sed 's/[[:space:]]*$//' > "$dir/my.txt"
awk '
  function json(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, " ", s); return s }
  NF >= 8 && ++n % 4 == 0 {
    head = $1; for (i = 2; i <= 4; ++i) head = head " " $i
    tail = $5; for (i = 6; i <= 8; ++i) tail = tail " " $i
    printf "{\"messages\": [{\"role\": \"user\", \"content\": \"What follows \\\"%s\\\"?\"}, {\"role\": \"assistant\", \"content\": \"%s\"}]}\n", json(head), json(tail)
  }' "$dir/my.txt" > "$dir/chat.jsonl"
echo "wrote $dir/my.txt ($(wc -l < "$dir/my.txt") lines) and $dir/chat.jsonl ($(wc -l < "$dir/chat.jsonl") examples)"
