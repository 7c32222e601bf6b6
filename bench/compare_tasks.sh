#!/usr/bin/env bash
# Multiple-choice scoring speed: `ggtrain eval --task` against llama.cpp's
# llama-perplexity --hellaswag / --winogrande (built here from the source
# node-llama-cpp ships, with OpenMP and -march=native, as a user builds it;
# never part of ggtrain), same GGUF, task file, context, threads and KV
# cache type (f16, both defaults), in one invocation. Tasks/s is the number
# of tasks over each command's whole wall-clock time, model loading
# included on both sides. The tasks: from the Book of Ruth (the main job
# leaves it out of training), 80 "which verse follows" (HellaSwag form) and
# 80 "which word fills the blank" (Winogrande form; llama-perplexity reads
# 79 of them, see README).
#
#   bench/compare_tasks.sh [MODEL.gguf (default runs/kjv/weights/latest)] [THREADS (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-runs/kjv/weights/latest}
THREADS=${2:-2}
[[ -f "$MODEL" ]] || { echo "no model at $MODEL (run scripts/run.sh first)" >&2; exit 1; }
GG=build/src/ggtrain
BUNDLE=tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
[[ -f $BUNDLE ]] || { echo "no $BUNDLE (run scripts/test.sh once)" >&2; exit 1; }
[[ -d build/llama.cpp-src ]] || git clone -q "$BUNDLE" build/llama.cpp-src 2>/dev/null
PPL=${PPL:-build/llama.cpp-build/bin/llama-perplexity}  # PPL=...: another build of it
if [[ ! -x $PPL ]]; then
  cmake -S build/llama.cpp-src -B build/llama.cpp-build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build build/llama.cpp-build --target llama-perplexity -j "$(nproc)" >/dev/null
fi
cmake --build build --target ggtrain -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), flags: $(grep -o -w 'avx512f\|avx512_vnni\|avx_vnni\|amx_int8\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bash scripts/make_verse_task.sh Ruth1:1-Ruth4:22 80 "$tmp/ruth.hellaswag" >/dev/null
bash scripts/make_word_task.sh Ruth1:1-Ruth4:22 80 "$tmp/ruth.csv" >/dev/null
head -n -1 "$tmp/ruth.csv" >"$tmp/ruth-79.csv"  # the tasks llama-perplexity reads
CTX=$("$GG" inspect "$MODEL" | awk '$1 ~ /\.context_length$/ { print $3 }')
echo "model $MODEL (context $CTX), $THREADS threads"
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >"$tmp/out.txt" 2>&1; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'; }
for t in ${TYPES:-f32 q8_0}; do
  f=$tmp/$t.gguf
  if [[ $t == f32 ]]; then cp "$MODEL" "$f"; else "$GG" export "$MODEL" "$f" --type "$t" >/dev/null; fi
  for form in hellaswag winogrande; do
    file=$tmp/ruth.hellaswag ours_file=$tmp/ruth.hellaswag n=80
    [[ $form == winogrande ]] && file=$tmp/ruth.csv ours_file=$tmp/ruth-79.csv n=79
    ours=$(seconds "$GG" eval -m "$f" --task "$ours_file" --task-format "$form" -c "$CTX" -t "$THREADS")
    our_acc=$(sed -n 's/.*acc_norm \([0-9.]*%\).*/\1/p' "$tmp/out.txt")
    theirs=$(seconds "$PPL" -m "$f" -f "$file" "--$form" "--$form-tasks" $n -c "$CTX" -t "$THREADS" -tb "$THREADS")
    their_acc=$(awk -F'\t' '$1 ~ /^[0-9]+$/ { a = $2 } END { sub(/%$/, "", a); print a "%" }' "$tmp/out.txt")
    echo "$t $form: ggtrain $our_acc in $ours s ($(awk -v n=$n -v s="$ours" 'BEGIN { printf "%.1f", n / s }') tasks/s);" \
      "llama-perplexity $their_acc in $theirs s ($(awk -v n=$n -v s="$theirs" 'BEGIN { printf "%.1f", n / s }') tasks/s);" \
      "speed $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2fx", b / a }')"
  done
done
