#!/usr/bin/env bash
# Importance matrices against llama.cpp's own tools (llama-imatrix and
# llama-quantize, built from the source node-llama-cpp ships by
# tests/support/build_llama_perplexity.sh):
#   1. `ggtrain imatrix` collects what llama-imatrix collects on the same
#      model and text (F32 caches on both sides): the same entries, the same
#      counts, every sum within a relative limit (tests/compat/imatrix_compare.py
#      reads both files with llama.cpp's gguf-py);
#   1b. `ggtrain imatrix --in-file A --in-file B ...` (combining) writes
#      the bytes `llama-imatrix --in-file ...` writes, .dat files included;
#   2. `ggtrain export --type T --imatrix FILE` is byte-identical to
#      `llama-quantize --imatrix FILE` for every quantized file type ggtrain
#      writes, with llama-imatrix's file and with ggtrain's (both directions),
#      and with a legacy .dat;
#   3. ggtrain's logits on the Q4_0 file quantized with an importance matrix
#      (its first ffn_down layer is Q4_1 then, as llama-quantize raises it)
#      follow llama.cpp's.
#   4. `ggtrain eval --kl-divergence` against the F32 base as
#      llama-perplexity --kl-divergence reports it, and the base files
#      (--kl-divergence-base) read across: each tool reads the other's.
# Models: llama with K-quant rows and 8 layers (tied), llama with rows that
# are not multiples of 256 (32-block fallbacks), qwen3moe (one row of sums
# and one count per expert), qwen35 (Gated DeltaNet layers), lfm2 (short
# convolutions), all with non-default shapes.
#
#   tests/compat/llama_cpp_imatrix_check.sh PATH/TO/ggtrain LLAMA_BUILD_DIR
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 PATH/TO/ggtrain LLAMA_BUILD_DIR" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_imatrix_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
PY=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[[ -n $PY ]] || fail "no python3 with numpy (apt-get install python3-numpy; llama.cpp's gguf-py needs it)"
export PYTHONDONTWRITEBYTECODE=1
bash "$HERE/support/build_llama_perplexity.sh" "$2" || fail "could not build llama.cpp's tools"
BIN=$(realpath "$2/build/bin")
export GGUF_PY
GGUF_PY=$(realpath "$2/src/gguf-py")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
bible -f Exod1:1-Exod12:51 </dev/null | sed 's/^[^ ]* //' >calib.txt
train() { # NAME ARGS...
  local name=$1
  shift
  "$GGTRAIN" train --preset tiny --run-dir "$name" --set data.corpus=corpus.txt --set train.steps=20 \
    --set train.threads=2 --quiet "$@" >/dev/null
}
train k256 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 --set model.tied=true
train small --set model.n_layers=3
train qwen3moe --set model.arch=qwen3moe --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=2 \
  --set model.n_experts=4 --set model.n_experts_used=2 --set model.d_ff_expert=256 --set model.tied=true
train qwen35 --set model.arch=qwen35 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=4 \
  --set model.attention_layers=1,3 --set model.rope_dim=16 --set model.ssm_state_size=64 \
  --set model.ssm_group_count=2 --set model.ssm_time_step_rank=4 --set model.tied=true
train lfm2 --set model.arch=lfm2 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=4 \
  --set model.attention_layers=1,3 --set model.tied=true

# 1. the statistics. Both sides in float with F32 caches and llama.cpp's
# flash attention off (on the CPU it rounds the queries to F16); ggtrain's
# GEMMs and ggml's sum in other orders. Measured 8.2e-7 to 2.0e-6 relative
# over the five models; limit 2e-5. Control: llama-imatrix with its default
# flash attention differs by ~6.5e-4 (F16 queries), which must fail.
LIMIT=2e-5
TYPES=(q4_0 q5_0 q5_1 q8_0 q4_k_s q4_k_m q5_k_s q5_k_m q6_k)
for model in k256 small qwen3moe qwen35 lfm2; do
  M=$model/weights/latest
  "$GGTRAIN" imatrix -m "$M" -f calib.txt -c 64 --chunks 6 -o "ours-$model.gguf" --cache-type f32 -t 2 \
    >"ours-$model.log" 2>&1 || { cat "ours-$model.log" >&2; fail "$model: ggtrain imatrix failed"; }
  "$BIN/llama-imatrix" -m "$M" -f calib.txt -c 64 --chunks 6 -o "theirs-$model.gguf" -ctk f32 -ctv f32 -fa off -t 2 \
    >"theirs-$model.log" 2>&1 || { tail -20 "theirs-$model.log" >&2; fail "$model: llama-imatrix failed"; }
  echo -n "$model imatrix: "
  "$PY" "$HERE/compat/imatrix_compare.py" "ours-$model.gguf" "theirs-$model.gguf" "$LIMIT" ||
    fail "$model: ggtrain's importance matrix differs from llama-imatrix's"
