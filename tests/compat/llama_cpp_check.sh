#!/usr/bin/env bash
# End-to-end proof against llama.cpp itself (the prebuilt llama.cpp inside the
# npm package node-llama-cpp, see tests/node/llama_cpp.mjs):
#   1. train the tiny preset for 20 steps on Genesis (Debian's bible-kjv);
#   2. the checkpoint run/weights/latest must load in llama.cpp, and llama.cpp's
#      logits on a prompt must equal `ggtrain eval`'s to 1e-4;
#   3. llama.cpp's tokenizer and `ggtrain tokenize` must give identical ids on
#      ~300 lines (corpus lines plus digits, punctuation, spaces, accents, CJK,
#      emoji / byte fallback).
#
#   tests/compat/llama_cpp_check.sh PATH/TO/ggtrain
#
# Needs: bible (apt: bible-kjv), node, and tests/node/node_modules from
#   cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 PATH/TO/ggtrain" >&2
  exit 2
fi
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true

fail() {
  echo "llama_cpp_check: FAIL: $*" >&2
  exit 1
}

[[ -x "$GGTRAIN" ]] || fail "not an executable: $GGTRAIN"
command -v bible >/dev/null || fail "'bible' is missing; install the Debian package bible-kjv (apt-get install bible-kjv)"
command -v node >/dev/null || fail "'node' is missing"
[[ -d "$HERE/node/node_modules/node-llama-cpp" && -d "$HERE/node/node_modules/@node-llama-cpp/linux-x64" ]] ||
  fail "node-llama-cpp is not installed; run: cd tests/node && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund"

start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# Corpus: Genesis, one verse per line, without the "Ge1:1" reference.
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
n_corpus=$(wc -l <corpus.txt)
((n_corpus > 1000)) || fail "corpus.txt has only $n_corpus lines (bible -f Gen1:1-Gen50:26)"

# Train.
"$GGTRAIN" train --preset tiny --run-dir run --set data.corpus=corpus.txt \
  --set train.steps=20 --set train.threads=1 --quiet
