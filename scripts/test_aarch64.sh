#!/usr/bin/env bash
# ggtrain for 64-bit ARM Linux, built on this x86-64 machine and tested under
# qemu-user: Debian's cross compiler (g++-aarch64-linux-gnu), the arm64
# packages of the libraries (scripts/aarch64_sysroot.sh) and
# cmake/aarch64-linux-gnu.cmake, into build-aarch64/. CTest then runs the
# kernel, decoder, reference and quantization suites, exact resume and a
# generation compared with this machine's own build, all under the emulator
# (tests/CMakeLists.txt says which and why). scripts/test.sh runs it.
#
#   bash scripts/test_aarch64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true

# The host packages (cross compiler, qemu-user), and ggtrain for this
# machine: generate_check's reference.
GGTRAIN_WITH_AARCH64=1 bash scripts/setup.sh ggtrain
bash scripts/aarch64_sysroot.sh build-aarch64/sysroot
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DGGTRAIN_AARCH64_SYSROOT="$PWD/build-aarch64/sysroot" -DGGTRAIN_HOST_PROGRAM="$PWD/build/src/ggtrain" \
  -DGGTRAIN_MPI=OFF -DGGTRAIN_BUILD_BENCH=OFF >/dev/null
cmake --build build-aarch64 -j "$(nproc)"
readelf -h build-aarch64/src/ggtrain | grep -q 'Machine: *AArch64' || { echo "test_aarch64: build-aarch64/src/ggtrain is not an arm64 program" >&2; exit 1; }

# In CI (CI=true) a skipped test fails, as in the main suite.
ctest --test-dir build-aarch64 --output-on-failure -j "$(nproc)" --timeout 1800
n=$(ctest --test-dir build-aarch64 -N | sed -n 's/^Total Tests: //p')
if [[ -z $n || $n -lt 100 ]]; then
  echo "test_aarch64: only ${n:-no} tests were defined for arm64" >&2
  exit 1
fi
cpu=$(sed -n 's/^GGTRAIN_QEMU_CPU:STRING=//p' build-aarch64/CMakeCache.txt)
echo "test_aarch64: $n tests passed on arm64 ($cpu under qemu-aarch64 $(qemu-aarch64 --version | sed -n '1s/.*version \([^ ]*\).*/\1/p'))"
