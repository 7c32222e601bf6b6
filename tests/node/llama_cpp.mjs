// A small CLI over node-llama-cpp (a prebuilt llama.cpp), so that tests can ask
// llama.cpp itself for logits and token ids of a GGUF model ggtrain wrote.
//
//   node llama_cpp.mjs logits MODEL.gguf 1,2,3 OUT.f32
//       One llama_decode of exactly these token ids (no BOS is added) at
//       positions 0..n-1 of one sequence, logits requested at every position;
//       writes float32 row-major [n_tokens, n_vocab]. CPU only, 1 thread,
//       flash attention off, F32 K/V cache (F16 with LLAMA_CPP_KV_TYPE=F16,
//       llama.cpp's default). With LORA.gguf, that adapter is applied to the
//       model at scale 1.
//   node llama_cpp.mjs tokenize MODEL.gguf LINES.txt
//       For each non-empty line (split on "\n" only, like ggtrain), prints the
//       token ids llama.cpp gives without BOS and without parsing special
//       tokens, comma-separated, one output line per non-empty input line.
//   node llama_cpp.mjs detokenize MODEL.gguf IDS.txt
//       For each line of comma-separated ids (an empty line: no ids), the
//       text llama.cpp's llama_detokenize gives (remove_special = false,
//       unparse_special = false), as lower-case hex of its UTF-8 bytes.
//   node llama_cpp.mjs sample MODEL.gguf ID,ID,... N SEED TEMP TOP_K TOP_P MIN_P PENALTY LAST_N
//       Up to N tokens after the prompt ids, drawn by llama.cpp's sampler
//       chain as node-llama-cpp builds it (repeat penalty over the last
//       LAST_N tokens of prompt and output, top-k, top-p, min-p,
//       temperature, dist seeded with SEED), stopping after an
//       end-of-generation token; prints them comma-separated.
//   node llama_cpp.mjs compare A.f32 B.f32 TOL [MEDIAN_TOL]
//       Prints the max, median and 99th-percentile abs difference of two
//       float32 files; exit 1 if the max > TOL or the median > MEDIAN_TOL
//       (or if the sizes differ or either holds a NaN).
//
// Install (downloads nothing at run time):
//   NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";

const usage = `usage:
  node llama_cpp.mjs logits MODEL.gguf ID,ID,... OUT.f32 [LORA.gguf]
  node llama_cpp.mjs tokenize MODEL.gguf LINES.txt
  node llama_cpp.mjs detokenize MODEL.gguf IDS.txt
  node llama_cpp.mjs compare A.f32 B.f32 TOL [MEDIAN_TOL]
  node llama_cpp.mjs greedy MODEL.gguf ID,ID,... N
  node llama_cpp.mjs sample MODEL.gguf ID,ID,... N SEED TEMP TOP_K TOP_P MIN_P PENALTY LAST_N
  node llama_cpp.mjs perplexity MODEL.gguf IDS.txt N_CTX BOS_ID
  node llama_cpp.mjs bench MODEL.gguf ID,ID,... N_GEN THREADS`;

function die(msg, code = 2) {
  console.error(`llama_cpp.mjs: ${msg}`);
  process.exit(code);
}

async function loadLlama() {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  // build: "never" + skipDownload: use the prebuilt @node-llama-cpp/linux-x64
  // binary, never fetch or compile llama.cpp. gpu: false: CPU backend only.
  const llama = await getLlama({
    build: "never",
    skipDownload: true,
    gpu: false,
    maxThreads: 1,
    logLevel: LlamaLogLevel.error,
    progressLogs: false,
  });
  return llama;
}

function parseIds(text) {
  const ids = text.split(",").map((s) => s.trim());
  if (ids.length === 0 || ids.some((s) => !/^\d+$/.test(s))) die(`bad token id list: "${text}"`);
  return ids.map(Number);
}

// The K/V cache type of `logits`: F32 unless LLAMA_CPP_KV_TYPE says F16.
function kvType() {
  const t = process.env.LLAMA_CPP_KV_TYPE ?? "F32";
  if (t !== "F32" && t !== "F16") die(`LLAMA_CPP_KV_TYPE=${t}: F32 or F16`, 2);
  return t;
}

