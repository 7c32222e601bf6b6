#!/usr/bin/env bash
# Quantized export against llama.cpp's own quantizer and inference:
#   1. `ggtrain export --type T` is byte-identical to what llama.cpp's
#      llama_model_quantize writes from the same F32 checkpoint, for every
#      file type ggtrain offers (the float ones, F32, F16 and BF16, too:
#      weights converted, 1-D tensors kept, llama.cpp's tensor order and
#      keys), on two models: one whose rows are multiples
#      of 256 (the K-quants proper, tied embeddings: token_embd gets the
#      output's Q6_K; 8 layers, so the _M/_S mixes raise some attn_v and
#      ffn_down), one whose rows are not (llama.cpp's 32-block fallbacks:
#      Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0); and the same for a qwen3,
#      a gemma3, a qwen2, an lfm2, a qwen35, a qwen3moe, an olmoe and a qwen35moe model
#      (per-architecture identity; their quantized logits
#      against llama.cpp are llama_cpp_arch_check.sh's).
#   2. ggtrain's logits on each quantized file follow llama.cpp's on the
#      same file (limits below, with why).
# The reference quantizer is a C API harness (tests/compat/llama_quantize.cpp)
# built here against node-llama-cpp's prebuilt libllama and the llama.h of
# the release it ships (node-llama-cpp/llama/gitRelease.bundle).
#
#   tests/compat/llama_cpp_quantize_check.sh PATH/TO/ggtrain
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 PATH/TO/ggtrain" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
NODE_DIR="$HERE/node"
CLI="$NODE_DIR/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_quantize_check: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
[[ -d "$NODE_DIR/node_modules/node-llama-cpp" ]] || fail "run npm ci in tests/node (see scripts/test.sh)"
source "$HERE/support/llama_cpp_logits.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
use_gguf_py
build_llama_quantize

bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
"$GGTRAIN" train --preset tiny --run-dir small --set data.corpus=corpus.txt --set train.steps=60 \
  --set train.threads=1 --quiet
"$GGTRAIN" train --preset tiny --run-dir k256 --set data.corpus=corpus.txt --set train.steps=30 \
  --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 --set model.tied=true \
  --set train.threads=2 --quiet
# The other architectures: llama.cpp's recipe has no branch for them, but it
# reads their shapes (grouped-query heads, head size != d_model / n_heads,
# tied heads) and the file keeps their keys and extra tensors (head norms,
# post-norms, projection biases) in order: qwen3 with K-quant rows and 4
# query heads per KV head, gemma3 with 32-block fallbacks and sliding-window
# layers, qwen2 with its biases, smollm3 (llama's tensors under its own
# architecture name) with K-quant rows, lfm2 with short-convolution layers
# (their kernels stay F32; in_proj and out_proj quantize) and attn_v on two
# layers of four (the _M mixes count attn_v tensors, not layers), qwen35
# with Gated DeltaNet layers (ssm_conv1d stays F32; attn_qkv counts as
# attn_v in the _M mixes; attn_gate, ssm_beta, ssm_alpha, ssm_out quantize)
# and gated attention on layers 1 and 3; qwen3moe with exactly 8 experts
# (llama.cpp then raises attn_k and attn_v to Q8_0 and attn_output to Q5_K
# in the Q4_K mixes; the stacked ffn_down_exps follow the ffn_down mix by
# layer; the routers ffn_gate_inp stay F32), olmoe with 6 experts whose
# rows of 128 take the 32-block fallbacks, and qwen35moe with 4 experts and
# a shared expert (two ffn_down tensors a layer: llama.cpp places each by its
# layer's name, not by count).
"$GGTRAIN" train --preset tiny --run-dir qwen3 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=qwen3 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 --set model.n_heads=8 \
  --set model.n_kv_heads=2 --set model.head_dim=64 --set model.tied=true --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir gemma3 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=gemma3 --set model.n_layers=4 --set model.head_dim=32 --set model.sliding_window=16 \
  --set model.swa_pattern=2 --set model.tied=true --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir qwen2 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=qwen2 --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir smollm3 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=smollm3 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=4 \
  --set model.tied=true --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir lfm2 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=lfm2 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=4 \
  --set model.attention_layers=1,3 --set model.tied=true --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir qwen35 --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=qwen35 --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=4 \
  --set model.attention_layers=1,3 --set model.rope_dim=16 --set model.ssm_state_size=64 \
  --set model.ssm_group_count=2 --set model.ssm_time_step_rank=4 --set model.tied=true --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir qwen3moe --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=qwen3moe --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 \
  --set model.n_experts=8 --set model.n_experts_used=2 --set model.d_ff_expert=256 --set model.tied=true \
  --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir olmoe --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=olmoe --set model.d_model=256 --set model.d_ff=128 --set model.n_layers=4 --set model.n_kv_heads=4 \
  --set model.n_experts=6 --set model.n_experts_used=2 --set train.threads=2 --quiet
