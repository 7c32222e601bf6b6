#!/usr/bin/env bash
# Sampling identical to llama.cpp's: `ggtrain generate` and llama.cpp's sampler
# chain (node-llama-cpp's, tests/node/llama_cpp.mjs sample: repeat penalty,
# top-k, top-p, min-p, temperature, dist) draw the same tokens from the same
# model, prompt and seed. Both compute logits that agree to ~1e-6 (F32 KV
# cache on both sides), so an identical sequence needs the same candidate
# order, float arithmetic and std::mt19937 draws at every step. Cases: the
# defaults; the whole vocabulary at temperature 1.5; top-p alone; min-p
# alone; the repeat penalty over a short window and over the whole history;
# each with its own seed and temperature. node-llama-cpp turns top-k 0 into
# top-k of the whole vocabulary (sorted), where llama-cli's top-k 0 leaves
# the candidates in id order (ggtrain does as llama-cli), so "off" is top-k
# 320 (the vocabulary) here.
# 40 tokens after a 20-token prompt (the tiny model's context is 64).
# Control: ggtrain with the next seed must give another sequence.
#
#   tests/compat/llama_cpp_sampling_check.sh PATH/TO/ggtrain
#
# Needs bible-kjv, node + tests/node/node_modules.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/ggtrain" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_sampling_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
"$GGTRAIN" train --preset tiny --run-dir small --set data.corpus=corpus.txt --set train.steps=200 \
  --set train.threads=1 --quiet >/dev/null
M=small/weights/latest
ids=$(cut -d, -f1-20 <<<"1,$("$GGTRAIN" tokenize -m "$M" --lines <(head -n 1 corpus.txt))")
eos=$("$GGTRAIN" inspect "$M" | awk '$1 == "tokenizer.ggml.eos_token_id" { print $3 }')

# ggtrain's tokens, without a final end-of-text token (node-llama-cpp stops
# before yielding it).
ours() { # seed temp top_k top_p min_p penalty last_n
  "$GGTRAIN" generate -m "$M" --tokens "$ids" -n 40 --cache-type f32 --print-ids -t 1 --seed "$1" --temp "$2" \
    --top-k "$3" --top-p "$4" --min-p "$5" --repeat-penalty "$6" --repeat-last-n "$7" 2>/dev/null |
    tail -n 1 | sed "s/,$eos\$//; s/^$eos\$//"
}

n_cases=0
# Each case, then the same with the sampler it is about switched off: that
# must change ggtrain's tokens, or the case would not test it.
#        seed temp top_k top_p min_p penalty last_n | switched off
for case in "42 0.8 40 0.95 0.05 1 64|42 0.8 320 1 0 1 64" "7 1.5 320 1 0 1 64|7 1.0 320 1 0 1 64" \
            "123 1.0 320 0.9 0 1 64|123 1.0 320 1 0 1 64" "5 1.2 320 1 0.1 1 64|5 1.2 320 1 0 1 64" \
            "100 0.9 20 0.8 0.02 1.3 16|100 0.9 20 0.8 0.02 1 16" \
            "2024 1.0 40 0.95 0.05 1.1 -1|2024 1.0 40 0.95 0.05 1.1 8"; do
  off=${case#*|} case=${case%|*}
  read -r seed temp top_k top_p min_p penalty last_n <<<"$case"
  what="seed $seed, temp $temp, top-k $top_k, top-p $top_p, min-p $min_p, penalty $penalty over $last_n"
  # shellcheck disable=SC2086  # a case is seven words
  a=$(ours $case)
  # shellcheck disable=SC2086
  b=$(node "$CLI" sample "$M" "$ids" 40 $case 2>/dev/null)
  [[ -n $a && $a == "$b" ]] || fail "$what:
  ggtrain:   $a
  llama.cpp: $b"
  other=$(ours $((seed + 1)) "$temp" "$top_k" "$top_p" "$min_p" "$penalty" "$last_n")
  [[ $other != "$b" ]] || fail "control: seed $((seed + 1)) gives llama.cpp's tokens of seed $seed: the seed is not used"
  # shellcheck disable=SC2086
  [[ $(ours $off) != "$a" ]] || fail "control: $what gives the tokens of ($off): the case tests nothing"
  echo "$what: $(tr -cd , <<<"$a," | wc -c) tokens identical"
  n_cases=$((n_cases + 1))
done
echo "llama_cpp_sampling_check: OK ($n_cases cases) in $((SECONDS - start)) s"
