// The dashboard in a real browser (Debian's chromium, driven by
// playwright-core) for tests/compat/dashboard_check.sh. Every command reads
// the DOM against the run folders' metrics.jsonl files (the truth), fails on
// any console error, and on any request outside the page's own origin.
//
//   node dashboard_check.mjs report REPORT.html RUN_DIR
//       A written report: per chart the series' record counts and last steps
//       equal RUN_DIR/metrics.jsonl's complete records, every evaluation
//       drawn, the samples and checkpoints listed, a non-blank chart.
//   node dashboard_check.mjs live URL RUN_A RUN_B PID_B
//       `ggtrain serve RUN_A RUN_B` while B trains (process PID_B): both
//       runs overlaid, A's counts exact, B running; a validation record that
//       B writes appears in the page within 5 s, without reloading; after
//       PID_B is killed, B reads as failed within 5 s.
//   node dashboard_check.mjs large REPORT.html RUN_DIR
//       A report of a long run (100k steps): each drawn line keeps at most a
//       few points per pixel column, its last point is the run's last step,
//       and every validation point is drawn.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { inflateSync } from "node:zlib";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

function die(msg) {
  console.error(`dashboard_check.mjs: FAIL: ${msg}`);
  process.exit(1);
}

// The complete records of a metrics.jsonl (a torn last line is not one).
function records(runDir) {
  const text = readFileSync(`${runDir}/metrics.jsonl`, "utf8");
  const lines = text.split("\n");
  lines.pop();  // after the last newline: empty, or a line still being written
  const out = [];
  for (const l of lines) {
    try {
      const r = JSON.parse(l);
      if (r && typeof r === "object" && typeof r.step === "number") out.push(r);
    } catch {}
  }
  return out;
}

// What the page must show for one run: per series key, the record count and
// the last step.
function expected(recs) {
  const out = {};
  const add = (key, step) => {
    out[key] ??= { records: 0, last: -Infinity };
    out[key].records++;
    out[key].last = Math.max(out[key].last, step);
  };
  for (const r of recs) {
    if ("loss" in r) for (const k of ["loss", "lr", "grad_norm", "tokens_per_s"]) { if (k in r) add(k, r.step); }
    else if ("val_loss" in r) for (const k of ["val_loss", "val_bpb"]) { if (typeof r[k] === "number") add(k, r.step); }
  }
  return out;
}

async function browser() {
  return chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"] });
}

// A page that records console errors and every request it makes.
async function watchedPage(b) {
  const page = await b.newPage({ viewport: { width: 1400, height: 1600 } });
  const problems = [], requests = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e}`));
  page.on("request", (r) => requests.push(r.url()));
  return { page, problems, requests };
}

// The series the page drew: {run, key, records, last, drawn}.
async function drawnSeries(page) {
  return page.evaluate(() => [...document.querySelectorAll("[data-records]")].map((e) => ({
    run: Number(e.dataset.run), key: e.dataset.key, records: Number(e.dataset.records),
    last: Number(e.dataset.lastStep), drawn: e.dataset.drawn === undefined ? null : Number(e.dataset.drawn),
    circles: e.querySelectorAll("circle").length })));
}

function checkCounts(series, run, want, name) {
  for (const [key, w] of Object.entries(want)) {
    const s = series.find((x) => x.run === run && x.key === key);
    if (!s) die(`${name}: no ${key} series drawn for run ${run}`);
    if (s.records !== w.records) die(`${name}: ${key} shows ${s.records} records, metrics.jsonl has ${w.records}`);
    if (s.last !== w.last) die(`${name}: ${key}'s last step is ${s.last}, metrics.jsonl's ${w.last}`);
    if (key.startsWith("val_") && s.circles !== w.records)
      die(`${name}: ${key} draws ${s.circles} of its ${w.records} evaluations`);
  }
  return Object.keys(want).length;
}

// Decoded PNG (8-bit RGB or RGBA, no interlace): how many pixels are not
// near-white, and how many distinct colours there are.
function inkOf(png) {
  let at = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (at < png.length) {
    const len = png.readUInt32BE(at), type = png.toString("ascii", at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      channels = { 2: 3, 6: 4 }[data[9]];
      if (data[8] !== 8 || !channels || data[12] !== 0) die("screenshot: not an 8-bit RGB(A) PNG");
    }
    if (type === "IDAT") idat.push(data);
    at += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const img = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)], row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? img[y * stride + x - channels] : 0, b = y ? img[(y - 1) * stride + x] : 0;
      const c = x >= channels && y ? img[(y - 1) * stride + x - channels] : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f];
      img[y * stride + x] = (row[x] + pred) & 255;
    }
  }
  let ink = 0;
  const colours = new Set();
  for (let i = 0; i < img.length; i += channels) {
    const [r, g, b] = [img[i], img[i + 1], img[i + 2]];
    if (r + g + b < 3 * 235) ink++;
    colours.add((r << 16) | (g << 8) | b);
  }
  return { ink: ink / (width * height), colours: colours.size };
}

async function checkChartNotBlank(page, name) {
  const png = await page.locator('[data-chart="loss"] svg').screenshot();
  const { ink, colours } = inkOf(png);
  if (ink < 0.01 || colours < 8) die(`${name}: the loss chart looks blank (${(ink * 100).toFixed(2)}% ink, ${colours} colours)`);
  return ink;
}

function checkClean(problems, requests, allowed, name) {
  if (problems.length) die(`${name}: ${problems.join("; ")}`);
  const outside = requests.filter((u) => !allowed(u));
  if (outside.length) die(`${name}: requests outside the page's origin: ${outside.slice(0, 3).join(", ")}`);
}

