// A multiple-choice task file in llama-perplexity's binary --multiple-choice
// form (as the ARC/MMLU/TruthfulQA files are written), from a task file in
// its six-line HellaSwag form: task i keeps 2 + i % 3 of its four endings
// (the right one among them, in their order), so that tasks have two,
// three and four answers; the second answer list (several right answers)
// is left empty.
//
//   node scripts/make_choice_file.mjs IN.hellaswag OUT.bin
import fs from "node:fs";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node scripts/make_choice_file.mjs IN.hellaswag OUT.bin");
  process.exit(2);
}
const lines = fs.readFileSync(input, "utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
if (lines.length % 6 !== 0) throw new Error(`${input}: ${lines.length} lines, not six per task`);

const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
const str = (s) => { const t = Buffer.from(s, "utf8"); return Buffer.concat([u32(t.length), t]); };
const tasks = [];
for (let t = 0; t < lines.length / 6; t++) {
  const [context, gold, ...endings] = lines.slice(6 * t, 6 * t + 6);
  const keep = 2 + (t % 3);
  const kept = [];
  for (let e = 0; e < 4 && kept.length < keep; e++)
    if (e === Number(gold) || kept.length + (Number(gold) > e ? 1 : 0) < keep) kept.push(e);
  const parts = [str(context), u32(kept.length), ...kept.map((e) => str(endings[e])),
                 ...kept.map((e) => u32(e === Number(gold) ? 1 : 0)), u32(0)];
  tasks.push(Buffer.concat(parts));
}
const header = 4 + 4 * tasks.length;
const positions = [];
let at = header;
for (const t of tasks) { positions.push(u32(at)); at += t.length; }
fs.writeFileSync(output, Buffer.concat([u32(tasks.length), ...positions, ...tasks]));
console.log(`${output}: ${tasks.length} tasks`);
