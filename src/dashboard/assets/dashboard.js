// ggtrain's dashboard: the runs' metrics.jsonl records as charts (overlaid
// per run), their samples, checkpoints and configs. Live (`ggtrain serve`):
// polls the server for new records every second. Report (`ggtrain report`):
// the data is embedded in the page (window.GGTRAIN_DATA). No other origin is
// ever asked for anything.
"use strict";

const COLORS = ["#2a7de1", "#e8590c", "#2f9e44", "#9c36b5", "#d6336c", "#0b7285", "#5c940d", "#862e9c"];
const MAX_RECORDS_PER_CALL = 20000;
const SVG = "http://www.w3.org/2000/svg";
const W = 600, H = 240, M = { l: 54, r: 12, t: 10, b: 26 };

const state = { runs: [], selected: new Set(), xRange: null, live: !window.GGTRAIN_DATA, dirty: true };

function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
const isNum = (v) => typeof v === "number" && Number.isFinite(v);
const fmtNum = (v) => (!isNum(v) ? "–" : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3)
  : Number(v.toPrecision(5)).toString());

// ---- series: what each chart draws, from one run's records ----

const STEP_SKIP = new Set(["step", "elapsed_s", "cpu_level", "nonfinite_steps"]);
const NAMED = { loss: "Loss", lr: "Learning rate", grad_norm: "Gradient norm", tokens_per_s: "Tokens/s",
  bpb: "Bits per byte" };

// chart id -> { title, series: { key -> { label, kind: line|points, get(record) } } }
function chartsOf(runs) {
  const charts = new Map();
  const add = (chart, title, key, label, kind, test, get) => {
    if (!charts.has(chart)) charts.set(chart, { title, series: new Map() });
    const c = charts.get(chart);
    if (!c.series.has(key)) c.series.set(key, { label, kind, test, get });
  };
  for (const run of runs) {
    for (const r of run.records) {
      if ("loss" in r) {  // a step
        for (const [k, v] of Object.entries(r)) {
          if (STEP_SKIP.has(k) || !(isNum(v) || v === null)) continue;
          const chart = k === "loss" ? "loss" : k;
          add(chart, NAMED[k] || k, k, k, "line", (x) => "loss" in x && k in x, (x) => x[k]);
        }
      } else if ("val_loss" in r || Object.keys(r).some((k) => k.startsWith("val_"))) {
        for (const [k, v] of Object.entries(r)) {
          if (!k.startsWith("val_") || !isNum(v) || k === "val_ppl") continue;
          const base = k.slice(4);
          const chart = base === "loss" ? "loss" : base === "bpb" ? "bpb" : base;
          add(chart, NAMED[base] || base, k, k, "points", (x) => !("loss" in x) && k in x, (x) => x[k]);
        }
      } else if (typeof r.task === "string" && isNum(r.acc_norm)) {
        add("tasks", "Task accuracy (acc_norm)", "task:" + r.task, r.task, "points",
          (x) => x.task === r.task && "acc_norm" in x, (x) => x.acc_norm);
      }
    }
  }
  // Loss first, then what a person checks next; the rest as they come.
  const order = ["loss", "bpb", "tasks", "lr", "grad_norm", "tokens_per_s"];
  const rank = (id) => (order.includes(id) ? order.indexOf(id) : order.length);
  return new Map([...charts].sort((a, b) => rank(a[0]) - rank(b[0])));
}

function pointsOf(run, s) {
  const pts = [];
  for (const r of run.records) if (s.test(r)) pts.push([r.step, s.get(r)]);
  return pts;
}

// At most a few points per pixel column: each column's first, lowest,
// highest and last; the series' last point always stays.
function downsample(pts, x0, x1, width) {
  if (pts.length <= 4 * width) return pts;
  const out = [];
  let col = -1, first, lo, hi, last;
  const flush = () => { if (col >= 0) for (const p of new Set([first, lo, hi, last])) out.push(p); };
  for (const p of pts) {
    const c = Math.floor(((p[0] - x0) / (x1 - x0 || 1)) * width);
    if (c !== col) { flush(); col = c; first = lo = hi = last = p; continue; }
    if (isNum(p[1]) && (!isNum(lo[1]) || p[1] < lo[1])) lo = p;
    if (isNum(p[1]) && (!isNum(hi[1]) || p[1] > hi[1])) hi = p;
    last = p;
  }
  flush();
  out.sort((a, b) => a[0] - b[0]);
  if (out[out.length - 1] !== pts[pts.length - 1]) out.push(pts[pts.length - 1]);
  return out;
}

