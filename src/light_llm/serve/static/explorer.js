// The explorer page: plain JavaScript over the JSON API of light_llm.serve.app.
// Every number shown comes from the server, computed by the code that trains the models.
"use strict";

const RIVER = "The bank of the river was flooded!"; // seed 003's example sentence
// the first: mid-sentence, so the opening distribution has something to weigh ("sun", ...)
const GPT_PRESETS = ["It is the east, and Juliet is the", "ROMEO:", "To be, or not to be", "First Citizen:\nBefore we proceed"];
const ENCODER_PRESETS = [RIVER, "I love dogs.", "to be or not to be"];
const MASK_PRESET = "the bank of the [MASK] was flooded!";
const SIMILARITY_PRESET = [RIVER, "The river overflowed its banks.", "I deposited money at the bank."];
const DEBOUNCE_MS = 200;
const MODEL_CHECK_MS = 5000;

const state = { model: null, attention: null, hovered: null, selected: [0, 0], generating: false, redrawing: false };

// ---------------------------------------------------------------- small helpers
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}
const $ = (selector) => document.querySelector(selector);
const fmt = (x, digits = 4) => (typeof x === "number" ? x.toFixed(digits) : String(x));
const visible = (token) => token.replace(/ /g, "␣").replace(/\n/g, "⏎").replace(/\t/g, "⇥") || "''";

function debounce(fn, ms = DEBOUNCE_MS) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

class ApiError extends Error {
  constructor(message, detail) { super(message); this.detail = detail; }
}

// One sentence from an API error: "field: message" for a 422, the detail otherwise.
function errorSentence(status, body) {
  const detail = body && body.detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => `${d.loc[d.loc.length - 1]}: ${d.msg}`).join("; ");
  }
  return detail || `the server answered ${status}.`;
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, options);
  } catch (exc) {
    throw new ApiError("the server does not answer: is light-llm serve still running?", null);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(errorSentence(response.status, data), data && data.detail);
  return data;
}

// Shows an error sentence in `box`; for a prompt longer than the context, offers to cut it.
// A problem of the prompt itself is said once, under the prompt, and the panel it stopped is
// greyed until the next prompt.
function showError(box, exc) {
  const aboutPrompt = Array.isArray(exc.detail) && exc.detail.some((d) => d.loc[d.loc.length - 1] === "prompt");
  if (aboutPrompt && box.id !== "prompt-error") {
    const section = box.closest("section");
    if (section) section.classList.add("stale");
    box.replaceChildren();
    box = $("#prompt-error");
  }
  box.replaceChildren(exc.message);
  const offer = Array.isArray(exc.detail) && exc.detail.find((d) => d.kept_prompt !== undefined);
  if (offer) {
    box.append(" ", el("button", {
      class: "secondary", id: "keep-last",
      text: `keep the last ${offer.keep_last} tokens`,
      onclick: () => { $("#prompt").value = offer.kept_prompt; refreshPrompt(); },
    }));
  }
}

