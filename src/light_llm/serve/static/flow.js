// The whole model, one picture (issue 24): the forward pass of the served model for one token
// of the prompt, every stage with its real vector (/api/flow, serve/flow.py), its formula
// (typeset here by a small TeX renderer: nothing is fetched from another host) and the worked
// example that derives it. Loaded before explorer.js, whose helpers it calls once the page has
// started.
"use strict";

const flowState = { position: null, result: null, open: null };

// ---------------------------------------------------------------- a small TeX renderer
// The subset the formulas use: \frac, \sqrt, ^ and _ (braced or one character), \mathrm,
// \left( \right), Greek letters and a few symbols, spacing commands. Returns HTML.
const TEX_SYMBOLS = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", theta: "θ", lambda: "λ", mu: "μ", sigma: "σ", phi: "φ",
  tau: "τ", odot: "⊙", cdot: "·", sum: "∑", top: "⊤", leftarrow: "←", mapsto: "↦", max: "max",
  tanh: "tanh", exp: "exp", ln: "ln", infty: "∞", times: "×", approx: "≈", le: "≤", ge: "≥",
};
const TEX_SPACES = { quad: "\u2003", ",": "\u2009", ";": "\u2005", " ": " " };
const escapeHtml = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function texToHtml(source) {
  let i = 0;
  function group() { // {...} or one token
    if (source[i] === "{") {
      i++;
      const inner = sequence("}");
      i++; // the closing brace
      return inner;
    }
    return atom();
  }
  function atom() {
    const c = source[i];
    if (c === "\\") {
      i++;
      if (TEX_SPACES[source[i]] !== undefined && !/[a-z]/i.test(source[i])) return TEX_SPACES[source[i++]];
      const name = source.slice(i).match(/^[a-zA-Z]+/)[0];
      i += name.length;
      if (name === "frac") { const top = group(), bottom = group(); return `<span class="tex-frac"><span>${top}</span><span>${bottom}</span></span>`; }
      if (name === "sqrt") return `<span class="tex-sqrt">√<span>${group()}</span></span>`;
      if (name === "mathrm") return `<span class="tex-rm">${group()}</span>`;
      if (name === "left" || name === "right") return atom();
      if (TEX_SPACES[name] !== undefined) return TEX_SPACES[name];
      return TEX_SYMBOLS[name] !== undefined ? (name.length > 2 && /^[a-z]+$/.test(TEX_SYMBOLS[name]) ? `<span class="tex-rm">${TEX_SYMBOLS[name]}</span>` : TEX_SYMBOLS[name]) : escapeHtml(name);
    }
    i++;
    if (/[a-zA-Z]/.test(c)) return `<i>${c}</i>`;
    return escapeHtml(c);
  }
  function sequence(end) {
    let html = "";
    while (i < source.length && source[i] !== end) {
      const c = source[i];
      if (c === "^" || c === "_") { i++; html += `<${c === "^" ? "sup" : "sub"}>${group()}</${c === "^" ? "sup" : "sub"}>`; }
      else if (c === " ") { i++; }
      else html += c === "{" ? group() : atom();
    }
    return html;
  }
  return sequence(undefined);
}

// ---------------------------------------------------------------- the section
function flowSection() {
  return el("section", { id: "flow-section" },
    el("h2", { text: "The whole model, one picture: the forward pass at one token" }),
    el("p", { class: "muted", text: "Click a token of the prompt to follow it; click a stage for its formula, its numbers and the worked example that derives it. Each strip is the stage's vector: blue positive, red negative." }),
    el("div", { id: "flow-tokens", class: "chips" }),
    el("div", { class: "flow-views" }, el("div", { id: "flow" }), el("div", { id: "flow-detail", class: "flow-detail" })),
    el("div", { id: "flow-error", class: "error" }));
}

async function refreshFlow() {
  const prompt = currentPrompt();
  const box = $("#flow-error");
  if (!prompt) return;
  try {
    const result = await api("/api/flow", { prompt, position: flowState.position });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    flowState.result = result;
    drawFlow();
  } catch (exc) {
    if (flowState.position !== null && Array.isArray(exc.detail) && exc.detail.some((d) => d.loc.includes("position"))) {
      flowState.position = null; // the prompt got shorter: follow its last token
      return refreshFlow();
    }
    showError(box, exc); // explorer.js: a prompt's problem said once, under the prompt
  }
}

// A vector as a strip of cells: blue for positive, red for negative, scaled by its largest size.
function strip(values, label) {
  const flat = values.flat();
  const most = Math.max(1e-12, ...flat.map(Math.abs));
  const canvas = el("canvas", { class: "flow-strip", width: String(Math.min(flat.length, 384)), height: "10", title: label });
  const ctx = canvas.getContext("2d");
  const per = flat.length / canvas.width;
  for (let x = 0; x < canvas.width; x++) {
    const v = flat[Math.floor(x * per)];
    ctx.fillStyle = signedColour(v / most); // inspect.js
    ctx.fillRect(x, 0, 1, 10);
  }
  return canvas;
}