// TensorBoard's smoothing: an exponential moving average, debiased so that
// its start does not lean towards zero.
function smooth(pts, alpha = 0.6) {
  let m = 0, n = 0;
  return pts.map(([x, y]) => {
    if (!isNum(y)) return [x, null];
    n++;
    m = alpha * m + (1 - alpha) * y;
    return [x, m / (1 - Math.pow(alpha, n))];
  });
}
const UNSMOOTHED = new Set(["lr"]);

// ---- drawing ----

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= step0);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) out.push(v);
  return out;
}

function pathOf(pts, sx, sy) {
  let d = "", pen = false;
  for (const [x, y] of pts) {
    if (!isNum(y)) { pen = false; continue; }
    d += (pen ? "L" : "M") + sx(x).toFixed(1) + " " + sy(y).toFixed(1);
    pen = true;
  }
  return d;
}

function drawChart(id, chart, runs) {
  const box = el("section", { class: "chart", "data-chart": id });
  box.append(el("h3", {}, chart.title));
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" });
  box.append(svg);
  const legend = el("div", { class: "legend" });
  box.append(legend);
  const drawn = [];  // [run, series key, points]
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const run of runs) for (const [key, s] of chart.series) {
    const pts = pointsOf(run, s);
    if (!pts.length) continue;
    drawn.push({ run, key, s, pts });
    for (const [x, y] of pts) {
      if (state.xRange && (x < state.xRange[0] || x > state.xRange[1])) continue;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x);
      if (isNum(y)) { y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
    }
  }
  if (!drawn.length) return null;
  if (state.xRange) [x0, x1] = state.xRange;
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (!(y1 > y0)) { y0 = (isNum(y0) ? y0 : 0) - 1; y1 = y0 + 2; }
  const pad = (y1 - y0) * 0.05;
  y0 -= pad; y1 += pad;
  const sx = (x) => M.l + ((x - x0) / (x1 - x0)) * (W - M.l - M.r);
  const sy = (y) => H - M.b - ((y - y0) / (y1 - y0)) * (H - M.t - M.b);
  const axes = el("svg:g", { class: "axis" });
  for (const t of niceTicks(y0, y1, 5)) {
    axes.append(el("svg:line", { x1: M.l, x2: W - M.r, y1: sy(t), y2: sy(t) }));
    axes.append(el("svg:text", { x: M.l - 4, y: sy(t) + 3, "text-anchor": "end" }, fmtNum(t)));
  }
  for (const t of niceTicks(x0, x1, 6)) axes.append(el("svg:text", { x: sx(t), y: H - 8, "text-anchor": "middle" }, fmtNum(t)));
  svg.append(axes);
  const clip = `clip-${id.replace(/[^a-z0-9]/gi, "_")}`;
  const defs = el("svg:defs");
  const cp = el("svg:clipPath", { id: clip });
  cp.append(el("svg:rect", { x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b }));
  defs.append(cp);
  svg.append(defs);
  const width = W - M.l - M.r;
  for (const { run, key, s, pts } of drawn) {
    const color = COLORS[run.index % COLORS.length];
    const lastStep = pts[pts.length - 1][0];
    const common = { "data-run": run.index, "data-key": key, "data-records": pts.length, "data-last-step": lastStep,
      "clip-path": `url(#${clip})` };
    if (s.kind === "line") {
      const visible = downsample(pts, x0, x1, width);
      const many = pts.length > 20 && !UNSMOOTHED.has(key);
      svg.append(el("svg:path", { ...common, class: many ? "series raw" : "series", stroke: color,
        "data-drawn": visible.length, d: pathOf(visible, sx, sy) }));
      if (many) svg.append(el("svg:path", { class: "smooth", stroke: color, "data-key": key, "data-run": run.index,
        "clip-path": `url(#${clip})`, d: pathOf(downsample(smooth(pts), x0, x1, width), sx, sy) }));
    } else {
      // Evaluations are few: every one is drawn.
      const g = el("svg:g", { ...common, class: "points" });
      const line = el("svg:path", { class: "series", stroke: color, "stroke-dasharray": "4 3", d: pathOf(pts, sx, sy) });
      g.append(line);
      for (const [x, y] of pts) if (isNum(y)) g.append(el("svg:circle", { cx: sx(x), cy: sy(y), r: 3, fill: color }));
      svg.append(g);
    }
    const item = el("span", {});
    item.append(el("span", { class: "swatch", style: `background:${color}` }));
    item.append(document.createTextNode(`${run.summary.name}: ${s.label}   `));
    legend.append(item);
  }
  attachInteraction(svg, drawn, sx, x0, x1);
  return box;
}