// viridis, sampled at 0, .25, .5, .75, 1 and interpolated
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function viridis(t) {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
  const c = VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// probability -> a background from pale red (unlikely) to pale green (likely)
const probabilityColour = (p) => `hsl(${Math.round(120 * Math.min(Math.max(p, 0), 1))}, 75%, 82%)`;

// the key to probabilityColour: "P: 0 [pale red ... pale green] 1"
const probabilityLegend = () => el("span", { class: "legend" }, "P: 0",
  el("span", { class: "scale", style: `background: linear-gradient(to right, ${probabilityColour(0)}, ${probabilityColour(0.5)}, ${probabilityColour(1)})` }),
  "1");

// ---------------------------------------------------------------- model page
function promptSection(presets) {
  const select = el("select", { id: "preset", onchange: (e) => {
    if (e.target.value) { $("#prompt").value = e.target.value; refreshPrompt(); }
  } }, el("option", { value: "", text: "presets…" }));
  for (const p of presets) select.append(el("option", { value: p, text: p.replace(/\n/g, " ⏎ ") }));
  return el("section", { id: "prompt-section" },
    el("h2", { text: "Prompt" }),
    el("textarea", { id: "prompt", rows: "3", spellcheck: "false", oninput: debounce(refreshPrompt) }),
    el("div", { class: "row" }, select,
      el("span", { id: "token-count", class: "muted" })),
    el("div", { id: "chips", class: "chips" }),
    el("div", { id: "prompt-error", class: "error" }));
}

function nextTokenSection() {
  const update = debounce(refreshNextToken, 60);
  const range = (id, min, max, step, value) =>
    el("input", { type: "range", id, min, max, step, value, oninput: (e) => {
      $(`#${id}-value`).textContent = e.target.value; update();
    } });
  return el("section", { id: "next-section" },
    el("h2", { text: "Next token: P = softmax(logits), then temperature, top-k, top-p (seed 000 §8)" }),
    el("div", { class: "row" },
      el("label", {}, "temperature τ", range("temperature", "0", "2", "0.05", String(state.model.defaults.temperature)),
        el("span", { id: "temperature-value", class: "value", text: String(state.model.defaults.temperature) })),
      el("label", {}, "top-k", el("input", { type: "number", id: "top-k", min: "1", placeholder: "off", oninput: update })),
      el("label", {}, "top-p", range("top-p", "0.05", "1", "0.05", "1"),
        el("span", { id: "top-p-value", class: "value", text: "1" }))),
    el("div", { id: "next-summary", class: "muted" }),
    el("table", { id: "next-table" },
      el("thead", {}, el("tr", {},
        el("th", { text: "#" }), el("th", { text: "token" }), el("th", { text: "id" }),
        el("th", { text: "P before" }), el("th", { text: "" }), el("th", { text: "P after filters" }),
        el("th", { text: "" }), el("th", { text: "kept" }))),
      el("tbody")),
    el("div", { id: "next-error", class: "error" }));
}

function attentionSection(causal, linear) {
  // linear attention (seed 002 eq. 48) averages the values with φ(q_i)·φ(k_j) over its row sum
  const formula = linear ? "A_ij = φ(q_i)·φ(k_j) / Σ_j′≤i φ(q_i)·φ(k_j′), φ = elu + 1" : "A = softmax(QKᵀ / √d_k)";
  return el("section", { id: "attention-section" },
    el("h2", { text: `Attention ${formula}${causal ? ", causal" : ", bidirectional"}: every layer and head` }),
    el("p", { class: "muted", text: "Row i is what token i attends to. Hover a token chip to mark its row; click a head to enlarge it." }),
    el("div", { class: "attention-views" },
      el("div", { id: "heads", class: "heads" }),
      el("div", { class: "enlarged" },
        el("div", { id: "enlarged-title" }), el("canvas", { id: "enlarged" }),
        el("div", { id: "enlarged-cell", class: "muted" }))),
    el("div", { id: "attention-error", class: "error" }));
}

function generateSection() {
  return el("section", { id: "generate-section" },
    el("h2", { text: "Generate: token by token, each coloured by the probability it was drawn with" }),
    el("div", { class: "row" },
      el("label", {}, "new tokens", el("input", { type: "number", id: "max-new-tokens", min: "1", max: "4096", value: "80" })),
      el("label", {}, "seed", el("input", { type: "number", id: "seed", min: "0", value: "1337" })),
      el("button", { id: "generate", text: "generate", onclick: startGeneration }),
      probabilityLegend(),
      el("span", { id: "generate-status", class: "muted" })),
    el("div", { id: "generated" }),
    el("div", { id: "generate-error", class: "error" }));
}

function fillMaskSection(enabled) {
  const section = el("section", { id: "fill-mask-section" },
    el("h2", { text: "Fill-mask: P = softmax(logits) at each [MASK] (seed 003 §29)" }));
  if (!enabled) {
    section.append(el("p", { class: "muted", text: "This encoder has no masked-LM head (MiniLM is a sentence-embedding model): train one with light-llm train --model bert." }));
    return section;
  }
  section.append(
    el("div", { class: "row" }, el("input", { type: "text", id: "mask-text", value: MASK_PRESET }),
      el("button", { id: "fill-mask", text: "predict", onclick: refreshFillMask })),
    el("div", { id: "mask-results" }), el("div", { id: "mask-error", class: "error" }));
  return section;
}

function similaritySection() {
  return el("section", { id: "similarity-section" },
    el("h2", { text: "Sentence similarity: cos(u, v) of mean-pooled, normalised embeddings" }),
    el("textarea", { id: "sentences", rows: "4", spellcheck: "false" }),
    el("div", { class: "row" }, el("button", { id: "similarity", text: "compare", onclick: refreshSimilarity }),
      el("span", { class: "muted", text: "one sentence a line" })),
    el("div", { id: "similarity-results" }), el("div", { id: "similarity-error", class: "error" }));
}

function cardSection(model) {
  const rows = [
    ["kind", model.kind === "gpt" ? "GPT (decoder, causal)" : "encoder (bidirectional)"],
    ["run", model.name], ["chosen as", model.origin.replace(/ --checkpoint .*/, " --checkpoint").replace(/ under \/.*/, " here")],
    ["parameters", model.parameters.toLocaleString("en")],
    ["weights", model.quantization === "int8"
      ? "int8: each row's q and scale s in the folder, shown here as q·s (light-llm quantize)"
      : "float"],
    ["tokenizer", `${model.tokenizer.name}, ${model.tokenizer.vocab_size} tokens`],
    ["context", `${model.context} tokens`],
  ];
  const training = model.training || {};
  for (const [key, label] of [["iteration", "iterations"], ["val_loss", "validation loss (nats/token)"],
    ["val_bpb", "validation bits per byte"], ["val_perplexity", "validation perplexity"],
    ["best_val_loss", "best validation loss"], ["tokens_seen", "training tokens seen"]]) {
    if (training[key] !== undefined) rows.push([label, typeof training[key] === "number" && !Number.isInteger(training[key]) ? fmt(training[key]) : String(training[key])]);
  }
  const config = Object.entries(model.config).map(([k, v]) => `${k}=${v}`).join("  ");
  rows.push(["config", config]);
  const table = el("table", { class: "card" });
  for (const [k, v] of rows) table.append(el("tr", {}, el("td", { text: k }), el("td", { text: v, style: "text-align:left; white-space: normal" })));
  const section = el("section", { id: "card-section" }, el("h2", { text: "Model card" }),
    el("div", { class: "grid2" }, table, el("div", { id: "loss-curve" })));
  section.querySelector("#loss-curve").append(el("p", { class: "muted", text: training.curve
    ? "Its learning curves, probes and samples are in the Learning section above."
    : "No training record (metrics.jsonl) beside this checkpoint." }));
  return section;
}

// ---------------------------------------------------------------- refreshing
function currentPrompt() { return $("#prompt").value; }

async function refreshPrompt() {
  const prompt = currentPrompt();
  $("#prompt-error").replaceChildren();
  document.querySelectorAll("section.stale").forEach((section) => section.classList.remove("stale"));
  if (!prompt) {
    $("#chips").replaceChildren(); $("#token-count").textContent = "";
    return;
  }
  try {
    const tokens = await api("/api/tokenize", { text: prompt });
    if (prompt !== currentPrompt()) return; // typed on meanwhile
    drawChips(tokens);
  } catch (exc) { showError($("#prompt-error"), exc); return; }
  const jobs = [refreshAttention(), refreshFlow()];
  if (state.model.capabilities.next_token) jobs.push(refreshNextToken(), refreshInspect());
  await Promise.all(jobs);
}

function drawChips(tokens) {
  $("#token-count").textContent = `${tokens.count} tokens of ${tokens.context}`;
  const chips = tokens.tokens.map((token, i) => el("span", {
    class: "chip", title: `id ${tokens.ids[i]}`, "data-index": String(i),
    onmouseenter: () => hover(i), onmouseleave: () => hover(null),
  }, visible(state.model.kind === "gpt" ? tokens.pieces[i] : token)));
  $("#chips").replaceChildren(...chips);
}

function hover(index) {
  state.hovered = index;
  document.querySelectorAll(".chip").forEach((chip, i) => chip.classList.toggle("hovered", i === index));
  drawAllHeatmaps();
}

function samplingOptions() {
  const topK = $("#top-k").value.trim();
  const topP = Number($("#top-p").value);
  return {
    temperature: Number($("#temperature").value),
    top_k: topK === "" ? null : Number(topK),
    top_p: topP >= 1 ? null : topP,
  };
}

async function refreshNextToken() {
  const prompt = currentPrompt();
  const box = $("#next-error");
  if (!prompt) return;
  try {
    const result = await api("/api/next-token", { prompt, ...samplingOptions(), limit: 20 });
    box.replaceChildren();
    // both columns of bars on one scale: a temperature below 1 visibly sharpens, above 1 flattens
    const maximum = Math.max(...result.tokens.map((t) => Math.max(t.probability, t.filtered_probability)));
    const rows = result.tokens.map((t, i) => el("tr", { class: t.kept ? "kept" : "dropped", "data-id": String(t.id) },
      el("td", { text: String(i + 1) }), el("td", { class: "token", text: visible(t.token) }),
      el("td", { text: String(t.id) }), el("td", { class: "p-before", text: fmt(t.probability) }),
      el("td", { class: "bar-cell" }, el("div", { class: "bar", style: `width:${(100 * t.probability / maximum).toFixed(1)}%` })),
      el("td", { class: "p-after", text: fmt(t.filtered_probability) }),
      el("td", { class: "bar-cell" }, el("div", { class: "bar after", style: `width:${(100 * t.filtered_probability / maximum).toFixed(1)}%` })),
      el("td", { class: "kept-mark", text: t.kept ? "✓" : "" })));
    $("#next-table tbody").replaceChildren(...rows);
    $("#next-summary").textContent = `kept ${result.kept_count} of ${result.vocab_size} tokens, ` +
      `holding ${(100 * result.kept_mass_before).toFixed(1)}% of the mass before the filters`;
  } catch (exc) { showError(box, exc); }
}

async function refreshAttention() {
  const prompt = currentPrompt();
  const box = $("#attention-error");
  try {
    const attention = await api("/api/attention", { prompt });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    state.attention = attention;
    const layers = attention.weights.length, heads = attention.weights[0].length;
    const [l, h] = state.selected;
    if (l >= layers || h >= heads) state.selected = [0, 0];
    const grid = $("#heads");
    grid.style.gridTemplateColumns = `auto repeat(${heads}, max-content)`;
    const children = [];
    const size = Math.max(40, Math.min(96, Math.floor(520 / heads) - 8));
    for (let layer = 0; layer < layers; layer++) {
      children.push(el("span", { class: "layer-label", text: `layer ${layer}` }));
      for (let head = 0; head < heads; head++) {
        const canvas = el("canvas", { class: "heatmap", width: String(size), height: String(size),
          title: `layer ${layer}, head ${head}`, "data-layer": String(layer), "data-head": String(head),
          onclick: () => { state.selected = [layer, head]; drawAllHeatmaps(); } });
        children.push(canvas);
      }
    }
    grid.replaceChildren(...children);
    drawAllHeatmaps();
  } catch (exc) { showError(box, exc); }
}

function drawHeatmap(canvas, matrix, labels) {
  const n = matrix.length, margin = labels ? 90 : 0;
  const cell = labels ? Math.max(14, Math.min(36, Math.floor(560 / n))) : canvas.width / n;
  if (labels) { canvas.width = margin + cell * n; canvas.height = margin + cell * n; }
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  for (let q = 0; q < n; q++) {
    for (let k = 0; k < n; k++) {
      ctx.fillStyle = viridis(matrix[q][k]);
      ctx.fillRect(margin + k * cell, margin + q * cell, Math.ceil(cell), Math.ceil(cell));
    }
  }
  if (state.hovered !== null && state.hovered < n) {
    ctx.strokeStyle = "#ff3b1f"; ctx.lineWidth = labels ? 3 : 2;
    ctx.strokeRect(margin + 1, margin + state.hovered * cell + 1, n * cell - 2, cell - 2);
  }
  if (labels) {
    ctx.fillStyle = "#1d2330"; ctx.font = "12px ui-monospace, monospace";
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    labels.forEach((label, i) => ctx.fillText(label.slice(0, 10), margin - 4, margin + (i + 0.5) * cell));
    ctx.save();
    labels.forEach((label, i) => {
      ctx.setTransform(1, 0, 0, 1, margin + (i + 0.5) * cell, margin - 4);
      ctx.rotate(-Math.PI / 2); ctx.textAlign = "left"; ctx.fillText(label.slice(0, 10), 0, 0);
    });
    ctx.restore();
    if (cell >= 30) {
      ctx.textAlign = "center"; ctx.font = "10px ui-monospace, monospace";
      for (let q = 0; q < n; q++) for (let k = 0; k < n; k++) {
        ctx.fillStyle = matrix[q][k] > 0.6 ? "#222" : "#eee";
        ctx.fillText(matrix[q][k].toFixed(2), margin + (k + 0.5) * cell, margin + (q + 0.5) * cell);
      }
    }
  }
}

function drawAllHeatmaps() {
  const attention = state.attention;
  if (!attention) return;
  document.querySelectorAll("canvas.heatmap").forEach((canvas) => {
    const layer = Number(canvas.dataset.layer), head = Number(canvas.dataset.head);
    drawHeatmap(canvas, attention.weights[layer][head], null);
    canvas.classList.toggle("selected", layer === state.selected[0] && head === state.selected[1]);
  });
  const [layer, head] = state.selected;
  const big = $("#enlarged");
  const labels = attention.tokens.map(visible);
  drawHeatmap(big, attention.weights[layer][head], labels);
  $("#enlarged-title").textContent = `layer ${layer}, head ${head}` +
    (state.hovered !== null ? `: row of "${labels[state.hovered]}"` : "");
  big.onmousemove = (event) => {
    const n = labels.length, margin = 90, cell = (big.width - margin) / n;
    const rect = big.getBoundingClientRect();
    const k = Math.floor((event.clientX - rect.left - margin) / cell), q = Math.floor((event.clientY - rect.top - margin) / cell);
    $("#enlarged-cell").textContent = q >= 0 && k >= 0 && q < n && k < n
      ? `"${labels[q]}" attends to "${labels[k]}" with weight ${fmt(attention.weights[layer][head][q][k])}` : "";
  };
}

// Server-sent events over fetch (EventSource cannot POST): yields {event, data}.
async function* serverSentEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield { event, data: JSON.parse(data) };
    }
  }
}