async function cmdLogits(modelPath, idsText, outPath, loraPath) {
  const ids = parseIds(idsText);
  const llama = await loadLlama();
  const model = await llama.loadModel({
    modelPath: resolve(modelPath),
    gpuLayers: 0,
    defaultContextFlashAttention: false,
  });
  const n = ids.length;
  const context = await model.createContext({
    sequences: 1,
    // node-llama-cpp keeps one cell free: with contextSize n it would decode
    // n-1 tokens, shift the context and decode the last one on its own.
    contextSize: n + 1,
    batchSize: n, // one batch => one llama_decode over all n tokens
    flashAttention: false,
    threads: 1,
    experimentalKvCacheKeyType: kvType(),
    experimentalKvCacheValueType: kvType(),
    // A LoRA adapter GGUF applied at scale 1 (llama_set_adapter_lora).
    lora: loraPath ? { adapters: [{ filePath: resolve(loraPath) }] } : undefined,
  });
  if (context.contextSize < n) die(`context size ${context.contextSize} < ${n} tokens`, 1);
  const sequence = context.getSequence();
  const results = await sequence.controlledEvaluate(
    ids.map((t) => [t, { generateNext: { logits: true } }]),
  );
  if (results.length !== n) die(`got ${results.length} results for ${n} tokens`, 1);
  // No context shift may have erased or moved anything: the sequence must hold
  // exactly the given ids at positions 0..n-1.
  const held = sequence.contextTokens;
  if (sequence.nextTokenIndex !== n || held.length !== n || held.some((t, i) => t !== ids[i])) {
    die(`sequence state is not the ${n} given tokens (context shift?)`, 1);
  }

  let nVocab = -1;
  let out = null;
  for (let i = 0; i < n; i++) {
    const logits = results[i]?.next?.logits;
    if (!(logits instanceof Map)) die(`no logits at position ${i}`, 1);
    if (nVocab < 0) {
      nVocab = logits.size;
      out = new Float32Array(n * nVocab);
    } else if (logits.size !== nVocab) {
      die(`position ${i}: ${logits.size} logits, expected ${nVocab}`, 1);
    }
    const row = out.subarray(i * nVocab, (i + 1) * nVocab);
    row.fill(NaN);
    for (const [tok, v] of logits) {
      if (!Number.isInteger(tok) || tok < 0 || tok >= nVocab) die(`position ${i}: token id ${tok} out of range`, 1);
      row[tok] = v;
    }
    if (row.some(Number.isNaN)) die(`position ${i}: logits do not cover the vocabulary`, 1);
  }
  writeFileSync(outPath, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
  console.error(`llama.cpp logits: ${n} tokens x ${nVocab} vocab -> ${outPath}`);
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}


// Logits (as Float32Array rows) of `ids` evaluated in order in a fresh
// context; one llama_decode for the batch, F32 K/V cache, no flash attention.
async function evalLogits(model, ids, extra = 0) {
  const n = ids.length;
  const context = await model.createContext({
    sequences: 1,
    contextSize: n + extra + 1, // one cell is kept free by node-llama-cpp
    batchSize: n,
    flashAttention: false,
    threads: 1,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const sequence = context.getSequence();
  const step = async (toks) => {
    const res = await sequence.controlledEvaluate(toks.map((t) => [t, { generateNext: { logits: true } }]));
    return res.map((r, i) => {
      const m = r?.next?.logits;
      if (!(m instanceof Map)) die(`no logits at position ${i}`, 1);
      const row = new Float32Array(m.size);
      for (const [tok, v] of m) row[tok] = v;
      return row;
    });
  };
  return { context, sequence, rows: await step(ids), step };
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

async function loadModel(llama, modelPath) {
  return llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0, defaultContextFlashAttention: false });
}

// Greedy continuation: the argmax token, fed back one at a time (KV cache).
async function cmdGreedy(modelPath, idsText, nText) {
  const ids = parseIds(idsText);
  const n = Number(nText);
  const llama = await loadLlama();
  const model = await loadModel(llama, modelPath);
  const { context, rows, step } = await evalLogits(model, ids, n);
  const out = [];
  let last = rows[rows.length - 1];
  for (let i = 0; i < n; i++) {
    const t = argmax(last);
    out.push(t);
    if (i + 1 < n) last = (await step([t]))[0];
  }
  console.log(out.join(","));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

async function cmdSample(modelPath, idsText, nText, seed, temp, topK, topP, minP, penalty, lastN) {
  const ids = parseIds(idsText);
  const n = Number(nText), last = Number(lastN);
  const llama = await loadLlama();
  const model = await loadModel(llama, modelPath);
  const context = await model.createContext({
    sequences: 1,
    contextSize: ids.length + n + 1,
    batchSize: ids.length,
    flashAttention: false,
    threads: 1,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const history = [...ids], out = [];
  const options = {
    temperature: Number(temp), topK: Number(topK), topP: Number(topP), minP: Number(minP), seed: Number(seed),
  };
  if (Number(penalty) !== 1)
    options.repeatPenalty = {
      punishTokens: () => (last < 0 ? history : history.slice(-last)),
      maxPunishTokens: last < 0 ? ids.length + n : last,
      penalty: Number(penalty),
    };
  for await (const t of context.getSequence().evaluate(ids, options)) {
    out.push(t);
    history.push(t);
    if (out.length >= n) break;
  }
  console.log(out.join(","));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

// llama.cpp's perplexity rule from llama.cpp's own logits: non-overlapping
// chunks of nCtx tokens, first token of each replaced by BOS, positions
// nCtx/2 .. nCtx-2 scored; prints "perplexity X".
async function cmdPerplexity(modelPath, idsPath, nCtxText, bosText) {
  const tokens = parseIds(readFileSync(idsPath, "utf8").trim());
  const nCtx = Number(nCtxText), bos = Number(bosText), first = Math.floor(nCtx / 2);
  const llama = await loadLlama();
  const model = await loadModel(llama, modelPath);
  let nll = 0, count = 0;
  const chunks = Math.floor(tokens.length / nCtx);
  for (let c = 0; c < chunks; c++) {
    const win = tokens.slice(c * nCtx, (c + 1) * nCtx);
    win[0] = bos;
    const { context, rows } = await evalLogits(model, win);
    for (let k = first; k < nCtx - 1; k++) {
      const z = rows[k];
      let mx = -Infinity;
      for (const v of z) if (v > mx) mx = v;
      let sum = 0;
      for (const v of z) sum += Math.exp(v - mx);
      nll -= z[tokens[c * nCtx + k + 1]] - mx - Math.log(sum);
      count++;
    }
    await context.dispose();
  }
  console.log(`perplexity ${Math.exp(nll / count).toFixed(6)} over ${chunks} chunks (${count} scored)`);
  await model.dispose();
  await llama.dispose();
}


// Speed: prompt processing (one batch) and greedy decode, in tokens/s.
async function cmdBench(modelPath, idsText, nGenText, threadsText) {
  const ids = parseIds(idsText);
  const nGen = Number(nGenText), threads = Number(threadsText);
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ build: "never", skipDownload: true, gpu: false, maxThreads: threads,
                                 logLevel: LlamaLogLevel.error, progressLogs: false });
  const model = await loadModel(llama, modelPath);
  const context = await model.createContext({ sequences: 1, contextSize: ids.length + nGen + 1,
    batchSize: ids.length, flashAttention: false, threads });
  const sequence = context.getSequence();
  const t0 = performance.now();
  let res = await sequence.controlledEvaluate(ids.map((t, i) => i === ids.length - 1 ? [t, { generateNext: { token: true } }] : t));
  const t1 = performance.now();
  let next = res[res.length - 1].next.token;
  for (let i = 1; i < nGen; i++) {
    res = await sequence.controlledEvaluate([[next, { generateNext: { token: true } }]]);
    next = res[0].next.token;
  }
  const t2 = performance.now();
  console.log(`llama.cpp: prompt ${ids.length} tokens ${(ids.length / ((t1 - t0) / 1000)).toFixed(1)} tokens/s; ` +
              `decode ${nGen} tokens ${((nGen - 1) / ((t2 - t1) / 1000)).toFixed(1)} tokens/s`);
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

async function cmdTokenize(modelPath, linesPath) {
  const text = readFileSync(linesPath, "utf8");
  const llama = await loadLlama();
  const model = await llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0, vocabOnly: true });
  const out = [];
  for (const line of text.split("\n")) {
    if (line.length === 0) continue;
    // specialTokens = false: "<s>" etc. stay plain text. The binding does not
    // add BOS; check anyway so a changed default cannot slip through.
    const ids = Array.from(model.tokenize(line, false));
    // With special tokens not parsed, the BOS id cannot come from the text.
    if (model.tokens.bos != null && ids.includes(model.tokens.bos)) {
      die(`tokenize added BOS to line "${line}"`, 1);
    }
    out.push(ids.join(","));
  }
  process.stdout.write(out.map((l) => l + "\n").join(""));
  await model.dispose();
  await llama.dispose();
}

async function cmdDetokenize(modelPath, idsPath) {
  const lines = readFileSync(idsPath, "utf8").split("\n");
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  const llama = await loadLlama();
  const model = await llama.loadModel({ modelPath: resolve(modelPath), gpuLayers: 0, vocabOnly: true });
  const out = lines.map((line) => {
    const ids = line === "" ? [] : parseIds(line);
    return Buffer.from(model.detokenize(ids, false), "utf8").toString("hex");
  });
  process.stdout.write(out.map((l) => l + "\n").join(""));
  await model.dispose();
  await llama.dispose();
}

function readF32(path) {
  const buf = readFileSync(path);
  if (buf.length % 4 !== 0) die(`${path}: size ${buf.length} is not a multiple of 4`, 1);
  return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
}

// TOL bounds the largest difference; MEDIAN_TOL (optional) the median one.
// Quantized types need a loose TOL (one activation that rounds to the other
// side of a step moves some logits by ~1e-2) but agree to ~1e-6 elsewhere:
// the median catches what moves every logit a little (a wrong activation
// rounding, an adapter left out) and hides under TOL.
function cmdCompare(aPath, bPath, tolText, medianTolText) {
  const tol = Number(tolText);
  if (!Number.isFinite(tol) || tol < 0) die(`bad tolerance: ${tolText}`);
  const medianTol = medianTolText === undefined ? Infinity : Number(medianTolText);
  if (Number.isNaN(medianTol) || medianTol < 0) die(`bad median tolerance: ${medianTolText}`);
  const a = readF32(aPath);
  const b = readF32(bPath);
  if (a.length !== b.length) {
    console.log(`size mismatch: ${aPath} has ${a.length} floats, ${bPath} has ${b.length}`);
    process.exit(1);
  }
  let max = 0;
  let at = -1;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (Number.isNaN(d)) {
      console.log(`NaN at index ${i}: ${a[i]} vs ${b[i]}`);
      process.exit(1);
    }
    if (d > max) {
      max = d;
      at = i;
    }
  }
  const where = at >= 0 ? ` (index ${at}: ${a[at]} vs ${b[at]})` : "";
  const sorted = Float64Array.from(a, (x, i) => Math.abs(x - b[i])).sort();
  const median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0;
  const p99 = sorted.length ? sorted[Math.floor(sorted.length * 0.99)] : 0;
  console.log(`max abs diff ${max.toExponential(3)} over ${a.length} floats${where}; median ` +
              `${median.toExponential(3)}, 99th percentile ${p99.toExponential(3)}`);
  if (max > tol) {
    console.log(`FAIL: ${max.toExponential(3)} > tolerance ${tol}`);
    process.exit(1);
  }
  if (median > medianTol) {
    console.log(`FAIL: median ${median.toExponential(3)} > ${medianTol}`);
    process.exit(1);
  }
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "logits" && (args.length === 3 || args.length === 4)) await cmdLogits(...args);
else if (cmd === "tokenize" && args.length === 2) await cmdTokenize(...args);
else if (cmd === "detokenize" && args.length === 2) await cmdDetokenize(...args);
else if (cmd === "compare" && (args.length === 3 || args.length === 4)) cmdCompare(...args);
else if (cmd === "greedy" && args.length === 3) await cmdGreedy(...args);
else if (cmd === "sample" && args.length === 10) await cmdSample(...args);
else if (cmd === "bench" && args.length === 4) await cmdBench(...args);
else if (cmd === "perplexity" && args.length === 4) await cmdPerplexity(...args);
else die(usage);