done
# Chat JSONL (no llama-imatrix counterpart): each record rendered by the
# template; every dense matrix counts 64 rows a chunk.
awk '{ gsub(/"/, "\\\""); printf "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"Amen.\"}]}\n", $0 }' \
  calib.txt >calib.jsonl
"$GGTRAIN" imatrix -m k256/weights/latest -f calib.jsonl --chat-template chatml -c 64 --chunks 4 -o chat.gguf \
  --cache-type f32 -t 2 >chat.log || { cat chat.log >&2; fail "ggtrain imatrix on chat JSONL failed"; }
grep -q "rendered with the chatml template" chat.log || fail "imatrix on chat JSONL: $(cat chat.log)"
grep -q "56 matrices over 4 chunks of 64 tokens" chat.log || fail "imatrix on chat JSONL: $(cat chat.log)"
"$BIN/llama-imatrix" -m k256/weights/latest -f calib.txt -c 64 --chunks 6 -o theirs-fa.gguf -ctk f32 -ctv f32 -t 2 \
  >theirs-fa.log 2>&1 || { tail -20 theirs-fa.log >&2; fail "llama-imatrix (flash attention) failed"; }
if "$PY" "$HERE/compat/imatrix_compare.py" ours-k256.gguf theirs-fa.gguf "$LIMIT" >/dev/null 2>&1; then
  fail "control: llama-imatrix's F16-query flash attention passed the limit"
fi
echo "control: llama-imatrix with flash attention (F16 queries) is over the limit"
# the legacy format, from llama-imatrix itself
"$BIN/llama-imatrix" -m k256/weights/latest -f calib.txt -c 64 --chunks 6 -o theirs-k256.dat --output-format dat \
  -ctk f32 -ctv f32 -t 2 >theirs-dat.log 2>&1 || { tail -20 theirs-dat.log >&2; fail "llama-imatrix .dat failed"; }

# 1b. combining matrices: `ggtrain imatrix --in-file ...` writes the bytes
# `llama-imatrix --in-file ...` writes (GGUF with GGUF, with a legacy .dat,
# experts' counts, one file re-saved alone).
combine() { # MODEL FILES...
  local model=$1 args=()
  shift
  for f in "$@"; do args+=(--in-file "$f"); done
  "$GGTRAIN" imatrix "${args[@]}" -c 64 -o ours-combined.gguf >/dev/null || fail "ggtrain imatrix ${args[*]} failed"
  "$BIN/llama-imatrix" -m "$model/weights/latest" "${args[@]}" -c 64 -o theirs-combined.gguf >combine.log 2>&1 ||
    { tail -5 combine.log >&2; fail "llama-imatrix ${args[*]} failed"; }
  cmp -s ours-combined.gguf theirs-combined.gguf || fail "combining $* differs from llama-imatrix's file"
}
combine k256 ours-k256.gguf theirs-k256.gguf
combine k256 ours-k256.gguf theirs-k256.dat theirs-k256.gguf
combine k256 theirs-k256.dat
combine qwen3moe theirs-qwen3moe.gguf ours-qwen3moe.gguf ours-qwen3moe.gguf
for model in small qwen35 lfm2; do combine "$model" "ours-$model.gguf"; done
echo "combined matrices (7 sets: GGUF, .dat, experts, each model's alone) byte-identical to llama-imatrix's"

# 2. quantizing with them
for model in k256 small qwen3moe qwen35 lfm2; do
  M=$model/weights/latest
  mats=("ours-$model.gguf" "theirs-$model.gguf")
  [[ $model == k256 ]] && mats+=(theirs-k256.dat)
  for im in "${mats[@]}"; do
    for type in "${TYPES[@]}"; do
      "$BIN/llama-quantize" --imatrix "$im" "$M" "theirs-q.gguf" "$type" 2 >quantize.log 2>&1 ||
        { tail -20 quantize.log >&2; fail "llama-quantize --imatrix $im $type failed"; }
      "$GGTRAIN" export "$M" "ours-q.gguf" --type "$type" --imatrix "$im" >export.log ||
        { cat export.log >&2; fail "ggtrain export --imatrix $im $type failed"; }
      cmp -s ours-q.gguf theirs-q.gguf ||
        fail "$model $type --imatrix $im: ggtrain's file differs from llama-quantize's ($(cmp ours-q.gguf theirs-q.gguf))"
      [[ $model == k256 && $type == q4_0 && $im == ours-k256.gguf ]] && cp ours-q.gguf k256-q4_0-imatrix.gguf
    done
    echo "$model --imatrix $im: ${#TYPES[@]} types byte-identical to llama-quantize"
  done
