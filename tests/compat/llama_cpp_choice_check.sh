#!/usr/bin/env bash
# Multiple-choice accuracy as llama.cpp scores it: `ggtrain eval --task` and
# llama-perplexity --hellaswag, --multiple-choice and --winogrande (built from the source node-llama-cpp ships,
# tests/support/build_llama_perplexity.sh) on the same GGUF and task file.
# The model: the tiny preset (1024-token vocabulary) trained on Genesis; the
# tasks: "which of four verses follows this one" from Exodus
# (scripts/make_verse_task.sh), all drawn with --tasks 60 as
# --hellaswag-tasks 60 draws them. llama-perplexity prints the running
# accuracy after each task; from it, whether each task was answered right,
# which must be ggtrain's answer task for task, in the same order. On the F32
# file and its Q8_0 export; both sides keep an fp16 KV cache (their default).
# Controls: ggtrain's tasks in file order, and ggtrain's choices by summed
# instead of mean log-probability, must each disagree with llama-perplexity
# (a wrong draw or a missing length normalisation would fail).
#
#   tests/compat/llama_cpp_choice_check.sh PATH/TO/ggtrain LLAMA_BUILD_DIR
#
# Needs bible-kjv, git, cmake, node_modules in tests/node (the source bundle).
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 PATH/TO/ggtrain LLAMA_BUILD_DIR" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
fail() { echo "llama_cpp_choice_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
start=$SECONDS
bash "$HERE/support/build_llama_perplexity.sh" "$2" || fail "could not build llama-perplexity"
PERPLEXITY=$(realpath "$2/build/bin/llama-perplexity")
echo "llama-perplexity ready after $((SECONDS - start)) s"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
"$GGTRAIN" train --preset tiny --run-dir small --set data.corpus=corpus.txt --set train.steps=300 \
  --set data.vocab_size=1024 --set model.ctx=512 --set train.threads=2 --quiet >/dev/null
bash "$HERE/../scripts/make_verse_task.sh" Exod1:1-Exod40:38 80 exodus.hellaswag >/dev/null
N=60
"$GGTRAIN" export small/weights/latest q8_0.gguf --type q8_0 >/dev/null

# llama-perplexity ARGS..., its stdout, asked again (up to 3 times in all)
# until it has LINES lines starting with a task number: its logger writes
# from a thread of its own and now and then loses the last line at exit
# (seen once in a CI rehearsal: 59 of 60). A crash fails at once, with the
# end of what it wrote to stderr.
# Always with weight repacking off (-nr): on a Xeon with AMX, llama.cpp
# moves Q8_0 weights into its AMX buffer type, whose ggml_backend_amx_mul_mat
# segfaulted on this model's Q8_0 file at its warm-up decode (seen on a
# Sapphire Rapids CI machine; llama.cpp issue 20824 reports the same crash on
# a real model). With -nr every CPU runs llama.cpp's plain dot-product path,
# the one ggtrain's scores are compared with.
perplexity_lines() { # LINES ARGS...
  local want=$1 out try rc
  shift
  for try in 1 2 3; do
    rc=0
    out=$("$PERPLEXITY" -nr "$@" 2>"$tmp/perplexity.err") || rc=$?
    ((rc == 0)) || fail "llama-perplexity $* exited with status $rc; its last words: $(tail -c 400 "$tmp/perplexity.err")"
    if [[ $(grep -c '^[0-9]' <<<"$out") -ge $want ]]; then break; fi
    echo "llama-perplexity printed $(grep -c '^[0-9]' <<<"$out") of $want task lines (try $try)" >&2
  done
  printf '%s\n' "$out"
}
# right/wrong per task, as 1/0 on one line, from llama-perplexity's running
# accuracy (task i: i, then acc in percent). Flash attention off: with its
# default (auto, on here) llama.cpp answered one Q8_0 task of 60 differently
# from ggtrain, from itself with -fa off and from itself with -ub 16, on a
# model where ggtrain's two best endings are 0.16 nats per token apart;
# ggtrain computes attention as llama.cpp's path without it does.
theirs() {
  perplexity_lines $N -m "$1" -f exodus.hellaswag --hellaswag --hellaswag-tasks $N -c 512 -t 2 -fa off |
    awk -F'\t' '$1 ~ /^[0-9]+$/ && $2 ~ /%$/ { right = int(($2 + 0) * $1 / 100 + 0.5); printf "%d", right - prev; prev = right }'
}
# ggtrain's, in the order drawn (or by FIELD and ORDER given).
ours() { # MODEL CHOSEN_FIELD SORT(draw|file) [TASK_FILE COUNT]
  "$GGTRAIN" eval -m "$1" --task "${4:-exodus.hellaswag}" --tasks "${5:-$N}" -t 2 --json |
    node -e '
      const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
      let t = r.per_task;
      if (process.argv[2] === "file") t = [...t].sort((a, b) => a.index - b.index);
      process.stdout.write(t.map(x => (x[process.argv[1]] === x.gold ? 1 : 0)).join(""));' "$2" "$3"
}
for m in small/weights/latest q8_0.gguf; do
  a=$(theirs "$m")
  b=$(ours "$m" chosen draw)
  [[ ${#a} -eq $N ]] || fail "$m: llama-perplexity scored ${#a} tasks, not $N: '$a'"
  [[ $a == "$b" ]] || fail "$m: answers differ (1 = right):
  llama.cpp: $a
  ggtrain:   $b"
  right=$(tr -cd 1 <<<"$a" | wc -c)
  [[ $(ours "$m" chosen file) != "$a" ]] || fail "control: $m in file order gives llama.cpp's answers: the order is not tested"
  [[ $(ours "$m" chosen_sum draw) != "$a" ]] || fail "control: $m by summed log-probability gives llama.cpp's answers: the normalisation is not tested"
  echo "$m: the same answer on all $N tasks ($right right): $a"
done

# Multiple choice (llama-perplexity --multiple-choice -bf FILE, the binary
# form of its ARC/MMLU/TruthfulQA files): the same Exodus tasks written in
# that form with two, three or four answers each (scripts/make_choice_file.mjs),
# 40 of the 80 drawn as --multiple-choice-tasks 40 draws them. It prints the
# running accuracy after each task, as --hellaswag does: the same right or
# wrong answer on every task, in the same order. Control: ggtrain's tasks in
# file order must disagree.
node "$HERE/../scripts/make_choice_file.mjs" exodus.hellaswag exodus.bin >/dev/null
MC=40
for m in small/weights/latest q8_0.gguf; do
  a=$(perplexity_lines $MC -m "$m" -bf exodus.bin --multiple-choice --multiple-choice-tasks $MC -c 512 -t 2 |
    awk -F'\t' '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ { right = int(($2 + 0) * $1 / 100 + 0.5); printf "%d", right - prev; prev = right }')
  b=$(ours "$m" chosen draw exodus.bin $MC)
  [[ ${#a} -eq $MC ]] || fail "$m: llama-perplexity --multiple-choice scored ${#a} tasks, not $MC: '$a'"
  [[ $a == "$b" ]] || fail "$m: multiple-choice answers differ (1 = right):
  llama.cpp: $a
  ggtrain:   $b"
  [[ $(ours "$m" chosen file exodus.bin $MC) != "$a" ]] || fail "control: $m multiple choice in file order gives llama.cpp's answers"
  echo "$m: multiple choice: the same answer on all $MC tasks ($(tr -cd 1 <<<"$a" | wc -c) right): $a"
done

# Winogrande: "which word fills the blank" from Exodus (scripts/make_word_task.sh),
# 50 of 60 tasks drawn as --winogrande-tasks 50 draws them. llama-perplexity
# prints each task's two scores (mean log-probabilities) and its choice:
# ggtrain's must be the same choice on every task and the same scores within
# a limit per file: measured 5.5e-6 on F32 (the scores are printed to 1e-6)
# and 5.1e-4 on Q8_0 (both sides keep an fp16 KV cache); limits 5e-5 and
# 2e-3. These tasks include sentences whose choice is scored itself, where
# llama.cpp gives the second sentence the first one's last logits: scored
# without that slip, one task's score moved by 1.2 and this check failed. llama-perplexity never reads a
# CSV's last line (its -f drops the final newline, and its CSV loop stops at
# the end of the text before using the line it read), so ggtrain gets the
# file without it: both then draw from the same 59 tasks.
bash "$HERE/../scripts/make_word_task.sh" Exod1:1-Exod40:38 60 exodus.csv >/dev/null
head -n -1 exodus.csv >exodus-59.csv
W=50
for case in small/weights/latest:5e-5 q8_0.gguf:2e-3; do
  m=${case%%:*} limit=${case#*:}
  perplexity_lines $W -m "$m" -f exodus.csv --winogrande --winogrande-tasks $W -c 512 -t 2 |
    awk -F'\t' '$1 ~ /^[0-9]+$/ && NF >= 3 { s = $3; sub(/^ +/, "", s); split(s, f, / +/); print f[1] + 0, f[2] + 0, f[3] }' >theirs.txt
  [[ $(wc -l <theirs.txt) -eq $W ]] || fail "$m: llama-perplexity --winogrande scored $(wc -l <theirs.txt) tasks, not $W"
  "$GGTRAIN" eval -m "$m" --task exodus-59.csv --tasks $W -t 2 --json |
    node -e '
      const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
      for (const t of r.per_task)
        console.log(t.logprob[0] / t.scored_tokens[0], t.logprob[1] / t.scored_tokens[1], t.chosen + 1, t.index);' >ours.txt
  paste -d' ' theirs.txt ours.txt | awk -v m="$m" -v limit="$limit" '
    { d1 = $1 - $4; d2 = $2 - $5; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2
      if (d1 > worst) worst = d1; if (d2 > worst) worst = d2
      if ($3 != $6) { printf "%s: task %d: llama.cpp chose %d, ggtrain %d\n", m, NR, $3, $6; bad = 1 }
      if (!(d1 <= limit + 0 && d2 <= limit + 0)) { printf "%s: task %d: scores %s %s vs %s %s\n", m, NR, $1, $2, $4, $5; bad = 1 }
      if ($7 != NR - 1) drawn = 1 }
    END { printf "%s: winogrande: the same choice on all %d tasks, scores within %.2g of llama.cpp'"'"'s (limit %s)\n", m, NR, worst, limit
          if (!drawn) { print "control: the tasks came in file order; the draw is not tested"; bad = 1 }
          exit bad }' || fail "$m: winogrande differs (above)"
done
echo "llama_cpp_choice_check: OK in $((SECONDS - start)) s"