async function startGeneration() {
  if (state.generating) return;
  const prompt = currentPrompt();
  const box = $("#generate-error"), status = $("#generate-status"), out = $("#generated");
  box.replaceChildren();
  const seedText = $("#seed").value.trim();
  const body = { prompt, max_new_tokens: Number($("#max-new-tokens").value), ...samplingOptions(),
    seed: seedText === "" ? null : Number(seedText) };
  state.generating = true; $("#generate").disabled = true;
  out.replaceChildren(el("span", { class: "prompt-text", text: prompt }));
  status.textContent = "starting…"; status.dataset.state = "running";
  let count = 0, unseen = "";
  try {
    const response = await fetch("/api/generate", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!response.ok) throw new ApiError(errorSentence(response.status, await response.json().catch(() => null)), null);
    for await (const { event, data } of serverSentEvents(response)) {
      if (event === "queued") status.textContent = `waiting: ${data.ahead} generation(s) ahead`;
      else if (event === "start") {
        // a prompt longer than the context: the model reads its last tokens only (as the CLI notes)
        if (data.not_seen) unseen = ` (the model read the prompt's last ${data.context} of ${data.prompt_tokens} tokens: its first ${data.not_seen} were not seen)`;
        status.textContent = `generating…${unseen}`;
      }
      else if (event === "token") {
        const p = data.tokens.length ? Math.min(...data.tokens.map((t) => t.probability)) : 1;
        const title = data.tokens.map((t) => `${JSON.stringify(t.token)} id ${t.id}: p = ${fmt(t.probability)}`).join("\n");
        out.append(el("span", { class: "gen-token", style: `background:${probabilityColour(p)}`, title, "data-p": String(p) }, data.text));
        count += data.tokens.length;
        status.textContent = `generating… ${count} tokens${unseen}`;
      } else if (event === "done") {
        out.dataset.text = data.text;
        status.textContent = `done: ${count} tokens${unseen}`; status.dataset.state = "done";
      } else if (event === "error") throw new ApiError(data.detail, null);
    }
    if (status.dataset.state !== "done") throw new ApiError("the generation stopped before its end: is the server still running?", null);
  } catch (exc) {
    const message = exc instanceof ApiError ? exc.message : "the server does not answer: is light-llm serve still running?";
    showError(box, new ApiError(message, null)); status.textContent = "stopped"; status.dataset.state = "error";
  } finally {
    state.generating = false; $("#generate").disabled = false;
  }
}

