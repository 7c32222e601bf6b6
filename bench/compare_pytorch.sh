#!/usr/bin/env bash
# Trains the same model in PyTorch (Debian python3-torch, best settings found
# on this machine class) and in ggtrain, in one invocation: PyTorch fp32,
# PyTorch bf16 autocast, ggtrain fp32 and ggtrain bf16, each in its own
# process (so peak RSS is that run's). Prints tokens/s, MFU (against the GEMM
# peak bench_train measures in the same invocation: sgemm for fp32, the bf16
# matmul for bf16), peak RSS, and the ggtrain / PyTorch ratios. With
# --repeat N the four runs go round N times, interleaved, and every ratio is
# printed, so the noise of a shared machine shows.
# Usage: bench/compare_pytorch.sh [--install] [--preset s15|smol135] [--repeat N] [THREADS]
#   THREADS defaults to 2 for s15 and 1 for smol135 (the issue's anchors).
#   BUILD_DIR (default build) is where bench_train is built.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=s15 REPEAT=1 THREADS=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --install)
      # python3-torch uses whatever libblas.so.3 is installed: OpenBLAS, not the reference BLAS.
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch \
        libopenblas0-pthread libopenblas-dev ;;
    --preset) PRESET=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    *) THREADS=$1 ;;
  esac
  shift
done
case "$PRESET" in
  s15) THREADS=${THREADS:-2}; PT_STEPS=8; GG_STEPS=8 ;;
  smol135) THREADS=${THREADS:-1}; PT_STEPS=3; GG_STEPS=3 ;;
  *) echo "unknown preset $PRESET (s15, smol135)" >&2; exit 1 ;;
esac
PY=/usr/bin/python3   # Debian's interpreter, the one python3-torch is built for
if ! $PY -c 'import torch' 2>/dev/null; then
  echo "python3-torch is not installed; run: bench/compare_pytorch.sh --install" >&2
  exit 1
fi
BUILD_DIR=${BUILD_DIR:-build}
[[ -d "$BUILD_DIR" ]] || bash scripts/setup.sh
cmake -S . -B "$BUILD_DIR" >/dev/null && cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_train >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "compare_pytorch: $PRESET, $THREADS thread(s), $REPEAT round(s); load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# PyTorch's best settings here: OpenBLAS without the environment's core
# override, OpenMP threads that do not spin against each other. In this command only.
pytorch() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
    $PY bench/pytorch_llama.py "$THREADS" "$1" "$PT_STEPS" "$PRESET"
}
ggtrain() {
  "$BUILD_DIR/bench/bench_train" --preset "$PRESET" --precision "$1" --steps "$GG_STEPS" "$THREADS"
}
tps() { grep -o '[0-9.]* tokens/s' "$1" | head -1 | cut -d' ' -f1; }
rss() { grep -o 'peak RSS [0-9]*' "$1" | head -1 | awk '{print $3}'; }
for r in $(seq 1 "$REPEAT"); do
  for p in fp32 bf16; do
    pytorch $p | tee "$OUT/pt_${p}_$r.txt"
    ggtrain $p | tee "$OUT/gg_${p}_$r.txt"
  done
done

# Model FLOPs per token and the GEMM peaks, from ggtrain's output.
FPT=$(grep -o '[0-9.]* MFLOP/token' "$OUT/gg_fp32_1.txt" | cut -d' ' -f1)
echo
echo "summary ($PRESET, $THREADS thread(s); MFU = model FLOPs (${FPT} MFLOP/token) x tokens/s / GEMM peak of the same round):"
printf '%-6s %-6s %-10s %10s %7s %10s\n' round prec framework tokens/s MFU "RSS MiB"
for r in $(seq 1 "$REPEAT"); do
  for p in fp32 bf16; do
    peak=$(grep -o 'of [0-9]* GFLOP/s' "$OUT/gg_${p}_$r.txt" | head -1 | awk '{print $2}')
    for f in pt gg; do
      t=$(tps "$OUT/${f}_${p}_$r.txt")
      printf '%-6s %-6s %-10s %10.1f %6.1f%% %10s\n' "$r" "$p" "$([[ $f == pt ]] && echo pytorch || echo ggtrain)" \
        "$t" "$(awk -v a="$FPT" -v t="$t" -v k="$peak" 'BEGIN{print 100*a*t/1e3/k}')" "$(rss "$OUT/${f}_${p}_$r.txt")"
    done
    printf '%-6s %-6s %-10s %9.2fx %7s %9.2fx\n' "$r" "$p" "ratio g/p" \
      "$(awk -v a="$(tps "$OUT/gg_${p}_$r.txt")" -v b="$(tps "$OUT/pt_${p}_$r.txt")" 'BEGIN{print a/b}')" "" \
      "$(awk -v a="$(rss "$OUT/gg_${p}_$r.txt")" -v b="$(rss "$OUT/pt_${p}_$r.txt")" 'BEGIN{print a/b}')"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
