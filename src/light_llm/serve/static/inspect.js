// The "look inside" panels (issue 22): plain JavaScript over /api/inspect/... (serve/inspect_api.py).
// Loaded before explorer.js, whose helpers (el, $, api, fmt, visible, debounce, viridis,
// probabilityColour, probabilityLegend, currentPrompt) these functions call once the page has started.
"use strict";

const inspectState = { ablated: [], importanceSource: null, neuronSource: null };
const PATCHING_PRESET = { clean: "To go, or not to go", corrupt: "To be, or not to be", answer: ".", wrong: " a" };

// a fraction restored (or any signed number scaled to [-1, 1]) -> blue (+) / white / red (-)
function signedColour(x) {
  const t = Math.min(Math.abs(x), 1);
  return `hsl(${x >= 0 ? 215 : 5}, 80%, ${Math.round(97 - 45 * t)}%)`;
}

// An error sentence in a panel's box (the offer to cut a long prompt is the prompt panels')
const say = (box, exc) => showError(box, exc); // explorer.js: a prompt's problem said once

// A layers x heads table: a column per head (then the `extra` columns), `cells[layer]` a row.
function layerTable(attributes, caption, cells, extra = []) {
  const heads = cells[0].length - extra.length;
  return el("table", { class: "grid-table", ...attributes },
    ...(caption ? [el("caption", { text: caption })] : []),
    el("tr", {}, el("th"), ...Array.from({ length: heads }, (_, h) => el("th", { text: `head ${h}` })),
      ...extra.map((title) => el("th", { text: title }))),
    ...cells.map((row, layer) => el("tr", {}, el("th", { text: `layer ${layer}` }), ...row)));
}

// x to `digits` decimals, without the sign of a value that rounds to zero ("0.00", not "-0.00")
function fixed(x, digits) {
  const text = x.toFixed(digits);
  return Number(text) === 0 ? text.replace("-", "") : text;
}

const signed = (x, digits = 4) => (x === null ? "·" : (x >= 0 ? "+" : "−") + Math.abs(x).toFixed(digits));

function inspectSections(model) {
  if (model.kind !== "gpt") {
    return [el("section", { id: "inspect-section" }, el("h2", { text: "Looking inside" }),
      el("p", { class: "muted", text: "The logit lens, attribution, ablation, patching, head roles, neurons and surprise read a GPT's residual stream; this model is an encoder, so they do not apply here." }))];
  }
  return [lensSection(), attributionSection(), ablationSection(), patchingSection(),
    surpriseSection(), neuronSection(model), headRolesSection()];
}

// Everything that depends on the prompt, redrawn when it changes.
async function refreshInspect() {
  const jobs = [refreshLens(), refreshAttribution(), refreshAblation(), refreshSurprise(), refreshHeadRoles()];
  if (inspectState.importanceSource !== "validation split") jobs.push(refreshImportance());
  if (inspectState.neuronSource !== "validation split") jobs.push(refreshNeuron());
  await Promise.all(jobs);
}

// ---------------------------------------------------------------- the logit lens
function lensSection() {
  return el("section", { id: "lens-section" },
    el("h2", { text: "Logit lens: softmax(LN_f(residual) W_Uᵀ) after every sublayer" }),
    el("p", { class: "muted", text: "Each cell: the top token the residual would predict at that stage and its probability; the colour is the probability of the token that actually comes next (red unlikely, green likely; or of the token typed here)." }),
    el("div", { class: "row" },
      el("label", {}, "follow token", el("input", { type: "text", id: "lens-target", placeholder: "the actual next one", style: "width: 12rem", oninput: debounce(refreshLens) })),
      probabilityLegend()),
    el("div", { class: "scroll" }, el("table", { id: "lens-grid", class: "grid-table" })),
    el("div", { id: "lens-error", class: "error" }));
}

