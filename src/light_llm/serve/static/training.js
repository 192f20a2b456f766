// The "learning" panels (issue 24): a training run replayed from its records and probes
// (/api/runs, serve/history.py), followed live while it trains in another process, and other
// runs compared beside it. Loaded before explorer.js, whose helpers (el, $, api, fmt, visible,
// viridis, probabilityColour, probabilityLegend, signedColour of inspect.js) it calls once the
// page has started.
"use strict";

const LIVE_POLL_MS = 2000; // while a run trains
const IDLE_POLL_MS = 10000; // otherwise (a run may be resumed)
const RUN_COLOURS = ["#e07b1f", "#2f5bd3", "#1f8a4c", "#9b3fb5", "#b3261e"];
const AXES = { iteration: [0, "iteration"], tokens: [1, "training tokens"], time: [2, "wall time (s)"] };

const trainingState = { runs: [], iteration: null, atEnd: true, axis: "iteration", layer: 0, head: 0, probes: {}, timer: null };

const thousands = (x) => Math.round(x).toLocaleString("en");

function trainingSection() {
  return el("section", { id: "training-section" },
    el("h2", { text: "Learning: the run replayed from its records and probes" }),
    el("div", { id: "training-status", class: "muted" }),
    el("div", { class: "row" },
      el("label", {}, "x axis", el("select", { id: "curve-axis", onchange: (e) => { trainingState.axis = e.target.value; drawCurves(); } },
        ...Object.entries(AXES).map(([key, [, label]]) => el("option", { value: key, text: label })))),
      el("span", { class: "muted", text: "y: bits per byte of the text (nats per token where a run has none); dots are evaluations" })),
    el("div", { class: "curve-box" }, el("div", { id: "curves" }), el("div", { id: "curve-legend", class: "curve-legend" })),
    el("div", { id: "curve-readout", class: "muted" }),
    el("div", { class: "row" },
      el("label", { class: "slider" }, "iteration",
        el("input", { type: "range", id: "probe-slider", min: "0", max: "0", step: "1", value: "0", oninput: (e) => {
          const list = trainingState.runs[0] ? trainingState.runs[0].probes : [];
          trainingState.atEnd = Number(e.target.value) === list.length - 1;
          showIteration(list[Number(e.target.value)]);
        } }),
        el("span", { id: "probe-iteration", class: "value" })),
      el("label", {}, "layer", el("input", { type: "number", id: "probe-layer", min: "0", value: "0", oninput: (e) => { trainingState.layer = Number(e.target.value); drawProbes(); } })),
      el("label", {}, "head", el("input", { type: "number", id: "probe-head", min: "0", value: "0", oninput: (e) => { trainingState.head = Number(e.target.value); drawProbes(); } }))),
    el("div", { id: "probe-panels", class: "probe-panels" }),
    el("div", { id: "training-error", class: "error" }));
}

async function startTraining() {
  await refreshRuns();
  const live = trainingState.runs.some((run) => run.live);
  trainingState.timer = setTimeout(startTraining, live ? LIVE_POLL_MS : IDLE_POLL_MS);
}

async function refreshRuns() {
  const box = $("#training-error");
  let runs;
  try { runs = await api("/api/runs"); } catch (exc) { box.textContent = exc.message; return; }
  box.replaceChildren();
  trainingState.runs = runs;
  const first = runs[0];
  const words = runs.map((run) => `${run.name}: ${run.live ? "training now (the page follows it)" : "not training"}` +
    (run.probes && run.probes.length ? `, ${run.probes.length} probes` : ", no probes recorded") +
    (run.tokenizer ? `, ${run.tokenizer} tokens` : "") + nonFiniteWords(run) + (run.warning ? ` (${run.warning})` : ""));
  // a run's vocabulary: a digest of its tokenizer files (two runs' "char" may differ)
  const tokenizers = new Set(runs.map((run) => run.vocabulary).filter(Boolean));
  if (tokenizers.size > 1) words.push(inBits(runs)
    ? "the runs' tokenizers differ, so their token panels are not token for token comparable; the curves are in bits per byte, which are"
    : "the runs' tokenizers differ, so their token panels are not token for token comparable, nor their curves: a run records no bits per byte, so the curves are in nats per token");
  // a masked-LM encoder's loss is over masked tokens seen from both sides: not a next-token loss
  const objectives = new Set(runs.map((run) => run.objective).filter(Boolean));
  if (objectives.size > 1) for (const run of runs) if (run.objective === "masked-LM") {
    words.push(`${run.name} is a masked-LM encoder: its loss is over masked tokens seen from both sides, not comparable with a next-token loss`);
  }
  $("#training-status").textContent = words.join("; ");
  drawCurves();
  const list = (first && first.probes) || [];
  const slider = $("#probe-slider");
  slider.max = String(Math.max(list.length - 1, 0));
  if (!list.length) {
    const why = first && first.objective === "masked-LM"
      ? "A masked-LM encoder's run records no probes: they follow a GPT's next token, its heads and its samples."
      : "No probes recorded yet (light-llm train records them at every evaluation and every --probe-interval steps).";
    $("#probe-panels").replaceChildren(el("p", { class: "muted", text: why }));
    return;
  }
  let index = list.indexOf(trainingState.iteration);
  if (trainingState.atEnd || index < 0) index = list.length - 1;
  slider.value = String(index);
  if (list[index] !== trainingState.iteration || trainingState.atEnd) await showIteration(list[index]);
}

