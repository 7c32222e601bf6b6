#!/usr/bin/env bash
# Corpus preparation: wall time and peak RSS of `ggtrain data
# prepare` on JSONL corpora of 100 MB, 1 GB and 4 GB (KJV verses joined into
# multi-line documents, numbered so no two are alike), the JSONL parser
# choice (bench_json), tokenizer throughput against libsentencepiece on the
# KJV and on Debian's own documentation (bench_tokenize), and the training's
# peak RSS with 1 shard vs many. Speed only; never run by the tests.
#
#   bash bench/data_prepare.sh [WORK_DIR]     (default /tmp/ggtrain-data-bench; needs ~12 GB)
#   SIZES_MB="100 1000" bash bench/data_prepare.sh
#   PARTS="tokenize" bash bench/data_prepare.sh   (any of: prepare json tokenize train)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/build/src/ggtrain
WORK=${1:-/tmp/ggtrain-data-bench}
SIZES_MB=${SIZES_MB:-"100 1000 4000"}
PARTS=" ${PARTS:-prepare json tokenize train} "
part() { [[ $PARTS == *" $1 "* ]]; }
mkdir -p "$WORK"
cmake --build build --target ggtrain bench_tokenize bench_json -j "$(nproc)" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) threads"

# Peak RSS (MiB) and wall seconds of a command, from GNU time.
measure() {
  local log=$WORK/time.log
  /usr/bin/time -f '%M %e' -o "$log" "$@" >/dev/null
  read -r kib secs < "$log"
  echo "$(( kib / 1024 )) MiB peak RSS, ${secs} s"
}

[[ -s $WORK/kjv.txt ]] || bible -f Gen1:1-Rev22:21 </dev/null | sed 's/^[^ ]* //' > "$WORK/kjv.txt"
[[ -s $WORK/kjv.model ]] || "$BIN" tokenizer train --input "$WORK/kjv.txt" --vocab 4096 --out "$WORK/kjv.model" >/dev/null

# JSONL of SIZE MB: documents of 5 verses (newlines inside), numbered.
make_jsonl() {
  local mb=$1 out=$WORK/corpus-${1}mb.jsonl
  [[ -s $out ]] && return
  awk -v limit=$(( mb * 1000000 )) '
    { v[n++] = $0; gsub(/\\/, "\\\\", v[n-1]); gsub(/"/, "\\\"", v[n-1]) }
    END {
      for (d = 0; bytes < limit; d++) {
        s = "{\"text\": \"document " d ":"
        for (k = 0; k < 5; k++) s = s "\\n" v[(d * 5 + k) % n]
        s = s "\"}"
        print s
        bytes += length(s) + 1
      }
    }' "$WORK/kjv.txt" > "$out.tmp" && mv "$out.tmp" "$out"
}

if part prepare; then
echo
echo "== ggtrain data prepare (s15 config, data.tokenizer = the KJV model, all threads) =="
for mb in $SIZES_MB; do
  make_jsonl "$mb"
  rm -rf "$WORK/run-$mb"
  echo "$mb MB JSONL: $(measure "$BIN" data prepare --quiet --preset s15 --out "$WORK/run-$mb" \
    --set data.corpus="$WORK/corpus-${mb}mb.jsonl" --set data.tokenizer="$WORK/kjv.model")"
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); t=m['totals']; print('   ', t['documents'], 'documents,', t['train_tokens'] + t['val_tokens'], 'tokens,', len(m['shards']), 'shard(s)')" "$WORK/run-$mb/data/manifest.json"
done
fi

if part json; then
echo
echo "== JSONL parser, 1 thread =="
make_jsonl 1000
build/bench/bench_json "$WORK/corpus-1000mb.jsonl"
fi

if part tokenize; then
echo
echo "== tokenizer throughput (same model, same text) =="
build/bench/bench_tokenize "$WORK/kjv.model" "$WORK/kjv.txt" 1 "$(nproc)"
# Real text no one here wrote: every Debian changelog on this machine.
if [[ ! -s $WORK/debian-docs.txt ]]; then
  find /usr/share/doc -name 'changelog*.gz' -print0 | sort -z | xargs -0 zcat -f 2>/dev/null > "$WORK/debian-docs.txt" || true
fi
build/bench/bench_tokenize "$WORK/kjv.model" "$WORK/debian-docs.txt" 1 "$(nproc)"
# A gpt2 (byte-level BPE) vocabulary of 4000 merges learned on the KJV
# (tests/make_bpe_vocab), ggtrain's encoder vs llama.cpp's (node-llama-cpp),
# one thread each, same lines.
if [[ -d tests/node/node_modules/node-llama-cpp ]]; then
  cmake --build build --target make_bpe_vocab -j "$(nproc)" >/dev/null
  [[ -s $WORK/gpt2-kjv.gguf ]] || build/tests/make_bpe_vocab vocab gpt-2 "$WORK/kjv.txt" 4000 "$WORK/gpt2-kjv.gguf" >/dev/null
  for text in kjv.txt debian-docs.txt; do
    build/bench/bench_tokenize "$WORK/gpt2-kjv.gguf" "$WORK/$text" 1
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node bench/llama_tokenize.mjs "$WORK/gpt2-kjv.gguf" "$WORK/$text"
  done
fi
fi

if part train; then
make_jsonl 100
echo
echo "== training peak RSS vs number of shards (s15, 30 steps on the 100 MB corpus) =="
for shard in 1000000000 1000000; do
  rm -rf "$WORK/train-$shard"
  sets=(--set data.corpus="$WORK/corpus-100mb.jsonl" --set data.tokenizer="$WORK/kjv.model"
        --set data.shard_tokens=$shard --set train.steps=30 --set train.eval_every=0 --set train.sample_every=0
        --set checkpoint.every=0)
  "$BIN" data prepare --quiet --preset s15 --out "$WORK/train-$shard" "${sets[@]}" >/dev/null  # not measured
  echo "data.shard_tokens=$shard: $(measure "$BIN" train --quiet --preset s15 --run-dir "$WORK/train-$shard" "${sets[@]}")"
  python3 -c "import json,sys; print('   ', len(json.load(open(sys.argv[1]))['shards']), 'shard(s)')" "$WORK/train-$shard/data/manifest.json"
done
fi