function attachInteraction(svg, drawn, sx, x0, x1) {
  const tip = document.getElementById("tooltip");
  const toStep = (evt) => {
    const r = svg.getBoundingClientRect();
    const px = ((evt.clientX - r.left) / r.width) * W;
    return x0 + ((px - M.l) / (W - M.l - M.r)) * (x1 - x0);
  };
  const cursor = el("svg:line", { class: "cursor", y1: M.t, y2: H - M.b, visibility: "hidden" });
  const zoom = el("svg:rect", { class: "zoombox", y: M.t, height: H - M.t - M.b, visibility: "hidden" });
  svg.append(cursor, zoom);
  let dragFrom = null;
  svg.addEventListener("mousemove", (evt) => {
    const step = toStep(evt);
    cursor.setAttribute("x1", sx(step)); cursor.setAttribute("x2", sx(step));
    cursor.setAttribute("visibility", "visible");
    let text = "";
    for (const { run, s, pts } of drawn) {
      let lo = 0, hi = pts.length - 1;  // the last point at or before the cursor
      if (pts[0][0] > step) continue;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (pts[mid][0] <= step) lo = mid; else hi = mid - 1; }
      text += `${run.summary.name} ${s.label} @ ${pts[lo][0]}: ${fmtNum(pts[lo][1])}\n`;
    }
    tip.textContent = text.trim() || "–";
    tip.hidden = false;
    tip.style.left = evt.clientX + 14 + "px"; tip.style.top = evt.clientY + 14 + "px";
    if (dragFrom !== null) {
      const a = Math.min(sx(dragFrom), sx(step)), b = Math.max(sx(dragFrom), sx(step));
      zoom.setAttribute("x", a); zoom.setAttribute("width", b - a); zoom.setAttribute("visibility", "visible");
    }
  });
  svg.addEventListener("mouseleave", () => { tip.hidden = true; cursor.setAttribute("visibility", "hidden"); });
  svg.addEventListener("mousedown", (evt) => { dragFrom = toStep(evt); });
  svg.addEventListener("mouseup", (evt) => {
    const to = toStep(evt);
    if (dragFrom !== null && Math.abs(sx(to) - sx(dragFrom)) > 5) {
      state.xRange = [Math.min(dragFrom, to), Math.max(dragFrom, to)];
      render();
    }
    dragFrom = null;
  });
  svg.addEventListener("dblclick", () => { state.xRange = null; render(); });
}

// ---- panels ----

function renderRuns() {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren();
  for (const run of state.runs) {
    const s = run.summary;
    const tr = el("tr", { "data-run": run.index, "data-state": s.state });
    const box = el("input", { type: "checkbox" });
    box.checked = state.selected.has(run.index);
    box.addEventListener("change", () => {
      if (box.checked) state.selected.add(run.index); else state.selected.delete(run.index);
      render();
    });
    const pick = el("td");
    pick.append(box);
    const name = el("td");
    name.append(el("span", { class: "swatch", style: `background:${COLORS[run.index % COLORS.length]}` }));
    name.append(document.createTextNode(s.name));
    name.title = s.dir;
    const st = el("td");
    st.append(el("span", { class: `state state-${s.state}` }, s.state));
    const last = run.records.reduce((m, r) => ("loss" in r ? Math.max(m, r.step) : m), 0);
    const cpu = run.records.find((r) => typeof r.cpu_level === "string");
    tr.append(pick, name, st, el("td", { class: "step" }, s.steps ? `${last} / ${s.steps}` : String(last)),
      el("td", {}, s.host || ""), el("td", {}, cpu ? cpu.cpu_level : ""), el("td", { class: "detail" }, s.detail || ""));
    body.append(tr);
  }
}