// The probe of each run at `iteration` (a compared run: its latest at or before it).
async function showIteration(iteration) {
  trainingState.iteration = iteration;
  $("#probe-iteration").textContent = iteration === undefined ? "" : thousands(iteration);
  await Promise.all(trainingState.runs.map(async (run) => {
    const recorded = (run.probes || []).filter((i) => i <= iteration);
    const at = recorded.length ? recorded[recorded.length - 1] : null;
    const key = `${run.index}:${at}`;
    if (at === null) { trainingState.probes[run.index] = { error: `${run.name} has no probe at or before iteration ${iteration}.` }; return; }
    if (trainingState.probes[run.index] && trainingState.probes[run.index].key === key) return;
    let entry;
    try {
      entry = { key, record: await api(`/api/runs/${run.index}/probes/${at}`) };
    } catch (exc) { entry = { key, error: exc.message }; }
    if (trainingState.iteration === iteration) trainingState.probes[run.index] = entry; // not a slower, older answer
  }));
  if (trainingState.iteration === iteration) drawProbes();
}

// ---------------------------------------------------------------- the curves
function niceTicks(low, high, count = 5) {
  const span = high - low || 1, raw = span / count;
  const step = [1, 2, 2.5, 5, 10].map((m) => m * 10 ** Math.floor(Math.log10(raw))).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(low / step) * step; t <= high + 1e-9; t += step) ticks.push(Number(t.toFixed(10)));
  return ticks;
}

// Whether every run's evaluations have bits per byte, the unit that compares tokenizers (an
// encoder's and an older run's have none, null: then every curve is drawn in nats per token;
// a non-finite one, "NaN" or "Infinity", is recorded: a gap in the curve, not another unit).
function inBits(runs) {
  return runs.every((run) => !run.curves || run.curves.val.every((p) => p[4] !== null));
}

// The points of a curve that can be drawn: [x, y, iteration] where both are finite numbers.
function plotted(points, column, y) {
  return points.filter((p) => typeof p[column] === "number" && typeof p[y] === "number").map((p) => [p[column], p[y], p[0]]);
}

// ", N evaluations not finite (...)" for a run whose validation loss went NaN or infinite.
function nonFiniteWords(run) {
  const bad = run.curves ? run.curves.val.filter((p) => typeof p[3] === "string").map((p) => p[0]) : [];
  return bad.length ? `, ${bad.length} evaluation${bad.length > 1 ? "s" : ""} not finite (iteration${bad.length > 1 ? "s" : ""} ${bad.join(", ")}: left out of the curves)` : "";
}

function curveSeries() {
  const [column] = AXES[trainingState.axis];
  const bits = inBits(trainingState.runs);
  const y = bits ? 4 : 3;
  const series = [];
  trainingState.runs.forEach((run, r) => {
    if (!run.curves) return;
    const colour = RUN_COLOURS[r % RUN_COLOURS.length];
    const train = plotted(run.curves.train, column, y);
    // the training batches' loss, smoothed over a window centred on each point (no lag)
    const half = Math.max(1, Math.round(train.length / 60));
    const smooth = train.map((p, i) => {
      const window = train.slice(Math.max(0, i - half), i + half + 1);
      return [p[0], window.reduce((s, q) => s + q[1], 0) / window.length, p[2]];
    });
    series.push({ run, label: `${run.name} train (batches, centred mean)`, colour, points: smooth, width: 1.2, dash: "4 3" });
    const probe = plotted((run.curves.probe || []), column, y);
    series.push({ run, label: `${run.name} validation slice (probes)`, colour, points: probe, width: 0.8, dash: "1 3", dots: true, dotRadius: 1.8 });
    series.push({ run, label: `${run.name} validation`, colour, width: 2.2, dots: true,
      points: plotted(run.curves.val, column, y) });
  });
  return { series: series.filter((s) => s.points.length), unit: bits ? "bits per byte" : "nats per token" };
}