async function refreshFillMask() {
  const box = $("#mask-error");
  try {
    const result = await api("/api/fill-mask", { text: $("#mask-text").value, top_k: 8 });
    box.replaceChildren();
    const tables = result.masks.map((candidates, i) => {
      const table = el("table", {}, el("caption", { text: `[MASK] ${i + 1}` }));
      for (const c of candidates) table.append(el("tr", {}, el("td", { class: "token", text: c.token }), el("td", { text: fmt(c.probability) })));
      return table;
    });
    const cut = result.left_out ? [el("p", { class: "note", text: `The model reads ${state.model.context} positions: ${result.left_out} token${result.left_out > 1 ? "s" : ""} of the text (no [MASK] among them) were cut off and not seen.` })] : [];
    $("#mask-results").replaceChildren(el("div", { class: "row" }, ...tables), ...cut);
  } catch (exc) { showError(box, exc); }
}

async function refreshSimilarity() {
  const box = $("#similarity-error");
  const sentences = $("#sentences").value.split("\n").map((s) => s.trim()).filter(Boolean);
  try {
    const result = await api("/api/similarity", { sentences });
    box.replaceChildren();
    const table = el("table", { class: "similarity" });
    table.append(el("tr", {}, el("th"), ...sentences.map((_, j) => el("th", { text: `[${j}]` }))));
    result.similarity.forEach((row, i) => table.append(el("tr", {},
      el("th", { text: `[${i}] ${sentences[i]}`, style: "text-align:left" }),
      ...row.map((v) => el("td", { text: fmt(v), style: `background:${probabilityColour(v)}` })))));
    $("#similarity-results").replaceChildren(table);
  } catch (exc) { showError(box, exc); }
}