done
# Control: the same type without the matrix gives another file.
"$GGTRAIN" export k256/weights/latest plain.gguf --type q4_k_m >/dev/null
"$BIN/llama-quantize" --imatrix ours-k256.gguf k256/weights/latest weighted.gguf q4_k_m 2 >/dev/null 2>&1
"$PY" - plain.gguf weighted.gguf <<'PY' || fail "control: Q4_K_M blocks with and without an importance matrix are the same"
import os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
from gguf import GGUFReader
a, b = ({t.name: bytes(t.data) for t in GGUFReader(p).tensors} for p in sys.argv[1:3])
differ = [n for n in a if n.startswith("blk.") and a[n] != b[n]]
print(f"control: {len(differ)} of {sum(n.startswith('blk.') for n in a)} block tensors differ without the matrix")
sys.exit(0 if differ else 1)
PY

# 3. a Q4_1 tensor decoded: llama-quantize raised blk.0.ffn_down to Q4_1.
"$GGTRAIN" inspect k256-q4_0-imatrix.gguf >q4_0-imatrix.txt
grep -q 'blk.0.ffn_down.weight *Q4_1' q4_0-imatrix.txt ||
  fail "the q4_0 file with an importance matrix has no Q4_1 blk.0.ffn_down"
echo "In the beginning God created the heaven and the earth." >prompt.txt
ids="1,$("$GGTRAIN" tokenize -m k256/weights/latest --lines prompt.txt)"
"$GGTRAIN" eval --cache-type f32 -m k256-q4_0-imatrix.gguf --tokens "$ids" --dump-logits ours.f32 >/dev/null
node "$CLI" logits k256-q4_0-imatrix.gguf "$ids" theirs.f32 2>/dev/null
echo -n "k256 q4_0 with imatrix (Q4_1 ffn_down) logits: "
# the limits of llama_cpp_quantize_check.sh's Q5_1, the other Q8_1 dot type
node "$CLI" compare ours.f32 theirs.f32 3e-2 1e-4 || fail "logits on the Q4_1 file differ from llama.cpp's"

# 4. KL divergence against the F32 base, as llama-perplexity reports it, for
# the Q4_K_M export with and without the importance matrix and the Q4_0 one.
# llama-perplexity runs the base into a file (its log-probabilities in
# 16-bit steps) and then the quantized model against it; ggtrain runs both.
# Both with F32 caches, flash attention off, weight repacking off (-nr: the
# AMX path llama_cpp_choice_check.sh avoids).
LLAMA_PPL=("$BIN/llama-perplexity" -f calib.txt -c 64 -ctk f32 -ctv f32 -fa off -nr -t 2)
"${LLAMA_PPL[@]}" -m k256/weights/latest --kl-divergence-base base.kld >base-kld.log 2>&1 ||
  { tail -20 base-kld.log >&2; fail "llama-perplexity --kl-divergence-base failed"; }
"$GGTRAIN" export k256/weights/latest k256-q4_k_m.gguf --type q4_k_m >/dev/null
"$GGTRAIN" export k256/weights/latest k256-q4_k_m-imatrix.gguf --type q4_k_m --imatrix ours-k256.gguf >/dev/null
# "NAME VALUE" for the statistics lines both print (the value before any ±)
stats() { sed -n 's/^\(Mean PPL(Q)\|Mean PPL(base)\|Mean    KLD\|Maximum KLD\|Median  KLD\|99.0%   KLD\|RMS Δp\|Same top p\) *: *\(-\?[0-9.]*\).*/\1\t\2/p'; }
for q in k256-q4_k_m k256-q4_k_m-imatrix k256-q4_0-imatrix; do
  # llama.cpp's logger thread now and then drops the last lines at exit
  # (llama_cpp_choice_check.sh saw it under ctest -j2): up to 3 tries.
  for try in 1 2 3; do
    "${LLAMA_PPL[@]}" -m "$q.gguf" --kl-divergence-base base.kld --kl-divergence >"theirs-$q-kld.log" 2>&1 ||
      { tail -20 "theirs-$q-kld.log" >&2; fail "llama-perplexity --kl-divergence on $q failed"; }
    [[ $(stats <"theirs-$q-kld.log" | wc -l) -eq 8 ]] && break
    echo "llama-perplexity printed $(stats <"theirs-$q-kld.log" | wc -l) of 8 statistics (try $try)" >&2
  done
  "$GGTRAIN" eval -m "$q.gguf" --text calib.txt -c 64 --cache-type f32 -t 2 --kl-divergence k256/weights/latest \
    >"ours-$q-kld.log" || { cat "ours-$q-kld.log" >&2; fail "ggtrain eval --kl-divergence on $q failed"; }
  stats <"ours-$q-kld.log" >ours.stats
  stats <"theirs-$q-kld.log" >theirs.stats
  [[ $(wc -l <theirs.stats) -eq 8 && $(wc -l <ours.stats) -eq 8 ]] ||
    fail "$q: expected 8 statistics from each side; ours: $(cat ours.stats) theirs: $(cat theirs.stats)"
  # Each statistic within 1% relative (or 1e-4 absolute for values near
  # zero) of llama-perplexity's: both sides' logits differ by float noise
  # (median ~1e-6, llama_cpp_quantize_check.sh), which moves a base
  # log-probability across a 16-bit step now and then. Measured: the
  # maximum KLD 0.2% apart, the others within their printed digits.
  paste ours.stats theirs.stats | awk -F'\t' -v q="$q" '
    { d = $2 - $4; if (d < 0) d = -d; m = ($4 < 0 ? -$4 : $4)
      if (!($2 == $2 + 0 && $4 == $4 + 0) || d > 0.01 * m && d > 1e-4) { print q ": " $1 " " $2 " against " $4 > "/dev/stderr"; bad = 1 }
      else printf "%s %s %s (llama-perplexity %s); ", q, $1, $2, $4 }
    END { print ""; exit bad }' || fail "$q: KL divergence statistics differ from llama-perplexity's"