function drawCurves() {
  const { series, unit } = curveSeries();
  const ns = "http://www.w3.org/2000/svg";
  const W = 620, H = 300, L = 58, R = 12, T = 10, B = 40;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("width", "100%"); svg.id = "curves-svg";
  const add = (tag, attrs, text) => { const n = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); if (text !== undefined) n.textContent = text; svg.append(n); return n; };
  const all = series.flatMap((s) => s.points);
  $("#curves").replaceChildren(svg);
  $("#curve-legend").replaceChildren(...series.map((s) => el("div", {}, el("span", { class: "swatch", style: `border-top: 3px ${s.dash ? "dashed" : "solid"} ${s.colour}` }), s.label)));
  if (!all.length) return;
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  const xt = niceTicks(Math.min(...xs), Math.max(...xs)), yt = niceTicks(Math.min(...ys), Math.max(...ys));
  const x0 = Math.min(xt[0], ...xs), x1 = Math.max(xt[xt.length - 1], ...xs, x0 + 1);
  const y0 = Math.min(yt[0], ...ys), y1 = Math.max(yt[yt.length - 1], ...ys, y0 + 1e-6);
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R), sy = (y) => T + ((y1 - y) / (y1 - y0)) * (H - T - B);
  for (const t of yt) {
    add("line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t), stroke: "#eceef3" });
    add("text", { x: L - 5, y: sy(t) + 4, "text-anchor": "end", "font-size": 10, fill: "#667" }, t.toFixed(2));
  }
  for (const t of xt) add("text", { x: sx(t), y: H - 24, "text-anchor": "middle", "font-size": 10, fill: "#667" }, thousands(t));
  add("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#ccd" });
  add("text", { x: (W + L) / 2, y: H - 6, "font-size": 11, fill: "#445", "text-anchor": "middle" }, AXES[trainingState.axis][1]);
  add("text", { x: 12, y: (H - B) / 2, "font-size": 11, fill: "#445", "text-anchor": "middle", transform: `rotate(-90 12 ${(H - B) / 2})` }, unit);
  for (const s of series) {
    const attrs = { points: s.points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "), fill: "none", stroke: s.colour, "stroke-width": s.width };
    if (s.dash) attrs["stroke-dasharray"] = s.dash;
    add("polyline", attrs);
    if (s.dots) for (const p of s.points) {
      const dot = add("circle", { cx: sx(p[0]), cy: sy(p[1]), r: s.dotRadius || 3, fill: s.colour, class: s.dotRadius ? "probe-dot" : "eval-dot" });
      const title = document.createElementNS(ns, "title");
      title.textContent = `${s.label} at iteration ${thousands(p[2])}: ${p[1].toFixed(4)} ${unit}`;
      dot.append(title);
    }
  }
  if (trainingState.iteration !== null && trainingState.axis === "iteration") {
    add("line", { x1: sx(trainingState.iteration), x2: sx(trainingState.iteration), y1: T, y2: H - B, stroke: "#888", "stroke-dasharray": "2 2" });
  }
  svg.onmousemove = (event) => {
    const rect = svg.getBoundingClientRect();
    const x = x0 + ((event.clientX - rect.left) * (W / rect.width) - L) / (W - L - R) * (x1 - x0);
    const near = series.map((s) => {
      const p = s.points.reduce((a, b) => (Math.abs(b[0] - x) < Math.abs(a[0] - x) ? b : a));
      return `${s.label}: ${p[1].toFixed(4)} at ${thousands(p[0])}`;
    });
    $("#curve-readout").textContent = near.join(" · ");
  };
}