async function modelPage(app) {
  const model = state.model;
  const gpt = model.kind === "gpt";
  const sections = [promptSection(gpt ? GPT_PRESETS : ENCODER_PRESETS)];
  if (gpt) sections.push(nextTokenSection());
  sections.push(attentionSection(gpt, model.config.attention === "linear"), flowSection()); // flow.js
  if (gpt) sections.push(generateSection());
  else sections.push(fillMaskSection(model.capabilities.fill_mask), similaritySection());
  sections.push(...inspectSections(model)); // inspect.js
  const runs = await api("/api/runs").catch(() => []);
  if (runs.length) sections.push(trainingSection()); // training.js
  sections.push(cardSection(model));
  app.replaceChildren(...sections);
  if (runs.length) startTraining();
  $("#nav-model").classList.add("current");
  if (!gpt) $("#sentences").value = SIMILARITY_PRESET.join("\n");
  $("#prompt").value = gpt ? GPT_PRESETS[0] : RIVER;
  await refreshPrompt();
}

// ---------------------------------------------------------------- worked examples
// A number as light-llm explain prints it: integers as they are, else 4 decimals (or 4
// significant digits in scientific notation for tables of tiny numbers); "·" where the seed
// prints nothing; "inf" / "-inf" for masked scores.
function cellText(value, format, decimals = 4) {
  if (value === null) return "·";
  if (typeof value !== "number") return String(value);
  if (format === "integer") return String(value);
  if (!Number.isFinite(value)) return value < 0 ? "-inf" : "inf";
  const text = format === "scientific"
    ? value.toExponential(decimals).replace(/e([+-])(\d)$/, "e$10$2") // Python's e-03, not e-3
    : value.toFixed(decimals);
  return text.startsWith("-") && Number(text) === 0 ? text.slice(1) : text;
}

