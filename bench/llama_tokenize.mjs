// llama.cpp's tokenizer through node-llama-cpp (the prebuilt library in
// tests/node/node_modules), one thread: MB/s of text over the lines of a
// file, one tokenize call per line (as bench_tokenize times ggtrain's).
//   node bench/llama_tokenize.mjs MODEL.gguf TEXT
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [modelPath, textPath] = process.argv.slice(2);
const require = createRequire(resolve("tests/node/package.json"));
const { getLlama, LlamaLogLevel } = await import(require.resolve("node-llama-cpp"));
const llama = await getLlama({ build: "never", skipDownload: true, gpu: false, maxThreads: 1,
                               logLevel: LlamaLogLevel.error, progressLogs: false });
const model = await llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0, vocabOnly: true });
const lines = readFileSync(textPath, "utf8").split("\n").filter((l) => l.length > 0);
const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l), 0);
let best = Infinity, tokens = 0;
for (let rep = 0; rep < 3; rep++) {
  const t0 = process.hrtime.bigint();
  tokens = 0;
  for (const l of lines) tokens += model.tokenize(l, false).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(`llama.cpp (node-llama-cpp, 1 thread): ${lines.length} lines, ${(bytes / 1e6).toFixed(1)} MB, ${tokens} tokens in ${best.toFixed(2)} s: ${(bytes / 1e6 / best).toFixed(1)} MB/s`);
await model.dispose();
await llama.dispose();