done
# The base files cross over: ggtrain reads llama-perplexity's base.kld (its
# tokens and 16-bit log-probabilities), and llama-perplexity reads the one
# ggtrain writes (the same header and tokens byte for byte; the rows differ
# where float noise moves a step); each side's statistics within the limit
# above of the other's.
within() { # OURS.log THEIRS.log WHAT
  paste <(stats <"$1") <(stats <"$2") | awk -F'\t' -v w="$3" '
    { d = $2 - $4; if (d < 0) d = -d; m = ($4 < 0 ? -$4 : $4)
      if (!($2 == $2 + 0 && $4 == $4 + 0) || d > 0.01 * m && d > 1e-4) { print w ": " $1 " " $2 " against " $4 > "/dev/stderr"; bad = 1 } }
    END { exit bad || NR != 8 }'
}
"$GGTRAIN" eval -m k256-q4_k_m.gguf --kl-divergence base.kld --cache-type f32 -t 2 >ours-from-theirs.log ||
  { cat ours-from-theirs.log >&2; fail "ggtrain eval --kl-divergence base.kld failed"; }
within ours-from-theirs.log theirs-k256-q4_k_m-kld.log "ggtrain on llama-perplexity's base file" ||
  fail "ggtrain's statistics on llama-perplexity's base file differ from llama-perplexity's"
"$GGTRAIN" eval -m k256/weights/latest --text calib.txt -c 64 --cache-type f32 -t 2 --kl-divergence-base ours.kld \
  >/dev/null || fail "ggtrain eval --kl-divergence-base failed"
header=$((20 + 4 * 64 * $(( $(od -An -t d4 -j 16 -N 4 ours.kld) ))))
cmp -n "$header" ours.kld base.kld || fail "ggtrain's base file header or tokens differ from llama-perplexity's"
for try in 1 2 3; do
  "${LLAMA_PPL[@]}" -m k256-q4_k_m.gguf --kl-divergence-base ours.kld --kl-divergence >theirs-from-ours.log 2>&1 ||
    { tail -20 theirs-from-ours.log >&2; fail "llama-perplexity on ggtrain's base file failed"; }
  [[ $(stats <theirs-from-ours.log | wc -l) -eq 8 ]] && break
done
within ours-k256-q4_k_m-kld.log theirs-from-ours.log "llama-perplexity on ggtrain's base file" ||
  fail "llama-perplexity's statistics on ggtrain's base file differ from ggtrain's"
echo "base files: ggtrain reads llama-perplexity's and llama-perplexity reads ggtrain's (same header and tokens), statistics within the limit"
# Control: the two Q4_K_M files (with and without the matrix) must be told
# apart: their mean KLDs differ by more than the limit.
paste <(stats <ours-k256-q4_k_m-kld.log) <(stats <theirs-k256-q4_k_m-imatrix-kld.log) |
  awk -F'\t' '$1 ~ /Mean    KLD/ { d = $2 - $4; if (d < 0) d = -d; exit !(d > 0.01 * $4) }' ||
  fail "control: the mean KLD of Q4_K_M with and without the importance matrix are within the limit"
echo "control: Q4_K_M's mean KLD with and without the importance matrix differ by more than the limit"
echo "llama_cpp_imatrix_check: PASS"
