// Cross-checks `ggtrain inspect --json FILE` against @huggingface/gguf, an
// independent GGUF parser: every metadata key and value, and every tensor's
// name, ggml type, shape and offset.
//
//   node hf_gguf_check.mjs FILE.gguf INSPECT.json
//
// Exit 0 and "hf-gguf: N keys, M tensors identical" when they agree; exit 1
// with one line per difference otherwise.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { gguf, GGMLQuantizationType, GGUFValueType } from "@huggingface/gguf";

if (process.argv.length !== 4) {
  console.error("usage: node hf_gguf_check.mjs FILE.gguf INSPECT.json");
  process.exit(2);
}
const ggufPath = resolve(process.argv[2]);
const jsonPath = process.argv[3];

// JSON.parse turns every number into a double, which cannot hold u64/i64
// values. This small parser keeps integer literals as BigInt and everything
// with a fraction or exponent as Number; objects become Maps.
function parseJsonExact(text) {
  let i = 0;
  const fail = (what) => {
    throw new Error(`${jsonPath}: bad JSON at ${i}: ${what}`);
  };
  const ws = () => {
    while (i < text.length && " \t\r\n".includes(text[i])) i++;
  };
  const expect = (c) => {
    ws();
    if (text[i] !== c) fail(`expected '${c}'`);
    i++;
  };
  const string = () => {
    ws();
    const start = i;
    expect('"');
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    expect('"');
    return JSON.parse(text.slice(start, i));
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const m = new Map();
      ws();
      if (text[i] === "}") return i++, m;
      for (;;) {
        const k = string();
        expect(":");
        m.set(k, value());
        ws();
        if (text[i] === ",") { i++; continue; }
        expect("}");
        return m;
      }
    }
    if (c === "[") {
      i++;
      const a = [];
      ws();
      if (text[i] === "]") return i++, a;
      for (;;) {
        a.push(value());
        ws();
        if (text[i] === ",") { i++; continue; }
        expect("]");
        return a;
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]])
      if (text.startsWith(word, i)) return (i += word.length), v;
    const num = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 64));
    if (!num) fail("unexpected character");
    i += num[0].length;
    return num[1] || num[2] ? Number(num[0]) : BigInt(num[0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing characters");
  return v;
}

const INT_TYPES = new Set([
  GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
  GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64,
]);
const FLOAT_TYPES = new Set([GGUFValueType.FLOAT32, GGUFValueType.FLOAT64]);

const diffs = [];
const show = (v) =>
  JSON.stringify(v, (_, x) => (typeof x === "bigint" ? `${x}n` : Number.isNaN(x) ? "NaN" : x));

// `type` is the GGUF value type when known (top-level values and the
// elements of top-level arrays), undefined inside nested arrays.
function compareValue(where, hf, ours, type, subType) {
  const differ = (why) => diffs.push(`${where}: ${why}: hf-gguf ${show(hf)}, ggtrain ${show(ours)}`);
  if (type === GGUFValueType.ARRAY || (type === undefined && Array.isArray(hf))) {
    if (!Array.isArray(hf) || !Array.isArray(ours)) return differ("not both arrays");
    if (hf.length !== ours.length) return differ(`array lengths ${hf.length} vs ${ours.length}`);
    hf.forEach((x, k) => compareValue(`${where}[${k}]`, x, ours[k], subType, undefined));
    return;
  }
  if (type === GGUFValueType.STRING || (type === undefined && typeof hf === "string")) {
    if (hf !== ours) differ("strings differ");
    return;
  }
  if (type === GGUFValueType.BOOL || (type === undefined && typeof hf === "boolean")) {
    if (hf !== ours) differ("bools differ");
    return;
  }
  if (INT_TYPES.has(type) || (type === undefined && typeof hf === "bigint")) {
    // ggtrain must print integer types as integer literals.
    if (typeof ours !== "bigint") return differ("ggtrain did not print an integer");
    if (BigInt(hf) !== ours) differ("integers differ");
    return;
  }
  if (FLOAT_TYPES.has(type) || (type === undefined && typeof hf === "number")) {
    if (typeof ours === "bigint" && type === undefined) {
      if (!Number.isInteger(hf) || BigInt(hf) !== ours) differ("numbers differ");
      return;
    }
    if (ours === null) {
      // JSON has no NaN or infinity; nlohmann::json prints them as null.
      if (Number.isFinite(hf)) differ("ggtrain printed null for a finite number");
      return;
    }
    if (typeof ours !== "number") return differ("ggtrain did not print a float");
    if (!Object.is(hf, ours)) differ("floats differ");
    return;
  }
  differ(`unexpected value type ${type}`);
}

const SYNTHETIC = new Set(["version", "tensor_count", "kv_count"]);

const ours = parseJsonExact(readFileSync(jsonPath, "utf8"));
if (!(ours instanceof Map) || !(ours.get("metadata") instanceof Map) || !Array.isArray(ours.get("tensors"))) {
  console.error(`${jsonPath}: expected {"metadata": {...}, "tensors": [...]}`);
  process.exit(1);
}
const ourMeta = ours.get("metadata");
const ourTensors = ours.get("tensors");

const { typedMetadata, tensorInfos } = await gguf(ggufPath, { allowLocalFile: true, typedMetadata: true });

// Metadata: the same key set, and the same value for each key.
const hfKeys = Object.keys(typedMetadata).filter((k) => !SYNTHETIC.has(k));
if (typedMetadata.kv_count.value !== BigInt(ourMeta.size))
  diffs.push(`kv_count: hf-gguf ${typedMetadata.kv_count.value}, ggtrain lists ${ourMeta.size} keys`);
for (const k of hfKeys) if (!ourMeta.has(k)) diffs.push(`metadata '${k}': missing from ggtrain`);
for (const k of ourMeta.keys()) if (!(k in typedMetadata)) diffs.push(`metadata '${k}': missing from hf-gguf`);
for (const k of hfKeys) {
  if (!ourMeta.has(k)) continue;
  const { value, type, subType } = typedMetadata[k];
  compareValue(`metadata '${k}'`, value, ourMeta.get(k), type, subType);
}

// Tensors, in file order.
if (typedMetadata.tensor_count.value !== BigInt(ourTensors.length))
  diffs.push(`tensor_count: hf-gguf ${typedMetadata.tensor_count.value}, ggtrain lists ${ourTensors.length}`);
const n = Math.min(tensorInfos.length, ourTensors.length);
for (let i = 0; i < n; i++) {
  const hf = tensorInfos[i];
  const t = ourTensors[i];
  const where = `tensor #${i} '${hf.name}'`;
  if (hf.name !== t.get("name")) diffs.push(`${where}: ggtrain calls it '${t.get("name")}'`);
  // ggtrain prints ggml's type name; hf-gguf gives the numeric ggml id.
  const ourType = t.get("type");
  const ourId = GGMLQuantizationType[ourType];
  if (typeof ourId !== "number") diffs.push(`${where}: ggtrain type '${ourType}' is not a ggml type name`);
  else if (ourId !== hf.dtype)
    diffs.push(`${where}: type id ${hf.dtype} (${GGMLQuantizationType[hf.dtype]}), ggtrain '${ourType}' (id ${ourId})`);
  const shape = t.get("shape");
  if (hf.n_dims !== hf.shape.length || shape.length !== hf.shape.length || shape.some((d, k) => d !== hf.shape[k]))
    diffs.push(`${where}: shape ${show(hf.shape)}, ggtrain ${show(shape)}`);
  if (t.get("offset") !== hf.offset) diffs.push(`${where}: offset ${hf.offset}, ggtrain ${show(t.get("offset"))}`);
}

if (diffs.length) {
  console.error(`hf-gguf: ${ggufPath}: ${diffs.length} difference(s)`);
  for (const d of diffs.slice(0, 50)) console.error(`  ${d}`);
  process.exit(1);
}
console.log(`hf-gguf: ${hfKeys.length} keys, ${tensorInfos.length} tensors identical (${ggufPath})`);
