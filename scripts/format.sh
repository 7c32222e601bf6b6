#!/usr/bin/env bash
# Formats every C++ file git tracks as .clang-format says, with clang-format
# 14 (Debian 12's; scripts/setup.sh installs it with the tests). The CTest
# format_check fails on any file this would change.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format-14 >/dev/null || { echo "format.sh: clang-format-14 is not installed (apt install clang-format-14)" >&2; exit 1; }
git ls-files -z '*.cpp' '*.h' | xargs -0 clang-format-14 -i