// A step's value (scalar, vector or matrix) as a table, with `differs` cells marked.
function valueTable(value, rows, columns, differs, caption, format, decimals = 4) {
  const table = el("table", {}, el("caption", { text: caption }));
  const cell = (v) => cellText(v, format, decimals);
  if (!Array.isArray(value)) {
    table.append(el("tr", {}, el("td", { text: cell(value) + (differs ? "*" : ""), class: differs ? "differs" : "" })));
    return table;
  }
  const matrix = Array.isArray(value[0]) ? value : [value];
  const marks = differs === null ? null : (Array.isArray(differs[0]) ? differs : [differs]);
  const colLabels = Array.isArray(value[0]) ? columns : (rows || columns);
  if (colLabels) table.append(el("tr", {}, el("th"), ...colLabels.map((c) => el("th", { text: c }))));
  matrix.forEach((row, i) => {
    const label = Array.isArray(value[0]) && rows ? rows[i] : "";
    table.append(el("tr", {}, el("th", { text: label }),
      ...(Array.isArray(row) ? row : [row]).map((v, j) => el("td", {
        text: cell(v) + (marks && marks[i][j] ? "*" : ""), class: marks && marks[i][j] ? "differs" : "",
      }))));
  });
  return table;
}

async function explainList(app) {
  $("#nav-explain").classList.add("current");
  const examples = await api("/api/explain");
  const list = el("ul", { class: "examples", id: "examples" });
  for (const e of examples) list.append(el("li", {}, el("a", { href: `/explain/${e.name}`, text: e.name }), " — ", e.summary));
  app.replaceChildren(el("section", {}, el("h2", { text: "Worked examples (light-llm explain)" }),
    el("p", { class: "muted", text: "The seeds' examples, computed by the code that trains the models; the seed's printed figure beside the exact one, * where it differs." }), list));
}

