#!/usr/bin/env bash
# The folders of src/ form layers, each one using only the ones below it:
# every `#include "FOLDER/..."` must name the folder itself or a lower one.
# A newcomer reads the tree bottom up; an include that points up (or a
# cycle, which needs one) fails here naming the file and the line.
#
#   tests/lint/layering_check.sh SRC_DIR
set -euo pipefail
src=${1:?usage: layering_check.sh SRC_DIR}
# Bottom to top.
layers=(util kernels gguf quant nn tokenizer corpus model convert optim parallel infer chat eval train dashboard cli)

declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done

bad=0
for dir in "$src"/*/; do
  folder=$(basename "$dir")
  if [[ -z ${rank[$folder]+x} ]]; then
    echo "layering_check: src/$folder is in no layer: add it to the list in $0" >&2
    bad=1
    continue
  fi
  while IFS=: read -r file line text; do
    used=$(sed -E 's/^#include "([a-z_]+)\/.*/\1/' <<<"$text")
    if [[ -z ${rank[$used]+x} ]]; then
      echo "layering_check: ${file#"$src"/}:$line includes from '$used', which is in no layer" >&2
      bad=1
    elif (( rank[$used] > rank[$folder] )); then
      echo "layering_check: ${file#"$src"/}:$line: $folder/ (layer ${rank[$folder]}) includes $used/ (layer ${rank[$used]}), above it: $text" >&2
      bad=1
    fi
  done < <(grep -rnE --include='*.h' --include='*.cpp' '^#include "[a-z_]+/' "$dir" || true)
done
(( bad == 0 )) || exit 1
echo "layering_check: every include in $src points to its own layer or one below (${layers[*]})"