// ---------------------------------------------------------------- the probes
function probeTable(caption, rows, columns, cell) {
  return el("table", { class: "grid-table" }, el("caption", { text: caption }),
    el("tr", {}, el("th"), ...columns.map((c) => el("th", { text: c }))),
    ...rows.map((label, i) => el("tr", {}, el("th", { text: label }), ...columns.map((_, j) => cell(i, j)))));
}

function probePanel(run, entry) {
  const panel = el("div", { class: "probe-panel", "data-run": String(run.index) }, el("h3", { text: run.name }));
  if (!entry) return panel;
  if (entry.error) { panel.append(el("div", { class: "error", text: entry.error })); return panel; }
  const record = entry.record;
  const tokens = record.prompt.tokens.map(visible);
  panel.append(el("div", { class: "muted", text: `iteration ${thousands(record.iter)}, ${thousands(record.tokens_seen)} tokens seen, ${record.elapsed_s.toFixed(1)} s; loss on the probe's text ${record.slice_loss.toFixed(4)} nats/token` }));
  if (record.next_token) {
    const top = record.next_token;
    const rows = top.ids.map((id, i) => el("tr", { "data-id": String(id) },
      el("td", { class: "token", text: visible(top.tokens[i]) }), el("td", { class: "p-before", text: fmt(top.probs[i]) }),
      el("td", { class: "bar-cell" }, el("div", { class: "bar", style: `width:${(100 * top.probs[i] / top.probs[0]).toFixed(1)}%` }))));
    panel.append(el("table", { class: "probe-next" }, el("caption", { text: `next token after "${record.prompt.text.slice(-40)}"` }), ...rows));
  }
  if (record.sample !== undefined) {
    panel.append(el("div", { class: "probe-sample" }, el("span", { class: "prompt-text", text: record.prompt.text }), record.sample));
  }
  const layers = record.attention.length, heads = record.attention[0].length;
  const layer = Math.min(trainingState.layer, layers - 1), head = Math.min(trainingState.head, heads - 1);
  const canvas = el("canvas", { class: "probe-attention" });
  panel.append(el("div", {}, el("div", { class: "muted", text: `attention, layer ${layer} head ${head}` }), canvas));
  drawHeatmap(canvas, record.attention[layer][head], tokens); // explorer.js
  const lens = record.lens;
  panel.append(el("div", { class: "scroll-x" }, probeTable("logit lens: each stage's top token (colour: P of the real next token)", lens.stages, tokens, (s, t) => {
    const p = lens.target_probs[s][t];
    return el("td", { class: "lens-cell", style: p === null ? "" : `background:${probabilityColour(p)}`, title: `top ${JSON.stringify(lens.top_tokens[s][t])} p=${fmt(lens.top_probs[s][t])}` }, visible(lens.top_tokens[s][t]).slice(0, 6));
  })));
  const layerNames = Array.from({ length: layers }, (_, l) => `layer ${l}`), headNames = Array.from({ length: heads }, (_, h) => `head ${h}`);
  const importance = record.importance;
  const most = Math.max(1e-9, ...importance.heads.flat().map(Math.abs), ...importance.mlps.map(Math.abs));
  panel.append(probeTable(`Δloss when each part is zeroed (over ${thousands(importance.tokens)} tokens)`, layerNames, [...headNames, "MLP"], (l, h) => {
    const value = h < heads ? importance.heads[l][h] : importance.mlps[l];
    return el("td", { class: "importance", style: `background:${signedColour(value / most)}` }, value === null ? "·" : value.toFixed(3));
  }));
  if (record.head_roles) {
    const roles = record.head_roles;
    for (const [key, label] of [["previous_token", "previous-token score"], ["induction", "induction score"]]) {
      panel.append(probeTable(label, layerNames, headNames, (l, h) => el("td", { class: "role", style: `background:${viridis(roles[key][l][h])};color:${roles[key][l][h] > 0.6 ? "#222" : "#fff"}` }, roles[key][l][h].toFixed(2))));
    }
    panel.append(el("div", { class: "muted", text: `repeated random tokens: loss ${roles.loss_first_copy.toFixed(2)} on the first copy, ${roles.loss_second_copy.toFixed(2)} on the second` }));
  }
  return panel;
}

function drawProbes() {
  const panels = trainingState.runs.map((run) => probePanel(run, trainingState.probes[run.index]));
  if (panels.length === 1) panels[0].classList.add("single");
  $("#probe-panels").replaceChildren(...panels);
  drawCurves();
}