function renderSamples(runs) {
  const out = document.getElementById("samples");
  out.replaceChildren();
  for (const run of runs) {
    const samples = run.records.filter((r) => typeof r.sample === "string").reverse();
    for (const r of samples) {
      const d = el("div", { class: "sample", "data-run": run.index, "data-step": r.step });
      d.append(el("b", {}, `${run.summary.name} step ${r.step}`));
      d.append(document.createTextNode(r.sample));
      out.append(d);
    }
  }
  if (!out.childElementCount) out.append(el("p", { class: "hint" }, "No samples (train.sample_every)."));
}

function renderCheckpoints(runs) {
  const out = document.getElementById("checkpoints");
  out.replaceChildren();
  const t = el("table", { id: "checkpoint-table" });
  t.append(el("tr", {}, ""));
  t.firstChild.append(el("th", {}, "run"), el("th", {}, "step"), el("th", {}, "size"), el("th", {}, ""));
  for (const run of runs) for (const c of run.summary.checkpoints) {
    const marks = [c.latest ? "latest" : "", c.best ? "best" : ""].filter(Boolean).join(", ");
    const tr = el("tr", { "data-run": run.index, "data-step": c.step });
    tr.append(el("td", {}, run.summary.name), el("td", {}, String(c.step)),
      el("td", {}, `${(c.bytes / 1048576).toFixed(1)} MiB`), el("td", {}, marks));
    t.append(tr);
  }
  out.append(t);
}

function renderConfigs(runs) {
  const out = document.getElementById("configs");
  out.replaceChildren();
  for (const run of runs) {
    out.append(el("h3", {}, run.summary.name));
    out.append(el("pre", { class: "config" }, run.summary.config_toml || "(no config.toml)"));
  }
}

function render() {
  const runs = state.runs.filter((r) => state.selected.has(r.index));
  renderRuns();
  const charts = document.getElementById("charts");
  charts.replaceChildren();
  for (const [id, chart] of chartsOf(runs)) {
    const box = drawChart(id, chart, runs);
    if (box) charts.append(box);
  }
  renderSamples(runs);
  renderCheckpoints(runs);
  renderConfigs(runs);
  document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
}

// ---- data ----

function setRuns(summaries) {
  summaries.forEach((s, i) => {
    if (!state.runs[i]) {
      state.runs[i] = { index: i, summary: s, records: [], offset: 0 };
      state.selected.add(i);
    } else {
      if (JSON.stringify(state.runs[i].summary) !== JSON.stringify(s)) state.dirty = true;
      state.runs[i].summary = s;
    }
  });
}

async function poll() {
  try {
    const runs = await (await fetch("/api/runs")).json();
    setRuns(runs.runs);
    for (const run of state.runs) {
      for (;;) {
        const got = await (await fetch(`/api/records?run=${run.index}&from=${run.offset}`)).json();
        if (got.records.length) state.dirty = true;
        run.records.push(...got.records);
        run.offset = got.next;
        if (got.records.length < MAX_RECORDS_PER_CALL) break;
      }
    }
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("updated").textContent = "server unreachable; retrying";
  }
  if (state.dirty) { state.dirty = false; render(); }
  setTimeout(poll, 1000);
}

if (state.live) {
  document.getElementById("mode").textContent = "live";
  poll();
} else {
  const d = window.GGTRAIN_DATA;
  document.getElementById("mode").textContent = "report written " + d.written;
  setRuns(d.runs);
  d.records.forEach((records, i) => { state.runs[i].records = records; });
  render();
}