M=run/weights/latest
[[ -L "$M" ]] || fail "$M is not a symlink"
target=$(readlink "$M")
[[ "$target" != /* ]] || fail "$M -> $target is not a relative symlink"
[[ -f "$M" ]] || fail "$M -> $target does not resolve to a file"
echo "checkpoint: $M -> $target"

# Logits: ggtrain eval vs llama.cpp on BOS + the prompt.
echo "In the beginning God created the heaven and the earth." >prompt.txt
prompt_ids=$("$GGTRAIN" tokenize -m "$M" --lines prompt.txt)
[[ "$prompt_ids" =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "ggtrain tokenize gave '$prompt_ids' for the prompt"
ids="1,$prompt_ids"
echo "prompt ids: $ids"
# --cache-type f32 here and below: the llama.cpp side keeps its K/V cache in F32.
"$GGTRAIN" eval --cache-type f32 -m "$M" --tokens "$ids" --dump-logits ours.f32
node "$CLI" logits "$M" "$ids" theirs.f32
logit_report=$(node "$CLI" compare ours.f32 theirs.f32 1e-4) || {
  echo "$logit_report"
  fail "ggtrain and llama.cpp logits differ by more than 1e-4"
}

# ggtrain's default fp16 K/V cache against llama.cpp's (its default too): the
# same rounding of keys and values, so the same tolerance; on a prompt of
# under 16 tokens (the decode attention kernel) and one of 60 (the flash
# kernel over the rounded batch). (On this small model fp16 moves the logits
# by only ~4e-5, so this checks the cache's layout and kernels against
# llama.cpp, not the rounding itself: tests/infer/test_decoder.cpp and test_attention_decode.cpp do.)
short_ids="1,$("$GGTRAIN" tokenize -m "$M" --lines <(echo "In the"))"
long_ids=$(cut -d, -f1-60 <<<"1,$("$GGTRAIN" tokenize -m "$M" --lines <(head -n 3 corpus.txt | tr '\n' ' '; echo))")
for case in "short:$short_ids" "long:$long_ids"; do
  name=${case%%:*} case_ids=${case#*:}
  "$GGTRAIN" eval -m "$M" --tokens "$case_ids" --dump-logits "ours16-$name.f32"
  LLAMA_CPP_KV_TYPE=F16 node "$CLI" logits "$M" "$case_ids" "theirs16-$name.f32"
  report=$(node "$CLI" compare "ours16-$name.f32" "theirs16-$name.f32" 1e-4) || {
    echo "$report"
    fail "fp16 cache ($name prompt): ggtrain and llama.cpp logits differ by more than 1e-4"
  }
  echo "fp16 cache, $name prompt of $(tr -cd , <<<"$case_ids" | wc -c) + 1 tokens: $report"
done

# Tokenizer: the first 250 corpus lines plus hand-written edge cases.
head -n 250 corpus.txt >lines.txt
cat >>lines.txt <<'EOF'
0
7
42
1234567890
3.14159 2.71828 1.41421
In the year 1611, 23 translators finished it.
Call 555-0199 or +1 (800) 123-4567 before 9:30am.
Chapter 50, verse 26; Genesis 1:1-2:3.
100% of 2,500 = 2500 (not 2.500)
0x1F 0b1010 1e-5 -7 +8
Hello, world!
What?! Really... yes; no: maybe.
"Quoted" 'single' `back` «guillemets» „low“ “curly” ‘curly’
(parens) [brackets] {braces} <angles>
a-b_c/d\e|f~g^h&i*j#k@l$m%n
!!!???...,,,;;;:::
--- *** ___ === +++
email: someone@example.com, url: https://example.org/a?b=c&d=e#f
two  spaces  between  words
three   spaces   here
     five leading spaces
 one leading space
trailing spaces     
 both sides 
   
	tab	separated	words	
mixed 	 tabs 	 and 	 spaces
café naïve résumé façade
Ångström Øresund Ærø Straße
Ελληνικά κείμενο
Русский текст
señor niño año jalapeño
àéîõü ÀÉÎÕÜ ç Ç ñ Ñ
Zürich, Köln, Łódź, Český Krumlov
日本語のテキスト
中文文本测试
한국어 텍스트
こんにちは世界
漢字とかなカナ混じり
🙂
🙂🙃😀
emoji in text 👍 ok 🎉!
family 👨‍👩‍👧‍👦 flag 🇺🇸 keycap 1️⃣
😀 leading emoji
trailing emoji 🚀
math ∑ ∫ √ ∞ ≠ ≤ ≥ ± × ÷
arrows ← → ↑ ↓ ⇒ ⇔
currency € £ ¥ ₹ ₩ ¢
symbols © ® ™ § ¶ † ‡ • … ‰
<s> </s> <unk> are plain text here
EOF
# zero-width space, no-break spaces, soft hyphen; combining acute, BOM (UTF-8 bytes)
printf 'zero\342\200\213width, no\302\240break\302\240space, soft\302\255hyphen\n' >>lines.txt
printf 'combining e\314\201 vs \303\251, BOM \357\273\277here\n' >>lines.txt
n_lines=$(grep -cv '^$' lines.txt)
"$GGTRAIN" tokenize -m "$M" --lines lines.txt >ours_tok.txt
node "$CLI" tokenize "$M" lines.txt >theirs_tok.txt
n_ours=$(wc -l <ours_tok.txt)
n_theirs=$(wc -l <theirs_tok.txt)
[[ $n_ours -eq $n_lines && $n_theirs -eq $n_lines ]] ||
  fail "expected $n_lines output lines, ggtrain gave $n_ours, llama.cpp gave $n_theirs"
us=$'\x1f' # field separator that no line contains (lines may hold tabs)
n_same=$(paste -d "$us" ours_tok.txt theirs_tok.txt | awk -F "$us" '$1 "" == $2 ""' | wc -l)
echo "tokenizer: $n_same/$n_lines lines identical"
echo "logits: $logit_report"
if [[ $n_same -ne $n_lines ]] || ! cmp -s ours_tok.txt theirs_tok.txt; then
  grep -v '^$' lines.txt | paste -d "$us" - ours_tok.txt theirs_tok.txt |
    awk -F "$us" '$2 "" != $3 "" { printf "line %d: %s\n  ggtrain:   %s\n  llama.cpp: %s\n", NR, $1, $2, $3 }' | head -n 60
  fail "tokenizer mismatch on $((n_lines - n_same)) of $n_lines lines"
fi
echo "llama_cpp_check: OK in $((SECONDS - start)) s"