async function explainPage(app, name) {
  $("#nav-explain").classList.add("current");
  let example;
  try { example = await api(`/api/explain/${encodeURIComponent(name)}`); }
  catch (exc) { app.replaceChildren(el("section", {}, el("div", { class: "error", text: exc.message }))); return; }
  document.title = `${example.name} · light-llm explorer`;
  const steps = el("div", { id: "steps" });
  example.steps.forEach((step, i) => {
    const tables = el("div", { class: "tables" }, valueTable(step.value, step.rows, step.columns, null, "exact", step.format));
    if (step.seed_value !== null) {
      tables.append(valueTable(step.seed_value, step.rows, step.columns, step.seed_differs, "the seed prints", "decimal", step.seed_decimals));
    }
    steps.append(el("div", { class: "step" },
      el("h3", { text: `${i + 1}. ${step.title}` }), el("div", { class: "seed-ref", text: step.seed }),
      el("p", { text: step.text }), tables));
  });
  const figures = el("div", { class: "figures", id: "figures" });
  for (const url of example.figures) figures.append(el("img", { src: url, alt: `${example.name} picture` }));
  app.replaceChildren(el("section", { id: "example" },
    el("h2", { text: `${example.name}: ${example.summary}` }),
    el("p", {}, el("a", { href: "/explain", text: "← all examples" })), figures, steps));
}

// ---------------------------------------------------------------- start
function showWarning(sentence) {
  $("#banner").textContent = sentence || "";
  $("#banner").hidden = !sentence;
}

// The iteration of the checkpoint a card describes (undefined for a model not trained here).
function cardIteration(card) { return (card.training || {}).iteration; }

// Every few seconds: is the checkpoint folder still there, is the server still up? And has the
// run training beside it saved a newer checkpoint, which the server now serves: then the card
// and the prompt's panels are drawn again from it (the page's body says which iteration in
// data-panels-iteration once they are).
async function checkModel() {
  let card;
  try {
    card = await api("/api/model");
  } catch (exc) {
    showWarning(exc.message);
    return;
  }
  showWarning(card.warning);
  if (state.redrawing || !$("#card-section") || cardIteration(card) === cardIteration(state.model)) return;
  state.redrawing = true;
  try {
    state.model = card;
    $("#card-section").replaceWith(cardSection(card));
    await refreshPrompt();
    document.body.dataset.panelsIteration = String(cardIteration(card));
  } finally {
    state.redrawing = false;
  }
}

async function main() {
  const app = $("#app");
  try {
    state.model = await api("/api/model");
  } catch (exc) {
    app.replaceChildren(el("div", { class: "error", text: exc.message }));
    return;
  }
  $("#model-name").textContent = `${state.model.name} · ${state.model.kind}`;
  showWarning(state.model.warning);
  setInterval(checkModel, MODEL_CHECK_MS);
  const path = window.location.pathname.replace(/\/+$/, "");
  if (path === "/explain") await explainList(app);
  else if (path.startsWith("/explain/")) await explainPage(app, decodeURIComponent(path.slice(9)));
  else await modelPage(app);
  document.body.dataset.ready = "true";
}

main();
