#!/usr/bin/env bash
# Nothing in the repository reaches for a folder beside the clone. A user's
# clone has nothing beside it, so a test, script or build file that reads
# the developers' shared folder beside the clone (where the project's developers keep reference material) works
# for them and fails for everyone else. What the tests need lives in
# tests/fixtures/.
#
# usage: outside_path_lint.sh PROJECT_SOURCE_DIR
set -euo pipefail
root=${1:?usage: outside_path_lint.sh PROJECT_SOURCE_DIR}
# The parent folder's shared/ however it is reached (spelt here from $up, so
# this file does not match itself).
up=..
pattern='\.\./shared([/"'"'"'[:space:]}]|$)'
# The pattern's own controls.
must_flag=("set(D \"\${PROJECT_SOURCE_DIR}/$up/shared/fixtures\")" "F=\${X:-\$HERE/$up/$up/shared}" "cp -a $up/shared ."
           "SHARED=\$ROOT_DIR/$up/shared")
must_pass=("tests/fixtures/tiny-spm.gguf" "lib/shared_ptr.h" "src/$up/shared_state.cpp")
for line in "${must_flag[@]}"; do
  grep -qE "$pattern" <<<"$line" || { echo "outside_path_lint: the pattern misses: $line" >&2; exit 1; }
done
for line in "${must_pass[@]}"; do
  if grep -qE "$pattern" <<<"$line"; then echo "outside_path_lint: the pattern wrongly flags: $line" >&2; exit 1; fi
done

cd "$root"
files=()
for d in src tests scripts fuzz bench docs cmake .ci; do
  [[ -d $d ]] && while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$d" -path tests/node/node_modules -prune -o \
    -type f ! -path 'tests/fixtures/*' ! -path tests/lint/outside_path_lint.sh -print0)
done
for f in CMakeLists.txt README.md; do [[ -f $f ]] && files+=("$f"); done
hits=$(grep -nIE "$pattern" "${files[@]}" || true)
if [[ -n $hits ]]; then
  echo "$hits"
  echo "outside_path_lint: the lines above point at the shared folder beside the clone, which a user's clone does not have; put what the tests need in tests/fixtures/" >&2
  exit 1
fi
echo "outside_path_lint: ${#files[@]} files, none points outside the clone"
