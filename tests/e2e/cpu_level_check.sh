#!/usr/bin/env bash
# The portable build's launcher and programs (src/util/cpu_level.h):
# - `ggtrain --version` names the level it started, the highest this CPU
#   runs unless GGTRAIN_CPU names one; each level this CPU runs starts;
# - each level's oneDNN runs that level's instruction set (SSE4.1 for v2,
#   AVX2 for v3), and ONEDNN_MAX_CPU_ISA set by the user wins;
# - a level the build lacks, or one this CPU cannot run, is one clear error;
# - each level's program holds no instruction of a higher level: v2 no
#   AVX (ymm/zmm registers), v3 no AVX-512 (zmm, k masks), v4 some AVX-512.
#
#   tests/e2e/cpu_level_check.sh BUILD/src/ggtrain
set -euo pipefail
bin=$1
dir=$(dirname "$bin")
fail() { echo "cpu_level_check: $*"; exit 1; }

if [[ ! -x $dir/ggtrain-v2 ]]; then
  v=$("$bin" --version)
  [[ $v == *"CPU level native"* || $v == *"CPU level generic"* ]] || fail "a one-level build says: $v"
  echo "cpu_level_check: one-level build ($v); no launcher to check"
  exit 0
fi

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
runnable=(v2)
has avx2 fma f16c bmi2 && runnable+=(v3)
has avx512f avx512bw avx512cd avx512dq avx512vl avx512_vnni avx512_bf16 && runnable+=(v4)
best=${runnable[-1]}

v=$("$bin" --version)
[[ $v == *"CPU level $best "* ]] || fail "default level: expected $best, got: $v"
declare -A onednn=([v2]=sse41 [v3]=avx2)
for level in "${runnable[@]}"; do
  v=$(GGTRAIN_CPU=$level "$bin" --version)
  [[ $v == *"CPU level $level "* ]] || fail "GGTRAIN_CPU=$level started: $v"
  want=${onednn[$level]:-avx512_core}
  [[ $v == *"oneDNN ISA $want"* ]] || fail "GGTRAIN_CPU=$level: oneDNN should run $want: $v"
done
v=$(GGTRAIN_CPU=v3 ONEDNN_MAX_CPU_ISA=SSE41 "$bin" --version)
[[ $v == *"oneDNN ISA sse41"* ]] || fail "ONEDNN_MAX_CPU_ISA=SSE41 was not kept: $v"
out=$(GGTRAIN_CPU=v9 "$bin" --version 2>&1) && fail "GGTRAIN_CPU=v9 started"
[[ $out == "ggtrain: error: GGTRAIN_CPU=v9 is not a level of this build (v2,v3,v4)" ]] || fail "GGTRAIN_CPU=v9: $out"

# The instructions each program holds (ggtrain's own code: oneDNN, OpenMP and
# the C++ runtime are shared libraries with their own dispatch).
count() { objdump -d --no-show-raw-insn "$dir/ggtrain-$1" | grep -cE "$2" || true; }
n=$(count v2 '%[yz]mm'); (( n == 0 )) || fail "ggtrain-v2 holds $n AVX instructions"
n=$(count v3 '%zmm|%k[0-7]'); (( n == 0 )) || fail "ggtrain-v3 holds $n AVX-512 instructions"
n=$(count v3 '%ymm'); (( n > 1000 )) || fail "ggtrain-v3 holds only $n AVX2 instructions"
n=$(count v4 'vpdpbusd'); (( n > 0 )) || fail "ggtrain-v4 holds no VNNI dot product"
n=$(count v4 'vdpbf16ps'); (( n > 0 )) || fail "ggtrain-v4 holds no BF16 dot product"
echo "cpu_level_check: levels ${runnable[*]} start (default $best); each program and its oneDNN within its level"