"$GGTRAIN" train --preset tiny --run-dir qwen35moe --set data.corpus=corpus.txt --set train.steps=10 \
  --set model.arch=qwen35moe --set model.d_model=256 --set model.d_ff=768 --set model.n_layers=8 \
  --set model.attention_layers=3,7 --set model.rope_dim=16 --set model.ssm_state_size=64 \
  --set model.ssm_group_count=2 --set model.ssm_time_step_rank=4 --set model.n_experts=4 --set model.n_experts_used=2 \
  --set model.d_ff_expert=256 --set model.d_ff_shared=512 --set model.tied=true --set train.threads=2 --quiet
echo "In the beginning God created the heaven and the earth." >prompt.txt
ids="1,$("$GGTRAIN" tokenize -m small/weights/latest --lines prompt.txt)"

# llama_ftype numbers of the file types ggtrain offers
declare -A FTYPE=([f32]=0 [f16]=1 [bf16]=32 [q4_0]=2 [q8_0]=7 [q5_0]=8 [q5_1]=9 [q4_k_s]=14 [q4_k_m]=15 [q5_k_s]=16 [q5_k_m]=17 [q6_k]=18)
for model in k256 small qwen3 gemma3 qwen2 smollm3 lfm2 qwen35 qwen3moe olmoe qwen35moe; do
  M=$model/weights/latest
  for type in f32 f16 bf16 q4_0 q5_0 q5_1 q8_0 q4_k_s q4_k_m q5_k_s q5_k_m q6_k; do
    ./llama_quantize "$M" "theirs-$model-$type.gguf" "${FTYPE[$type]}" >/dev/null 2>"quantize-$model-$type.log" ||
      { cat "quantize-$model-$type.log" >&2; fail "llama_model_quantize $type failed"; }
    "$GGTRAIN" export "$M" "ours-$model-$type.gguf" --type "$type" >/dev/null
    cmp "ours-$model-$type.gguf" "theirs-$model-$type.gguf" ||
      fail "$model $type: ggtrain's file differs from llama_model_quantize's"
    echo "$model $type: byte-identical to llama_model_quantize ($(stat -c %s "ours-$model-$type.gguf") bytes)"
  done
done

# 2. logits on the quantized files. Both sides dequantize the same weights;
# the activations are rounded to the weight's dot type (Q8_0 for the 32-block
# types, Q8_K for the K-quants) on both sides, but ggml sums the integer
# products per block in another order than our float GEMM on dequantized
# rows, so an activation near a rounding step can land on the other side:
# the same max limit as Q8_0's in llama_cpp_export_check.sh (3e-2). The
# median difference is ~1e-6 (measured 2.4e-7 to 1.9e-6 per type and model),
# limit 1e-5; Q5_1 (dot type Q8_1, whose block sums ggml rounds to fp16 on
# their own) measured 2.7e-5 on the k256 model, limit 1e-4 (5e-4 when that
# sum's rounding was left out).
for model in k256 small; do
  for spec in q4_0:1e-5 q5_1:1e-4 q4_k_m:1e-5 q5_k_m:1e-5 q6_k:1e-5; do
    type=${spec%%:*} median=${spec#*:}
    f="ours-$model-$type.gguf"
    # --cache-type f32 here and below: the llama.cpp side keeps its K/V cache in F32.
    "$GGTRAIN" eval --cache-type f32 -m "$f" --tokens "$ids" --dump-logits "ours-$model-$type.f32" >/dev/null
    node "$CLI" logits "$f" "$ids" "theirs-$model-$type.f32" 2>/dev/null
    echo -n "$model $type logits: "
    node "$CLI" compare "ours-$model-$type.f32" "theirs-$model-$type.f32" 3e-2 "$median" ||
      fail "$model $type logits differ from llama.cpp's"
  done
done
echo "llama_cpp_quantize_check: PASS"
