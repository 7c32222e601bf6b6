# Sourced by the CLI checks that train a tiny model (resume_check.sh,
# generate_check.sh): fox_corpus FILE writes the 400-line text they train on.
# Its measured numbers (generate_check's logit limit and control) are for
# this text.
fox_corpus() {
  local i
  for i in $(seq 1 400); do echo "line $i: the $((i % 7)) quick brown foxes jump over $((i % 13)) lazy dogs."; done > "$1"
}
