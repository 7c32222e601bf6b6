#!/usr/bin/env bash
# Exact resume through the CLI, at 1 and at 2 threads, for the program
# GGTRAIN_CPU selects (CTest runs it for each CPU level): a tiny run of 24
# steps stopped after step 12 and resumed must start its second process at
# step 12 (from its own output) and end with the same weights as the run at the same
# thread count that was never stopped: the logits both final checkpoints
# give are the same bytes. The same with train.precision = "bf16" (fp32
# master weights, bf16 GEMMs), and for an lfm2 model (a short-convolution
# layer beside an attention layer) and a qwen35 one in bf16 (a Gated
# DeltaNet layer beside a gated attention layer), and a qwen3moe one (4
# experts, 2 a token, with the load-balancing loss), and a LoRA adapter
# trained on the first run's model.
# Controls, with teeth: the same resume from step 12, each losing one piece
# of its state on purpose (GGTRAIN_INJECT_BROKEN_RESUME: the data position,
# either AdamW moment, AdamW's update count, the learning-rate schedule's
# position, the master weights kept only to bf16, the LoRA adapter), must
# each give other final logits. What they test (the check and the state a
# resume restores) is the same on every CPU, so the runs for the other
# levels and for arm64 under its emulator leave them out (--without-controls):
# they are a quarter of the check's runs, minutes under the emulator.
# --steps N (a multiple of 4, 8 or more; default 24) makes every run N steps,
# checkpointed every N/4 and stopped at N/2: arm64 runs 8, since each step
# costs about 0.5 s under the emulator and the resume is the same at any step.
#
#   tests/e2e/resume_check.sh PATH/TO/ggtrain [--without-controls] [--steps N]
set -euo pipefail
source "$(cd "$(dirname "$0")/.." && pwd)/support/fox_corpus.sh"
bin=$(realpath "$1")
shift
controls=all steps=24
while (( $# )); do
  case $1 in
    --without-controls) controls=none ;;
    --steps) steps=${2:-}; shift ;;
    *) echo "resume_check: unknown option '$1' (the options: --without-controls, --steps N)"; exit 2 ;;
  esac
  shift
done
if [[ ! $steps =~ ^[0-9]+$ ]] || (( steps < 8 || steps % 4 )); then
  echo "resume_check: --steps takes a multiple of 4 from 8 on, not '$steps'"; exit 2
fi
half=$((steps / 2)) every=$((steps / 4))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "resume_check: $*"; exit 1; }

fox_corpus corpus.txt
ids=1,5,9,13,17,21,25,29,33,37
for run_case in 1:fp32:llama 2:fp32:llama 2:bf16:llama 2:fp32:lfm2 2:bf16:qwen35 2:fp32:qwen3moe 2:fp32:lora; do
  IFS=: read -r threads precision arch <<<"$run_case"
  args=(--preset tiny --set data.corpus=corpus.txt --set train.steps=$steps --set "train.threads=$threads"
        --set checkpoint.every=$every --set "train.precision=$precision")
  if [[ $arch == lora ]]; then  # a LoRA adapter on the first run's model
    args+=(--set init.from=whole-1-fp32-llama/weights/step_$steps.gguf --set train.lora.rank=4 --set train.lr_max=1e-2)
  else
    args+=(--set "model.arch=$arch")
  fi
  [[ $arch != lfm2 ]] || args+=(--set model.attention_layers=1)
  [[ $arch != qwen35 ]] || args+=(--set model.attention_layers=1 --set model.rope_dim=8 --set model.ssm_state_size=16
                                  --set model.ssm_group_count=2 --set model.ssm_time_step_rank=4)
  [[ $arch != qwen3moe ]] || args+=(--set model.n_experts=4 --set model.n_experts_used=2 --set model.d_ff_expert=48)
  whole=whole-$threads-$precision-$arch cut=cut-$threads-$precision-$arch
  "$bin" train "${args[@]}" --run-dir "$whole" --quiet > whole.out 2>&1 || { cat whole.out; fail "the whole run failed"; }
  "$bin" train "${args[@]}" --run-dir "$cut" --stop-at $half > cut.out 2>&1 || { cat cut.out; fail "the first part failed"; }
  grep -q "stopped after step $half/$steps (--stop-at)" cut.out || { cat cut.out; fail "the first part did not stop at step $half"; }
  cp -a "$cut" "$cut-at-$half"  # the controls resume from here
  "$bin" train --resume --run-dir "$cut" > resumed.out 2>&1 || { cat resumed.out; fail "the resumed part failed"; }
  grep -q "^resuming run [0-9a-f]* at step $half$" resumed.out ||
    { cat resumed.out; fail "the resumed process did not start at step $half"; }
  grep -q "^trained steps $half\.\.$steps:" resumed.out ||
    { cat resumed.out; fail "the resumed process did not train steps $half..$steps"; }
  for run in "$whole" "$cut"; do
    eval_args=(-m "$run/weights/step_$steps.gguf")  # a LoRA run's weights file is its adapter
    [[ $arch != lora ]] || eval_args=(-m "whole-1-fp32-llama/weights/step_$steps.gguf" --lora "$run/weights/step_$steps.gguf")
    "$bin" eval "${eval_args[@]}" --tokens "$ids" --dump-logits "$run.f32" > /dev/null
  done
  cmp -s "$whole.f32" "$cut.f32" ||
    fail "$threads thread(s), $precision, $arch: the resumed run's step-$steps logits differ from the uninterrupted run's"