async function cmdReport(reportPath, runDir) {
  const b = await browser();
  const { page, problems, requests } = await watchedPage(b);
  const url = pathToFileURL(reportPath).href;
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.rendered) >= 1);
  const recs = records(runDir);
  const n = checkCounts(await drawnSeries(page), 0, expected(recs), reportPath);
  const samples = await page.locator(".sample").count();
  const wantSamples = recs.filter((r) => typeof r.sample === "string").length;
  if (samples !== wantSamples) die(`${reportPath}: ${samples} samples shown, metrics.jsonl has ${wantSamples}`);
  const checkpoints = await page.locator("#checkpoint-table tr[data-step]").count();
  const onDisk = readdirSync(`${runDir}/weights`).filter((f) => /^step_\d+\.gguf$/.test(f)).length;
  if (checkpoints !== onDisk) die(`${reportPath}: ${checkpoints} checkpoints listed, ${onDisk} in weights/`);
  const ink = await checkChartNotBlank(page, reportPath);
  checkClean(problems, requests, (u) => u === url, reportPath);
  console.log(`report ${reportPath}: ${n} series match metrics.jsonl (${recs.length} records), ${samples} samples, ` +
              `${checkpoints} checkpoints, loss chart ${(ink * 100).toFixed(1)}% ink, no console error, no request`);
  await b.close();
}

async function until(what, seconds, test) {
  const t0 = Date.now();
  for (;;) {
    const v = await test();
    if (v) return (Date.now() - t0) / 1000;
    if (Date.now() - t0 > seconds * 1000) die(`${what}: not within ${seconds} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function cmdLive(url, runA, runB, pidB) {
  const b = await browser();
  const { page, problems, requests } = await watchedPage(b);
  await page.goto(url);
  await until("the first render", 10, () => page.evaluate(() => Number(document.body.dataset.rendered) >= 1));
  await until("both runs listed", 10, () => page.evaluate(() => document.querySelectorAll("#runs tr[data-run]").length === 2));
  checkCounts(await drawnSeries(page), 0, expected(records(runA)), "live, run A");
  const stateOf = (run) => page.evaluate((r) => document.querySelector(`#runs tr[data-run="${r}"]`).dataset.state, run);
  if ((await stateOf(0)) !== "finished") die(`run A reads as ${await stateOf(0)}, not finished`);
  if ((await stateOf(1)) !== "running") die(`run B reads as ${await stateOf(1)}, not running`);
  const overlaid = (await drawnSeries(page)).filter((s) => s.key === "loss").map((s) => s.run).sort().join(",");
  if (overlaid !== "0,1") die(`the loss chart overlays runs ${overlaid}, not 0,1`);
  // A validation record B writes from now on reaches the page.
  const valCount = () => records(runB).filter((r) => "val_loss" in r).length;
  const before = valCount();
  await until("a new validation record in B's metrics.jsonl", 60, () => valCount() > before);
  const written = valCount();
  const shownIn = await until("B's new validation point in the page", 5, async () => {
    const s = (await drawnSeries(page)).find((x) => x.run === 1 && x.key === "val_loss");
    return s && s.records >= written;
  });
  process.kill(Number(pidB), "SIGKILL");
  const failedIn = await until("B read as failed after its process was killed", 5, async () => (await stateOf(1)) === "failed");
  const ink = await checkChartNotBlank(page, "live");
  const origin = new URL(url).origin;
  checkClean(problems, requests, (u) => u.startsWith(origin + "/"), "live");
  console.log(`live ${url}: runs A and B overlaid; A's series match metrics.jsonl; B's validation record ${written} ` +
              `shown ${shownIn.toFixed(1)} s after it was written, without reloading; B failed in the page ` +
              `${failedIn.toFixed(1)} s after SIGKILL; ${requests.length} requests, all to ${origin}; ` +
              `loss chart ${(ink * 100).toFixed(1)}% ink; no console error`);
  await b.close();
}

async function cmdLarge(reportPath, runDir) {
  const b = await browser();
  const { page, problems, requests } = await watchedPage(b);
  const url = pathToFileURL(reportPath).href;
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.rendered) >= 1, null, { timeout: 60000 });
  const recs = records(runDir);
  const series = await drawnSeries(page);
  checkCounts(series, 0, expected(recs), reportPath);
  const loss = series.find((s) => s.key === "loss");
  const columns = 600;  // the chart's drawing width in viewBox units, at most
  if (!(loss.drawn > 0 && loss.drawn <= 4 * columns + 1))
    die(`${reportPath}: the loss line draws ${loss.drawn} of ${loss.records} points (want at most ${4 * columns + 1})`);
  const lastDrawn = await page.evaluate(() => {
    const d = document.querySelector('path.series[data-key="loss"]').getAttribute("d");
    const xs = [...d.matchAll(/[ML]([-\d.]+) /g)].map((m) => Number(m[1]));
    return xs[xs.length - 1];
  });
  const right = await page.evaluate(() => 600 - 12);
  if (Math.abs(lastDrawn - right) > 0.6) die(`${reportPath}: the loss line ends at x=${lastDrawn}, not at its last step (${right})`);
  checkClean(problems, requests, (u) => u === url, reportPath);
  console.log(`large ${reportPath}: ${loss.records} steps drawn as ${loss.drawn} points ending at the last step, ` +
              `every validation point drawn; ${(statSync(reportPath).size / 1048576).toFixed(1)} MiB`);
  await b.close();
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "report" && args.length === 2) await cmdReport(...args);
else if (cmd === "live" && args.length === 4) await cmdLive(...args);
else if (cmd === "large" && args.length === 2) await cmdLarge(...args);
else die("usage: see the comment at the top of dashboard_check.mjs");
