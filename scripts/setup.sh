#!/usr/bin/env bash
# Installs what ggtrain needs from Debian's packages (only what is missing)
# and builds it into build/. Safe and fast to re-run.
#
#   bash scripts/setup.sh [TARGET ...]    default: every target (tests, benchmarks)
#
# scripts/run.sh builds only `ggtrain`; scripts/test.sh builds everything with
# MPI required (GGTRAIN_MPI=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

# libdnnl-dev's CMake config calls find_package(OpenCL) (Debian builds oneDNN
# with the OpenCL GPU runtime) but the package only *recommends*
# ocl-icd-opencl-dev, which --no-install-recommends leaves out: name it.
# zlib, zstd and simdjson read compressed and JSONL corpora.
PACKAGES=(build-essential cmake pkg-config libdnnl-dev ocl-icd-opencl-dev libfmt-dev
          nlohmann-json3-dev libcli11-dev libgtest-dev libsentencepiece-dev
          libtomlplusplus-dev libicu-dev zlib1g-dev libzstd-dev libsimdjson-dev bible-kjv)
# Data-parallel training (`mpirun -np N ggtrain train`): Open MPI. Optional
# for the build (without it, or with cmake -DGGTRAIN_MPI=OFF, ggtrain trains
# in one process); the tests' two-host check also uses `ip` (iproute2).
PACKAGES+=(libopenmpi-dev openmpi-bin iproute2)
# The llama.cpp checks (tests/*.sh, label npm): node-llama-cpp's prebuilt
# llama.cpp; git reads llama.h from the source bundle it ships.
if [[ "${GGTRAIN_WITH_NODE:-0}" == 1 ]]; then PACKAGES+=(nodejs npm git); fi
# The tests render the loss plot to PNG (tests/e2e/test_loss_plot.cpp) with
# librsvg's rsvg-convert. Not needed to build or train.
# ccache: the test run builds a fresh tree three times over (three CPU
# levels, then ASan); with it, sources unchanged since the last run are not
# compiled again (CMakeLists.txt uses it when installed).
# clang-format-14: the format check (tests/lint/format_check.sh).
# chromium: the dashboard's page is checked in a real browser
# (tests/compat/dashboard_check.sh, through the npm package playwright-core).
if [[ "${GGTRAIN_WITH_TESTS:-0}" == 1 ]]; then PACKAGES+=(librsvg2-bin python3-numpy ccache clang-format-14 chromium); fi
# The fuzz targets (fuzz/run.sh, run by scripts/test.sh): clang with
# libFuzzer and the sanitizer runtimes (llvm-14: llvm-symbolizer for readable
# reports). Not needed to build or train.
if [[ "${GGTRAIN_WITH_FUZZ:-0}" == 1 ]]; then PACKAGES+=(clang libclang-rt-14-dev llvm-14); fi
# The arm64 build tested under emulation (scripts/test_aarch64.sh): Debian's
# cross compiler and qemu-user; the arm64 libraries are unpacked into its
# build folder, not installed.
if [[ "${GGTRAIN_WITH_AARCH64:-0}" == 1 ]]; then PACKAGES+=(g++-aarch64-linux-gnu qemu-user); fi
# The clean-install check (scripts/check_clean_install.sh) builds a bare
# Debian 12 with debootstrap.
if [[ "${GGTRAIN_WITH_DEBOOTSTRAP:-0}" == 1 ]]; then PACKAGES+=(debootstrap); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm may come from outside Debian (e.g. preinstalled); accept those.
if [[ "${GGTRAIN_WITH_NODE:-0}" == 1 ]] && command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
if (( ${#missing[@]} )); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${GGTRAIN_BUILD_DIR:-build}
# Configure every time (a no-op when nothing changed): a build folder
# configured before a package was installed, or with other options, is
# brought up to date instead of silently keeping what it found then.
# GGTRAIN_CPU_LEVELS="v2;v4" builds the engine for those x86-64 levels only
# (default: v2, v3 and v4, and the launcher picks at run time).
levels=()
if [[ -n "${GGTRAIN_CPU_LEVELS:-}" ]]; then levels=(-DGGTRAIN_CPU_LEVELS="$GGTRAIN_CPU_LEVELS"); fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DGGTRAIN_MPI="${GGTRAIN_MPI:-AUTO}" "${levels[@]}" >/dev/null
if (( $# )); then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$@"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