done

# The controls, on the 2-thread fp32 run and the LoRA run.
control_list=(data:llama adam_m:llama adam_v:llama adam_step:llama schedule:llama master_bf16:llama lora:lora)
[[ $controls == all ]] || control_list=()
for control in "${control_list[@]}"; do
  IFS=: read -r piece arch <<<"$control"
  broken=broken-$piece
  cp -a "cut-2-fp32-$arch-at-$half" "$broken"
  GGTRAIN_INJECT_BROKEN_RESUME=$piece "$bin" train --resume --run-dir "$broken" > broken.out 2>&1 ||
    { cat broken.out; fail "the resume without its $piece failed to run"; }
  grep -q "injected: this resume loses its $piece" broken.out || { cat broken.out; fail "the $piece control was not injected"; }
  eval_args=(-m "$broken/weights/step_$steps.gguf")
  [[ $arch != lora ]] || eval_args=(-m "whole-1-fp32-llama/weights/step_$steps.gguf" --lora "$broken/weights/step_$steps.gguf")
  "$bin" eval "${eval_args[@]}" --tokens "$ids" --dump-logits "$broken.f32" > /dev/null
  if cmp -s "whole-2-fp32-$arch.f32" "$broken.f32"; then
    fail "control: a resume that lost its $piece ends with the uninterrupted run's logits: the check would not notice"
  fi
done
# `ggtrain verify`: the uninterrupted run's checkpoints are intact; with one
# bit of its last weights flipped, verify names that step and fails.
"$bin" verify whole-2-fp32-llama > verify.out || { cat verify.out; fail "verify fails on an intact run"; }
grep -q "^step $steps: intact" verify.out || { cat verify.out; fail "verify did not check step $steps's digests"; }
cp -a whole-2-fp32-llama damaged
last=$(($(stat -c %s "damaged/weights/step_$steps.gguf") - 1))
byte=$(od -An -tu1 -j "$last" -N1 "damaged/weights/step_$steps.gguf")
printf "\\x$(printf %02x $((byte ^ 1)))" | dd of="damaged/weights/step_$steps.gguf" bs=1 seek="$last" conv=notrunc status=none
if "$bin" verify damaged > verify.out; then cat verify.out; fail "verify passed a run whose step-$steps weights changed"; fi
grep -q "^step $steps: DAMAGED: .*step_$steps.gguf" verify.out || { cat verify.out; fail "verify did not name the damaged file"; }
grep -q "^step $((steps - every)): intact" verify.out ||
  { cat verify.out; fail "verify did not see step $((steps - every)) intact"; }
noticed="a resume losing its data position, AdamW m, v or update count, schedule position, fp32 master weights or LoRA adapter is noticed"
[[ $controls == all ]] || noticed="controls left out (--without-controls)"
echo "resume_check: $("$bin" --version): resumed at step $half of $steps (1 and 2 threads, fp32; 2 threads, bf16; lfm2; qwen35 bf16; qwen3moe; LoRA)," \
  "last logits identical; $noticed; verify finds the intact checkpoints and names a changed one"