function stageBox(stage, path) {
  const values = stage.values;
  const main = values.vector || values.rows || values.q || values.angles || values.probs || values.logits;
  const box = el("div", { class: "flow-stage", "data-key": stage.key, "data-path": path, tabindex: "0",
    onclick: () => { flowState.open = path; showStage(stage); document.querySelectorAll(".flow-stage").forEach((b) => b.classList.toggle("open", b.dataset.path === path)); } },
    el("div", { class: "flow-title", text: stage.title }));
  if (stage.key === "softmax" || stage.key === "logits") {
    const key = stage.key === "softmax" ? "probs" : "logits";
    const top = values[key][0];
    box.append(el("div", { class: "flow-top" }, ...values.tokens.slice(0, 5).map((token, i) => el("div", { class: "row-bar" },
      el("span", { class: "token", text: visible(token) }),
      el("span", { class: "bar", style: `width:${Math.max(2, (60 * values[key][i]) / top).toFixed(1)}px` }),
      el("span", { class: "value", text: fmt(values[key][i], 3) })))));
  } else if (main) box.append(strip(main, stage.title));
  if (path === flowState.open) box.classList.add("open");
  return box;
}

function drawFlow() {
  const result = flowState.result;
  const t = result.position;
  $("#flow-tokens").replaceChildren(...result.tokens.map((token, i) => el("span", {
    class: "chip" + (i === t ? " hovered" : ""), "data-index": String(i), title: "follow this token",
    onclick: () => { flowState.position = i; refreshFlow(); },
  }, visible(token))));
  const rows = [];
  result.stages.forEach((stage, s) => {
    if (stage.key === "layer") {
      rows.push(el("div", { class: "flow-layer" }, el("div", { class: "flow-layer-label", text: stage.title }),
        el("div", { class: "flow-row" }, ...stage.stages.map((inner, j) => stageBox(inner, `${s}.${j}`)))));
    } else rows.push(el("div", { class: "flow-row" }, stageBox(stage, String(s))));
  });
  if (flowState.open === null) { // at first: the first layer's attention, formula and numbers
    const first = result.stages.findIndex((stage) => stage.key === "layer");
    const inner = result.stages[first].stages.findIndex((stage) => stage.key === "pattern");
    flowState.open = `${first}.${inner}`;
    rows.forEach((row) => row.querySelectorAll(".flow-stage").forEach((b) => b.classList.toggle("open", b.dataset.path === flowState.open)));
  }
  $("#flow").replaceChildren(...rows);
  const open = flowState.open && findStage(flowState.open);
  if (open) showStage(open);
}

function findStage(path) {
  const [s, j] = path.split(".").map(Number);
  const stage = flowState.result.stages[s];
  if (!stage) return null;
  return j === undefined ? stage : stage.stages && stage.stages[j];
}

function numbersOf(values) {
  return Object.entries(values).filter(([key]) => key !== "ids" && key !== "tokens").map(([key, value]) => {
    const flat = [value].flat(3);
    const norm = Math.sqrt(flat.reduce((s, v) => s + v * v, 0));
    const shown = Array.isArray(value[0])
      ? value.map((row, h) => `${key === "rows" ? "head" : key + " head"} ${h}: ${row.slice(0, 8).map((v) => fmt(v, 3)).join(" ")}${row.length > 8 ? " …" : ""}`).join("\n")
      : value.slice(0, 12).map((v) => fmt(v, 4)).join(" ") + (value.length > 12 ? " …" : "");
    return el("div", { class: "flow-numbers", "data-values": key },
      el("div", { class: "muted", text: `${key}: ${flat.length} numbers, ‖·‖ = ${norm.toFixed(3)}, min ${Math.min(...flat).toFixed(3)}, max ${Math.max(...flat).toFixed(3)}` }),
      el("pre", { text: shown }));
  });
}

function showStage(stage) {
  const detail = $("#flow-detail");
  const formula = el("div", { class: "tex" });
  formula.innerHTML = texToHtml(stage.formula); // our own formulas, typeset; no user text
  detail.replaceChildren(el("h3", { text: stage.title }), formula, ...numbersOf(stage.values));
  if (stage.values.tokens) {
    detail.append(el("table", {}, ...stage.values.tokens.map((token, i) => el("tr", {},
      el("td", { class: "token", text: visible(token) }),
      el("td", { text: fmt((stage.values.probs || stage.values.logits)[i]) })))));
  }
  if (stage.example) detail.append(el("p", {}, "derived step by step: ", el("a", { href: `/explain/${stage.example}`, text: `light-llm explain ${stage.example}` })));
}
