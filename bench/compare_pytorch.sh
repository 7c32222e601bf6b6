#!/usr/bin/env bash
# Trains the s15 model in PyTorch (Debian python3-torch, best settings found
# on this machine class) and in ggtrain, in one invocation, and prints
# tokens/s for each. Installs python3-torch when asked: --install.
# Usage: bench/compare_pytorch.sh [--install] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --install ]]; then
  shift
  # python3-torch uses whatever libblas.so.3 is installed: OpenBLAS, not the reference BLAS.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch \
    libopenblas0-pthread libopenblas-dev
fi
THREADS=${1:-2}
PY=/usr/bin/python3   # Debian's interpreter, the one python3-torch is built for
if ! $PY -c 'import torch' 2>/dev/null; then
  echo "python3-torch is not installed; run: bench/compare_pytorch.sh --install" >&2
  exit 1
fi
bash scripts/setup.sh   # builds bench_train (and bench_gemm with OpenBLAS when present)
cmake -S . -B build >/dev/null && cmake --build build -j "$(nproc)" --target bench_train bench_gemm >/dev/null
# PyTorch's best fp32 here: OpenBLAS without the environment's core override,
# OpenMP threads that do not spin against each other. In this command only.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
  $PY bench/pytorch_llama.py "$THREADS" fp32 | tee /tmp/ggtrain_cmp_pt.txt
$PY bench/pytorch_llama.py "$THREADS" fp32 | sed 's/fp32/fp32 (default env)/'
build/bench/bench_train "$THREADS" | tee /tmp/ggtrain_cmp_gg.txt
pt=$(grep -o '[0-9]* tokens/s' /tmp/ggtrain_cmp_pt.txt | head -1 | cut -d' ' -f1)
gg=$(grep -o '[0-9]* tokens/s' /tmp/ggtrain_cmp_gg.txt | head -1 | cut -d' ' -f1)
echo "ratio ggtrain / pytorch fp32 (best settings): $(awk -v a="$gg" -v b="$pt" 'BEGIN{printf "%.2f", a/b}')"
