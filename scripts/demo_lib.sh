# Shared by the chat and preference demonstrations (sourced, not run).

# replies.jsonl (from `ggtrain chat --json`), answers.txt -> "R of N right (P%), S stopped by themselves"
accuracy() {
  node -e '
    const fs = require("fs");
    const replies = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
    const answers = fs.readFileSync(process.argv[2], "utf8").trim().split("\n");
    let right = 0, stopped = 0;
    replies.forEach((r, i) => { if (r.reply.trim() === answers[i]) right++; if (r.stopped) stopped++; });
    console.log(`${right} of ${replies.length} right (${(100 * right / replies.length).toFixed(1)}%), ` +
                `${stopped} stopped by themselves`);' "$1" "$2"
}

# model.gguf, prompts.txt, ggtrain's replies.jsonl, label: llama.cpp's greedy
# replies (node-llama-cpp, the GGUF's own template): how many stop by
# themselves, and how many are ggtrain's tokens.
llama_cpp_replies() {
  if [[ ! -d tests/node/node_modules/node-llama-cpp ]]; then
    echo "llama.cpp: tests/node is not installed (scripts/test.sh installs it); skipped"
    return
  fi
  local out
  out=$(mktemp)
  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node tests/node/chat_check.mjs chat "$1" "$2" 16 >"$out"
  node -e '
    const fs = require("fs");
    const l = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
    const g = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(JSON.parse);
    const stopped = l.filter((r) => r.stopped).length;
    const same = l.filter((r, i) => r.ids.join() === g[i].ids.join()).length;
    console.log(`llama.cpp${process.argv[3]}: ${stopped} of ${l.length} replies stopped by themselves ` +
                `(${(100 * stopped / l.length).toFixed(1)}%); ${same} of ${l.length} identical to ggtrain chat`);' \
    "$out" "$3" "$4"
  rm -f "$out"
}