async function refreshLens() {
  const prompt = currentPrompt(), box = $("#lens-error");
  const target = $("#lens-target").value;
  try {
    const lens = await api("/api/inspect/lens", { prompt, target: target === "" ? null : target, top_k: 5 });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    const head = el("tr", {}, el("th", { text: "stage \\ token" }), ...lens.tokens.map((t) => el("th", { class: "token", text: visible(t) })));
    const rows = lens.stages.map((stage, s) => el("tr", {}, el("th", { text: stage }),
      ...lens.tokens.map((_, t) => {
        const p = lens.target_probs[s][t];
        const top = lens.top_tokens[s][t].map((tok, k) => `${JSON.stringify(tok)} ${fmt(lens.top_probs[s][t][k])}`).join("\n");
        const follow = p === null ? "no next token" : `P(${JSON.stringify(lens.target_tokens[t])}) = ${fmt(p)}, rank ${lens.target_ranks[s][t]}`;
        return el("td", { class: "lens-cell", "data-stage": String(s), "data-position": String(t),
          style: `background:${p === null ? "#eef0f4" : probabilityColour(p)}`,
          title: `${stage}, position ${t}\n${follow}\ntop ${lens.top_tokens[s][t].length}:\n${top}` },
        el("span", { class: "token", text: visible(lens.top_tokens[s][t][0]) }), el("br"),
        el("span", { class: "p", text: fmt(lens.top_probs[s][t][0], 2) }));
      })));
    const next = el("tr", {}, el("th", { text: "next" }), ...lens.target_tokens.map((t) => el("td", { class: "token muted", text: t === null ? "" : visible(t) })));
    $("#lens-grid").replaceChildren(head, ...rows, next);
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- direct logit attribution
function attributionSection() {
  const update = debounce(refreshAttribution);
  return el("section", { id: "attribution-section" },
    el("h2", { text: "Direct logit attribution: z[token] − z[versus] split into what each part wrote" }),
    el("p", { class: "muted", text: "The last residual is a sum of the embeddings, every head's output and every MLP's; with the final norm's scale held fixed, each one's share of the logit difference (they add up to it)." }),
    el("div", { class: "row" },
      el("label", {}, "token", el("input", { type: "text", id: "attr-token", placeholder: "top guess", style: "width: 9rem", oninput: update })),
      el("label", {}, "versus", el("input", { type: "text", id: "attr-versus", placeholder: "runner-up", style: "width: 9rem", oninput: update }))),
    el("div", { id: "attr-summary" }),
    el("table", { id: "attr-bars", class: "bars" }),
    el("div", { id: "attribution-error", class: "error" }));
}

async function refreshAttribution() {
  const prompt = currentPrompt(), box = $("#attribution-error");
  const token = $("#attr-token").value, versus = $("#attr-versus").value;
  try {
    const result = await api("/api/inspect/attribution", {
      prompt, token: token === "" ? null : token, versus: versus === "" ? null : versus,
    });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    const name = (t) => JSON.stringify(t.token);
    $("#attr-summary").replaceChildren(
      el("span", { id: "attr-total", text: `z[${name(result.token)}] − z[${name(result.versus)}] = ${fmt(result.total)}` }),
      el("span", { class: "muted", text: ` (the model's own: ${fmt(result.logit)}${result.softcap ? `, before the soft-cap at ${result.softcap}` : ""})` }));
    const largest = Math.max(...result.values.map(Math.abs), 1e-12);
    const rows = result.names.map((component, i) => {
      const v = result.values[i], width = (50 * Math.abs(v) / largest).toFixed(1);
      const bar = el("div", { class: `attr-bar ${v >= 0 ? "positive" : "negative"}`,
        style: `width:${width}%; ${v >= 0 ? "left: 50%" : `left: ${(50 - width).toFixed(1)}%`}` });
      return el("tr", { "data-name": component }, el("th", { text: component }),
        el("td", { class: "attr-bar-cell" }, bar), el("td", { class: "attr-value", text: signed(v) }));
    });
    $("#attr-bars").replaceChildren(...rows);
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- ablation
function ablationSection() {
  return el("section", { id: "ablation-section" },
    el("h2", { text: "Ablation: what the loss loses without each head and MLP; click heads to remove them" }),
    el("div", { class: "row" },
      el("label", {}, "ablation", el("select", { id: "ablation-method", onchange: () => { refreshImportance(); refreshAblation(); } },
        el("option", { value: "zero", text: "zero (output replaced by 0)" }),
        el("option", { value: "mean", text: "mean (replaced by its mean)" }))),
      el("button", { class: "secondary", id: "ablation-clear", text: "restore all", onclick: () => { inspectState.ablated = []; drawImportanceSelection(); refreshAblation(); } })),
    el("div", { class: "grid2" },
      el("div", {}, el("div", { id: "importance-summary", class: "muted" }),
        el("table", { id: "importance-grid", class: "grid-table" })),
      el("div", {}, el("div", { id: "ablation-summary" }),
        el("table", { id: "ablation-table" }))),
    el("div", { id: "ablation-error", class: "error" }));
}

async function refreshImportance() {
  const prompt = currentPrompt(), box = $("#ablation-error");
  $("#importance-summary").textContent = "ablating every head and MLP over the text…";
  try {
    const table = await api("/api/inspect/importance", { prompt, method: $("#ablation-method").value });
    inspectState.importanceSource = table.source;
    const text = table.source === "prompt" ? "the prompt" : "the run's validation split";
    $("#importance-summary").textContent = `Δloss over ${table.n_tokens.toLocaleString("en")} tokens of ${text} (loss ${fmt(table.loss)} nats with nothing removed)`;
    const largest = Math.max(...table.heads.flat(), ...table.mlps, 1e-12);
    const cell = (name, v) => el("td", { class: "importance-cell", "data-component": name,
      style: `background:${viridis(Math.max(v, 0) / largest)}; color:${v / largest > 0.6 ? "#222" : "#fff"}`,
      title: `${name}: Δloss ${signed(v)} nats; click to ${inspectState.ablated.includes(name) ? "restore" : "ablate"} it`,
      onclick: () => toggleAblated(name) }, signed(v, 3));
    const cells = table.heads.map((row, layer) =>
      [...row.map((v, h) => cell(`L${layer}H${h}`, v)), cell(`L${layer}MLP`, table.mlps[layer])]);
    $("#importance-grid").replaceWith(layerTable({ id: "importance-grid" }, null, cells, ["MLP"]));
    drawImportanceSelection();
    box.replaceChildren();
  } catch (exc) { say(box, exc); $("#importance-summary").textContent = ""; }
}

function drawImportanceSelection() {
  document.querySelectorAll(".importance-cell").forEach((cell) =>
    cell.classList.toggle("ablated", inspectState.ablated.includes(cell.dataset.component)));
}

function toggleAblated(name) {
  const at = inspectState.ablated.indexOf(name);
  if (at >= 0) inspectState.ablated.splice(at, 1); else inspectState.ablated.push(name);
  drawImportanceSelection();
  refreshAblation();
}

// The next-token distribution with the chosen parts removed (ablate_prompt), or as it is.
async function refreshAblation() {
  const prompt = currentPrompt(), box = $("#ablation-error");
  const components = [...inspectState.ablated];
  const summary = $("#ablation-summary"), table = $("#ablation-table");
  try {
    if (!components.length) {
      const result = await api("/api/next-token", { prompt, limit: 10 });
      if (prompt !== currentPrompt() || inspectState.ablated.length) return;
      summary.replaceChildren(el("span", { class: "muted", text: "Nothing removed: the model's next-token distribution. Click a head (or an MLP) to ablate it; click again to restore it." }));
      table.dataset.components = "";
      table.replaceChildren(el("tr", {}, el("th", { text: "token" }), el("th", { text: "P" })),
        ...result.tokens.map((t) => el("tr", {}, el("td", { class: "token", text: visible(t.token) }), el("td", { class: "p-model", text: fmt(t.probability) }))));
      return;
    }
    const result = await api("/api/inspect/ablate", { prompt, components, method: $("#ablation-method").value, limit: 10 });
    if (prompt !== currentPrompt() || components.join() !== inspectState.ablated.join()) return;
    box.replaceChildren();
    summary.replaceChildren(
      el("div", { text: `without ${result.components.join(", ")} (${result.method} ablation):` }),
      el("div", { id: "ablation-delta", "data-token": String(result.token.id),
        text: `P(${JSON.stringify(result.token.token)}) ${fmt(result.p)} → ${fmt(result.ablated_p)} (Δp ${signed(result.delta_p)})` }));
    table.dataset.components = result.components.join(",");
    const largest = Math.max(...result.tokens.map((t) => Math.max(t.probability, t.ablated_probability)));
    table.replaceChildren(el("tr", {}, el("th", { text: "token" }), el("th", { text: "P before" }), el("th", { text: "P ablated" }), el("th")),
      ...result.tokens.map((t) => el("tr", { "data-id": String(t.id) },
        el("td", { class: "token", text: visible(t.token) }), el("td", { class: "p-model", text: fmt(t.probability) }),
        el("td", { class: "p-ablated", text: fmt(t.ablated_probability) }),
        el("td", { class: "bar-cell" }, el("div", { class: "bar", style: `width:${(100 * t.ablated_probability / largest).toFixed(1)}%` })))));
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- activation patching
function patchingSection() {
  const input = (id, value, width) => el("input", { type: "text", id, value, style: `width:${width}` });
  return el("section", { id: "patching-section" },
    el("h2", { text: "Activation patching: which activations carry the difference between two prompts" }),
    el("p", { class: "muted", text: "Run the corrupted prompt with one activation taken from the clean run; each cell is the fraction of the clean metric z[answer] − z[wrong] it restores (1 all, 0 nothing). The prompts must have the same number of tokens." }),
    el("div", { class: "row" },
      el("label", {}, "clean", input("patch-clean", PATCHING_PRESET.clean, "14rem")),
      el("label", {}, "corrupted", input("patch-corrupt", PATCHING_PRESET.corrupt, "14rem")),
      el("label", {}, "answer", input("patch-answer", PATCHING_PRESET.answer, "6rem")),
      el("label", {}, "wrong", input("patch-wrong", PATCHING_PRESET.wrong, "6rem")),
      el("button", { id: "patch", text: "patch", onclick: refreshPatching })),
    el("div", { id: "patching-summary" }),
    el("div", { class: "attention-views" },
      el("div", { class: "scroll" }, el("table", { id: "patching-resid", class: "grid-table" })),
      el("table", { id: "patching-heads", class: "grid-table" })),
    el("div", { id: "patching-error", class: "error" }));
}

async function refreshPatching() {
  const box = $("#patching-error");
  const body = { clean: $("#patch-clean").value, corrupt: $("#patch-corrupt").value,
    answer: $("#patch-answer").value, wrong: $("#patch-wrong").value };
  try {
    const result = await api("/api/inspect/patching", body);
    box.replaceChildren();
    const m = (x) => fmt(x, 3);
    $("#patching-summary").replaceChildren(el("span", { id: "patching-metrics",
      text: `z[${JSON.stringify(result.answer.token)}] − z[${JSON.stringify(result.wrong.token)}]: clean ${m(result.clean_metric)}, corrupted ${m(result.corrupt_metric)}` }));
    const cell = (x, title) => el("td", { class: "patch-cell", style: `background:${x === null ? "#eef0f4" : signedColour(x)}`, title }, x === null ? "·" : fixed(x, 2));
    const labels = result.clean_tokens.map((t, i) => t === result.corrupt_tokens[i] ? visible(t) : `${visible(t)}/${visible(result.corrupt_tokens[i])}`);
    $("#patching-resid").replaceChildren(el("caption", { text: "the residual at each layer's input and position" }),
      el("tr", {}, el("th"), ...labels.map((l) => el("th", { class: "token", text: l }))),
      ...result.resid.map((row, r) => el("tr", {}, el("th", { text: result.resid_labels[r] }),
        ...row.map((x, t) => cell(x, `${result.resid_labels[r]}, position ${t} (${labels[t]}): restores ${x === null ? "nothing to restore" : fmt(x)}`)))));
    const heads = result.heads.map((row, layer) =>
      row.map((x, h) => cell(x, `L${layer}H${h}: restores ${x === null ? "nothing to restore" : fmt(x)}`)));
    $("#patching-heads").replaceWith(layerTable({ id: "patching-heads" }, "each head's output, every position", heads));
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- surprise
function surpriseSection() {
  return el("section", { id: "surprise-section" },
    el("h2", { text: "Surprise: each token of the prompt coloured by p(token | the tokens before)" }),
    el("div", { class: "row" }, el("span", { id: "surprise-summary", class: "muted" }), probabilityLegend()),
    el("div", { id: "surprise-text" }),
    el("div", { id: "surprise-error", class: "error" }));
}

async function refreshSurprise() {
  const prompt = currentPrompt(), box = $("#surprise-error");
  try {
    const result = await api("/api/inspect/surprise", { text: prompt });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    $("#surprise-summary").textContent = `mean loss ${fmt(result.mean_loss)} nats per token over ${result.losses.length} tokens (hover a token: its loss −ln p and the model's top guess; red surprising, green expected)`;
    const spans = result.tokens.map((token, i) => {
      if (i === 0) return el("span", { class: "surprise-token first", title: "the first token: nothing before it to predict it from" }, token);
      const j = i - 1;
      return el("span", { class: "surprise-token", style: `background:${probabilityColour(result.probs[j])}`, "data-loss": String(result.losses[j]),
        title: `${JSON.stringify(token)}: loss ${fmt(result.losses[j])} nats (p ${fmt(result.probs[j])}, rank ${result.ranks[j]})\nthe model's guess: ${JSON.stringify(result.top_tokens[j])} (p ${fmt(result.top_probs[j])})` }, token);
    });
    $("#surprise-text").replaceChildren(...spans);
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- neurons
function neuronSection(model) {
  const layers = el("select", { id: "neuron-layer", onchange: refreshNeuron });
  for (let l = 0; l < model.config.n_layer; l++) layers.append(el("option", { value: String(l), text: `layer ${l}` }));
  return el("section", { id: "neuron-section" },
    el("h2", { text: "Neurons: the contexts where one MLP unit fires most" }),
    el("div", { class: "row" }, layers,
      el("label", {}, "unit", el("input", { type: "number", id: "neuron-unit", min: "0", value: "0", oninput: debounce(refreshNeuron) })),
      el("span", { id: "neuron-summary", class: "muted" })),
    el("table", { id: "neuron-examples" }),
    el("div", { id: "neuron-error", class: "error" }));
}

async function refreshNeuron() {
  const box = $("#neuron-error");
  const body = { prompt: currentPrompt(), layer: Number($("#neuron-layer").value), neuron: Number($("#neuron-unit").value), k: 8, context: 16 };
  try {
    const result = await api("/api/inspect/neuron", body);
    box.replaceChildren();
    inspectState.neuronSource = result.source;
    $("#neuron-unit").max = String(result.units - 1);
    const text = result.source === "prompt" ? "the prompt" : "the run's validation split";
    $("#neuron-summary").textContent = `unit ${result.neuron} of ${result.units} in layer ${result.layer}: mean ${fmt(result.mean, 3)}, max ${fmt(result.max, 3)} over ${result.n_tokens.toLocaleString("en")} tokens of ${text}`;
    $("#neuron-examples").replaceChildren(el("tr", {}, el("th", { text: "activation" }), el("th", { text: "position" }), el("th", { text: "context (the unit fires on the last token)" })),
      ...result.examples.map((e) => el("tr", {}, el("td", { class: "activation", text: fmt(e.activation, 3) }), el("td", { text: String(e.position) }),
        el("td", { class: "token" }, e.tokens.slice(0, -1).join(""), el("mark", { text: e.tokens[e.tokens.length - 1] })))));
  } catch (exc) { say(box, exc); }
}

// ---------------------------------------------------------------- head roles
function headRolesSection() {
  return el("section", { id: "roles-section" },
    el("h2", { text: "Head roles: previous-token, first-token and induction scores" }),
    el("p", { class: "muted", text: "Previous-token: mean A[t, t−1] and first-token: mean A[t, 0] over the prompt; induction: mean attention from a token of the second copy of a random sequence to the token after its first occurrence (Olsson et al. 2022)." }),
    el("div", { id: "roles-summary" }),
    el("div", { id: "roles-tables", class: "row" }),
    el("div", { id: "roles-error", class: "error" }));
}

async function refreshHeadRoles() {
  const prompt = currentPrompt(), box = $("#roles-error");
  try {
    const roles = await api("/api/inspect/head-roles", { prompt });
    if (prompt !== currentPrompt()) return;
    box.replaceChildren();
    $("#roles-summary").textContent = `loss on the first copy of ${roles.n_sequences} random sequences of ${roles.length} tokens: ${fmt(roles.loss_first_copy, 3)} nats; on the second copy: ${fmt(roles.loss_second_copy, 3)} (an induction circuit makes it fall)`;
    const tables = [["previous_token", "previous-token"], ["first_token", "first-token"], ["induction", "induction"]].map(([key, title]) =>
      layerTable({ id: `roles-${key}` }, title, roles[key].map((row) => row.map((x) =>
        el("td", { class: "role-cell", style: `background:${viridis(x)}; color:${x > 0.6 ? "#222" : "#fff"}` }, fixed(x, 2))))));
    $("#roles-tables").replaceChildren(...tables);
  } catch (exc) { say(box, exc); }
}
