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
      # The OpenMP build of OpenBLAS and tcmalloc are for pytorch() below only (the
      # system's libblas.so.3 stays the pthread one: its alternative has the higher priority).
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch \
        libopenblas0-pthread libopenblas-dev libopenblas0-openmp libtcmalloc-minimal4 ;;
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
LIBS=/usr/lib/x86_64-linux-gnu
OPENBLAS_OMP=$LIBS/openblas-openmp TCMALLOC=$LIBS/libtcmalloc_minimal.so.4
if ! $PY -c 'import torch' 2>/dev/null || [[ ! -e $OPENBLAS_OMP/libblas.so.3 || ! -e $TCMALLOC ]]; then
  echo "python3-torch, libopenblas0-openmp or libtcmalloc-minimal4 is missing; run: bench/compare_pytorch.sh --install" >&2
  exit 1
fi
BUILD_DIR=${BUILD_DIR:-build}
[[ -d "$BUILD_DIR" ]] || bash scripts/setup.sh
cmake -S . -B "$BUILD_DIR" >/dev/null && cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_train >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "compare_pytorch: $PRESET, $THREADS thread(s), $REPEAT round(s); load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# PyTorch's best settings here (measured, bench/results.md), in this command only:
# - OpenBLAS built for OpenMP: its GEMMs run on PyTorch's own OpenMP threads (the
#   pthread build keeps a second pool that fights them; PASSIVE only softened that);
# - OpenBLAS's own core detection (Cooperlake kernels, AVX-512) instead of the
#   environment's OPENBLAS_CORETYPE=Haswell and OPENBLAS_L2_SIZE;
# - tcmalloc: glibc maps large tensors (the 32 MiB logits always, smaller ones until
#   its threshold adapts) fresh from the kernel and unmaps them on free, and this VM's
#   page faults cost ~5 us per 4 KiB page (logits GEMM + cross_entropy forward and
#   backward: 333 ms with glibc, 59 ms with tcmalloc);
# - ATen's AVX-512 kernels for the elementwise ops (1.13 picks AVX2 by default).
pytorch() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY LD_LIBRARY_PATH="$OPENBLAS_OMP" \
    LD_PRELOAD="$TCMALLOC" ATEN_CPU_CAPABILITY=avx512 \
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
