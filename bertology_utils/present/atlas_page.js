// The head atlas page: grids, legend, card, filters and URL state, drawn from the embedded payload.
// Plain ES2017 with no library, so that the page works from file:// with no network.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("atlas-data").textContent);
  const runs = data.runs || [];
  const columns = data.columns || [];
  const rows = data.rows || { run: [], layer: [], head: [], values: {} };
  const colormap = data.colormap && data.colormap.length ? data.colormap : ["#440154", "#fde725"];
  const columnByName = new Map(columns.map((c) => [c.name, c]));
  const runById = new Map(runs.map((r) => [r.id, r]));
  const nRows = rows.run.length;
  // Qualitative colours for categories (Okabe-Ito, readable by most colour-blind viewers).
  const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
  const MISSING = "#d9d9d9";
  const OPS = {
    ge: "≥", le: "≤", gt: ">", lt: "<", eq: "=", ne: "≠", top: "top %", bottom: "bottom %",
  };

  // run id -> "layer-head" -> row index
  const rowIndex = new Map(runs.map((r) => [r.id, new Map()]));
  for (let i = 0; i < nRows; i++) {
    const index = rowIndex.get(rows.run[i]);
    if (index) index.set(rows.layer[i] + "-" + rows.head[i], i);
  }

  const state = { color: columns.length ? columns[0].name : null, filters: [], card: null };
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children || []) if (child != null) node.append(child);
    return node;
  }

  function value(column, i) {
    const values = rows.values[column];
    const v = values ? values[i] : null;
    return v === undefined ? null : v;
  }

  function format(v) {
    if (v === null) return "–";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v !== "number") return String(v);
    if (v === 0 || Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a >= 1e-3 && a < 1e6 ? String(parseFloat(v.toPrecision(3))) : v.toPrecision(3);
  }

  // ---- colours -------------------------------------------------------------------------------
  function scale(column) {
    const spec = columnByName.get(column);
    if (!spec) return { color: () => MISSING, legend: [] };
    const present = [];
    for (let i = 0; i < nRows; i++) if (value(column, i) !== null) present.push(value(column, i));
    if (spec.kind === "bool") {
      const colors = { false: colormap[0], true: colormap[colormap.length - 1] };
      return { kind: "bool", color: (v) => colors[String(v)] || MISSING, entries: [["no", colors.false], ["yes", colors.true]] };
    }
    if (spec.kind === "category") {
      const categories = Array.from(new Set(present.map(String))).sort();
      const colors = new Map(categories.map((c, k) => [c, PALETTE[k % PALETTE.length]]));
      return { kind: "category", color: (v) => colors.get(String(v)) || MISSING, entries: Array.from(colors) };
    }
    const numbers = present.filter((v) => typeof v === "number");
    const min = numbers.length ? Math.min(...numbers) : 0;
    const max = numbers.length ? Math.max(...numbers) : 0;
    const last = colormap.length - 1;
    const color = (v) => {
      if (typeof v !== "number") return MISSING;
      const t = max > min ? (v - min) / (max - min) : 0.5;
      return colormap[Math.round(Math.min(1, Math.max(0, t)) * last)];
    };
    return { kind: "number", color, min, max, empty: !numbers.length };
  }

  function renderLegend(column, sc) {
    const legend = $("atlas-legend");
    legend.replaceChildren();
    const spec = columnByName.get(column);
    if (!spec) return;
    if (sc.kind === "number") {
      if (sc.empty) {
        legend.append(el("p", { class: "note", text: "No head has a value for this column." }));
      } else {
        const stops = [];
        for (let k = 0; k <= 16; k++) stops.push(colormap[Math.round((k / 16) * (colormap.length - 1))]);
        const unit = spec.unit ? " " + spec.unit : "";
        legend.append(
          el("div", { class: "legend-bar", style: "background: linear-gradient(to right, " + stops.join(", ") + ")" }),
          el("div", { class: "legend-ends" }, [
            el("span", { text: format(sc.min) }),
            el("span", { class: "legend-unit", text: unit.trim() }),
            el("span", { text: format(sc.max) }),
          ])
        );
      }
    } else {
      legend.append(
        el("ul", { class: "legend-swatches" }, sc.entries.map(([name, c]) =>
          el("li", {}, [el("span", { class: "swatch", style: "background:" + c }), name])))
      );
    }
    legend.append(el("p", { class: "legend-missing" }, [el("span", { class: "swatch missing" }), "no value"]));
  }

  // ---- grids ---------------------------------------------------------------------------------
  function buildGrids() {
    const container = $("atlas-runs");
    if (!runs.length) container.append(el("p", { class: "note", text: "This atlas has no runs to show." }));
    if (!columns.length) container.append(el("p", { class: "note", text: "This atlas has no columns to colour by." }));
    for (const run of runs) {
      const box = el("section", { class: "run", "data-run": run.id });
      box.append(el("h2", { text: run.name }), el("p", { class: "model", text: run.model }));
      for (const [section, reason] of Object.entries(run.missing || {})) {
        box.append(el("p", { class: "note missing-section" }, [
          "Not in this run: ", el("strong", { text: section }), " because " + reason + ".",
        ]));
      }
      if (!rowIndex.get(run.id).size) {
        box.append(el("p", { class: "note empty-run", text: "This run has no per-head results to show." }));
        container.append(box);
        continue;
      }
      const grid = el("div", { class: "grid", role: "grid", style: "grid-template-columns: auto repeat(" + run.heads + ", var(--cell))" });
      grid.append(el("div", { class: "axis corner", text: "L \\ H", title: "rows: layers, columns: heads" }));
      for (let h = 1; h <= run.heads; h++) grid.append(el("div", { class: "axis head-label", text: String(h) }));
      for (let l = 1; l <= run.layers; l++) {
        grid.append(el("div", { class: "axis layer-label", text: String(l) }));
        for (let h = 1; h <= run.heads; h++) {
          grid.append(el("button", {
            type: "button", class: "cell", "data-run": run.id, "data-layer": String(l), "data-head": String(h),
            onclick: () => openCard(run.id, l, h),
          }));
        }
      }
      const axes = "rows: layers 1–" + run.layers + " · columns: heads 1–" + run.heads;
      box.append(el("p", { class: "axes", text: axes }), grid, el("p", { class: "note column-empty", hidden: "" }));
      container.append(box);
    }
  }

  function recolor() {
    const column = state.color;
    const sc = scale(column);
    const label = columnByName.has(column) ? columnByName.get(column).label : "";
    for (const cell of document.querySelectorAll(".cell")) {
      const i = rowIndex.get(cell.dataset.run).get(cell.dataset.layer + "-" + cell.dataset.head);
      const v = i === undefined ? null : value(column, i);
      cell.dataset.value = v === null ? "" : String(v);
      cell.classList.toggle("missing", v === null);
      cell.style.backgroundColor = v === null ? "" : sc.color(v);
      cell.textContent = v === null ? "–" : "";
      cell.title = "Layer " + cell.dataset.layer + ", head " + cell.dataset.head + ": " + label + " = " + format(v);
    }
    for (const box of document.querySelectorAll(".run")) {
      const note = box.querySelector(".column-empty");
      if (!note) continue;
      const has = box.querySelector(".cell:not(.missing)") !== null;
      note.hidden = has;
      note.textContent = has ? "" : "No head of this run has a value for “" + label + "”.";
    }
    renderLegend(column, sc);
    renderColumnInfo(column);
  }

  function renderColumnInfo(column) {
    const info = $("atlas-column-info");
    info.replaceChildren();
    const spec = columnByName.get(column);
    if (!spec) return;
    const dl = el("dl");
    const add = (term, text) => { if (text) dl.append(el("dt", { text: term }), el("dd", { text: text })); };
    add("Meaning", spec.meaning);
    add("Unit", spec.unit);
    add("Paper", spec.paper);
    add("Paper's value", spec.paper_value);
    info.append(dl);
  }

  // ---- filters -------------------------------------------------------------------------------
  // One boolean per row; the semantics are the module docstring's (atlas.py implements the same).
  function filterMask(filter) {
    const mask = new Array(nRows).fill(false);
    const { column, op } = filter;
    const num = Number(filter.value);
    const isNum = (v) => typeof v === "number";
    if (op === "top" || op === "bottom") {
      if (!(filter.value.trim() !== "" && num > 0 && num <= 100)) return mask;
      for (const index of rowIndex.values()) {
        const members = Array.from(index.values()).filter((i) => isNum(value(column, i)));
        if (!members.length) continue;
        const sorted = members.map((i) => value(column, i)).sort((a, b) => (op === "top" ? b - a : a - b));
        const t = sorted[Math.ceil((num / 100) * sorted.length) - 1];
        for (const i of members) mask[i] = op === "top" ? value(column, i) >= t : value(column, i) <= t;
      }
      return mask;
    }
    const numeric = filter.value.trim() !== "" && !Number.isNaN(num);
    for (let i = 0; i < nRows; i++) {
      const v = value(column, i);
      if (v === null) continue;
      if (op === "eq" || op === "ne") {
        const same = isNum(v) ? numeric && v === num : String(v) === filter.value;
        mask[i] = op === "eq" ? same : !same;
      } else if (isNum(v) && numeric) {
        mask[i] = op === "ge" ? v >= num : op === "le" ? v <= num : op === "gt" ? v > num : op === "lt" ? v < num : false;
      }
    }
    return mask;
  }

  function applyFilters() {
    const list = $("atlas-filter-list");
    list.replaceChildren();
    state.filters.forEach((f, k) => {
      const spec = columnByName.get(f.column);
      list.append(el("li", { class: "filter", "data-column": f.column, "data-op": f.op, "data-value": f.value }, [
        el("span", {
          text: (spec ? spec.label : f.column) + ": " +
            (f.op === "top" || f.op === "bottom" ? f.op + " " + f.value + "%" : OPS[f.op] + " " + f.value),
        }),
        el("button", {
          type: "button", class: "remove", title: "Remove this filter", "aria-label": "Remove this filter", text: "×",
          onclick: () => { state.filters.splice(k, 1); update(); },
        }),
      ]));
    });
    const active = state.filters.length > 0;
    let mask = new Array(nRows).fill(true);
    for (const f of state.filters) {
      const m = filterMask(f);
      mask = mask.map((ok, i) => ok && m[i]);
    }
    document.body.classList.toggle("filtering", active);
    for (const cell of document.querySelectorAll(".cell")) {
      const i = rowIndex.get(cell.dataset.run).get(cell.dataset.layer + "-" + cell.dataset.head);
      cell.classList.toggle("match", active && i !== undefined && mask[i]);
    }
    const count = mask.filter(Boolean).length;
    $("atlas-count").textContent = active ? count + " of " + nRows + " heads match" : "";
  }

  function setupFilterForm() {
    const colSelect = $("atlas-filter-column");
    fillColumnSelect(colSelect);
    const opSelect = $("atlas-filter-op");
    for (const [op, text] of Object.entries(OPS)) opSelect.append(el("option", { value: op, text: text }));
    const hint = () => {
      const op = opSelect.value;
      const spec = columnByName.get(colSelect.value);
      $("atlas-filter-value").placeholder =
        op === "top" || op === "bottom" ? "percent" : spec && spec.kind === "bool" ? "true / false" : "value";
    };
    colSelect.addEventListener("change", hint);
    opSelect.addEventListener("change", hint);
    hint();
    $("atlas-filter-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("atlas-filter-value");
      if (!colSelect.value || input.value.trim() === "") return;
      state.filters.push({ column: colSelect.value, op: opSelect.value, value: input.value.trim() });
      input.value = "";
      update();
    });
  }

  function fillColumnSelect(select) {
    const groups = new Map();
    for (const c of columns) {
      const name = c.notebook || "other";
      if (!groups.has(name)) groups.set(name, el("optgroup", { label: name }));
      groups.get(name).append(el("option", { value: c.name, text: c.label || c.name }));
    }
    select.append(...groups.values());
  }

  // ---- card ----------------------------------------------------------------------------------
  function openCard(runId, layer, head) {
    state.card = { run: runId, layer: layer, head: head };
    update();
  }

  function decode(b64) {
    const text = atob(b64);
    const bytes = new Uint8Array(text.length);
    for (let k = 0; k < text.length; k++) bytes[k] = text.charCodeAt(k);
    return bytes;
  }

  const decoded = new Map();
  function mapBytes(entry) {
    if (!decoded.has(entry)) decoded.set(entry, decode(entry.data));
    return decoded.get(entry);
  }

  // One head's n x n map as a heat map: rows attend (from), columns are attended to; white to dark blue.
  function drawMap(bytes, offset, n, labels, caption) {
    const cell = Math.max(6, Math.min(16, Math.floor(176 / n)));
    const margin = labels ? 64 : 4;
    const size = margin + n * cell + 4;
    const ratio = window.devicePixelRatio || 1;
    const canvas = el("canvas", { class: "map", width: String(size * ratio), height: String(size * ratio) });
    canvas.style.width = canvas.style.height = size + "px";
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    for (let r = 0; r < n; r++) {
      for (let c = 0; c < n; c++) {
        const a = bytes[offset + r * n + c] / 255;
        ctx.fillStyle = "rgb(" + Math.round(255 - 247 * a) + "," + Math.round(255 - 207 * a) + "," + Math.round(255 - 148 * a) + ")";
        ctx.fillRect(margin + c * cell, margin + r * cell, cell, cell);
      }
    }
    ctx.strokeStyle = "#999";
    ctx.strokeRect(margin - 0.5, margin - 0.5, n * cell + 1, n * cell + 1);
    if (labels) {
      ctx.fillStyle = "#333";
      ctx.font = Math.min(11, cell) + "px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      const fit = (s) => (s.length > 9 ? s.slice(0, 8) + "…" : s);
      ctx.textAlign = "right";
      labels.forEach((w, r) => ctx.fillText(fit(String(w)), margin - 4, margin + (r + 0.5) * cell));
      ctx.save();
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      labels.forEach((w, c) => ctx.fillText(fit(String(w)), -margin + 4, margin + (c + 0.5) * cell));
      ctx.restore();
    }
    return el("figure", { class: "map-figure" }, [canvas, el("figcaption", { text: caption })]);
  }

  function mapsSection(run, layer, head) {
    const section = el("div", { class: "card-maps" }, [el("h3", { text: "Typical attention" })]);
    const maps = run.maps;
    if (!maps) {
      section.append(el("p", { class: "note", text: "No attention maps for this run" + (run.maps_note ? ": " + run.maps_note : ".") }));
      return section;
    }
    const figures = el("div", { class: "map-row" });
    const head0 = (layer - 1) * run.heads + (head - 1);
    const add = (entry, n, labels, caption) => {
      const bytes = mapBytes(entry);
      if (bytes.length !== run.layers * run.heads * n * n) {
        figures.append(el("p", { class: "note", text: caption + ": map data has the wrong size." }));
      } else {
        figures.append(drawMap(bytes, head0 * n * n, n, labels, caption));
      }
    };
    if (maps.mean) add(maps.mean, maps.mean.size, maps.mean.labels, "mean map");
    (maps.examples || []).forEach((ex, k) => add(ex, ex.words.length, ex.words, "example " + (k + 1)));
    section.append(figures);
    if (maps.note) section.append(el("p", { class: "note small", text: maps.note }));
    return section;
  }

  function headLink(runId, key, extra) {
    const [l, h] = key.split("-").map(Number);
    return el("button", {
      type: "button", class: "head-link", "data-run": runId, "data-layer": String(l), "data-head": String(h),
      text: "L" + l + " H" + h + extra, onclick: () => openCard(runId, l, h),
    });
  }

  // The columns on which a head is among the few highest of its run (the top 5%, at least the first, counting
  // the heads tied with it), highest first: a line that says what the head does before its hundred values do.
  // Only the high side: a head's lowest accuracy on some relation is not something it does.
  const STANDS_OUT = 0.05, STANDS_OUT_MAX = 3, STANDS_OUT_MIN_HEADS = 8;
  function standsOut(run, i) {
    if (i === undefined) return "No values for this head.";
    const members = [];
    for (let k = 0; k < nRows; k++) if (rows.run[k] === run.id) members.push(k);
    const found = [];
    for (const spec of columns) {
      const v = value(spec.name, i);
      if (spec.kind !== "number" || typeof v !== "number") continue;
      const others = members.map((k) => value(spec.name, k)).filter((x) => typeof x === "number");
      if (others.length < STANDS_OUT_MIN_HEADS) continue;
      const rank = others.filter((x) => x >= v).length; // ties count against it: a value many heads share is no mark
      if (rank > Math.max(1, Math.floor(STANDS_OUT * others.length))) continue;
      found.push({ rank: rank / others.length, text: (spec.label || spec.name) + " " + format(v) + " (" + (rank > 1 ? "top " + rank : "highest") + " of " + others.length + ")" });
    }
    if (!found.length) return "Nothing singles this head out: on no column is it among the highest 5% of its run's heads.";
    found.sort((a, b) => a.rank - b.rank);
    return "Stands out for " + found.slice(0, STANDS_OUT_MAX).map((f) => f.text).join("; ") + ".";
  }

  function renderCard() {
    const card = $("atlas-card");
    for (const cell of document.querySelectorAll(".cell.selected")) cell.classList.remove("selected");
    const c = state.card;
    const run = c && runById.get(c.run);
    const i = run && rowIndex.get(run.id).get(c.layer + "-" + c.head);
    if (!run || c.layer < 1 || c.layer > run.layers || c.head < 1 || c.head > run.heads) {
      state.card = null;
      card.hidden = true;
      card.replaceChildren();
      return;
    }
    const key = c.layer + "-" + c.head;
    const selected = document.querySelector('.cell[data-run="' + CSS.escape(run.id) + '"][data-layer="' + c.layer + '"][data-head="' + c.head + '"]');
    if (selected) selected.classList.add("selected");
    card.replaceChildren(
      el("button", { type: "button", class: "close", "aria-label": "Close the card", text: "×", onclick: () => { state.card = null; update(); } }),
      el("h2", { text: "Layer " + c.layer + ", head " + c.head }),
      el("p", { class: "model", text: run.name + " · " + run.model }),
      el("p", { class: "stands-out" }, [standsOut(run, i)]),
      mapsSection(run, c.layer, c.head)
    );

    // What the papers found is with the claims below, each beside the claim it belongs to.
    const table = el("table", { class: "values" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "column" }), el("th", { text: "value" }), el("th", { text: "unit" })])]),
    ]);
    const body = el("tbody");
    let shown = 0;
    for (const spec of columns) {
      const v = i === undefined ? null : value(spec.name, i);
      if (v !== null) shown++;
      body.append(el("tr", { "data-column": spec.name, class: spec.name === state.color ? "current" : "" }, [
        el("th", { text: spec.label || spec.name, title: spec.meaning || "" }),
        el("td", { class: "ours", text: format(v) }),
        el("td", { class: "unit", text: spec.unit || "" }),
      ]));
    }
    table.append(body);
    const values = el("details", { class: "values" }, [el("summary", { text: "All " + shown + " values of this head" }), table]);
    card.append(values);

    const near = ((data.nearest || {})[run.id] || {})[key] || [];
    if (near.length) {
      card.append(el("h3", { text: "Nearest heads in this run" }),
        el("p", { class: "links nearest" }, near.map(([k, d]) => headLink(run.id, k, " (" + format(d) + ")"))));
    }
    if (runs.length > 1) {
      const others = el("ul", { class: "links matches" });
      for (const other of runs) {
        if (other.id === run.id) continue;
        const m = (((data.match || {})[run.id] || {})[other.id] || {})[key];
        others.append(el("li", {}, m ? [other.name + ": ", headLink(other.id, m[0], " (distance " + format(m[1]) + ")")] : [other.name + ": no match computed"]));
      }
      card.append(el("h3", { text: "Most similar head in the other runs" }), others);
    }

    const claims = new Map();
    for (const spec of columns) {
      for (const claim of spec.claims || []) {
        if (claim.run && claim.run !== run.id) continue;
        claims.set(claim.key || claim.claim, claim);
      }
    }
    if (claims.size) {
      const list = el("ul", { class: "claims" });
      for (const claim of claims.values()) {
        const verdict = claim.verdict || "not testable";
        list.append(el("li", {}, [
          el("span", { class: "verdict verdict-" + verdict.replace(/\s+/g, "-"), text: verdict }),
          el("span", { class: "claim-text", text: " " + claim.claim }),
          el("div", { class: "claim-values" }, [
            el("span", { text: "paper: " + (claim.paper_value || "–") }),
            el("span", { text: "ours: " + (claim.ours || "–") }),
            // the interval and seed count, where the claim has them (older payloads have no such field)
            claim.uncertainty ? el("span", { class: "uncertainty", title: "interval, seeds", text: claim.uncertainty }) : null,
          ]),
        ]));
      }
      card.append(el("h3", { text: "Claims these columns test" }), list);
    }
    card.hidden = false;
  }

  // ---- URL state -----------------------------------------------------------------------------
  // encodeURIComponent leaves "~" alone; it separates a filter's parts, so it is encoded too.
  const enc = (s) => encodeURIComponent(String(s)).replace(/~/g, "%7E");
  const dec = (s) => { try { return decodeURIComponent(s); } catch (e) { return null; } };

  function writeHash() {
    const parts = [];
    if (state.color) parts.push("color=" + enc(state.color));
    for (const f of state.filters) parts.push("filter=" + [f.column, f.op, f.value].map(enc).join("~"));
    if (state.card) parts.push("card=" + enc(state.card.run) + ":" + state.card.layer + "-" + state.card.head);
    const hash = parts.length ? "#" + parts.join("&") : "";
    if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname + location.search);
  }

  function readHash() {
    const hash = location.hash.replace(/^#/, "");
    if (!hash) return;
    // The hash describes the whole view: what it leaves out goes back to the default.
    state.color = columns.length ? columns[0].name : null;
    state.card = null;
    const filters = [];
    for (const part of hash.split("&")) {
      const eq = part.indexOf("=");
      if (eq < 0) continue;
      const key = part.slice(0, eq);
      const raw = part.slice(eq + 1);
      if (key === "color") {
        const column = dec(raw);
        if (columnByName.has(column)) state.color = column;
      } else if (key === "filter") {
        const bits = raw.split("~").map(dec);
        if (bits.length === 3 && columnByName.has(bits[0]) && bits[1] in OPS && bits[2] !== null) {
          filters.push({ column: bits[0], op: bits[1], value: bits[2] });
        }
      } else if (key === "card") {
        const m = /^(.*):(\d+)-(\d+)$/.exec(raw);
        const runId = m && dec(m[1]);
        if (runId !== null && runById.has(runId)) state.card = { run: runId, layer: Number(m[2]), head: Number(m[3]) };
      }
    }
    state.filters = filters;
  }

  function update() {
    $("atlas-column").value = state.color || "";
    recolor();
    applyFilters();
    renderCard();
    writeHash();
  }

  fillColumnSelect($("atlas-column"));
  $("atlas-column").addEventListener("change", (event) => { state.color = event.target.value; update(); });
  setupFilterForm();
  buildGrids();
  readHash();
  window.addEventListener("hashchange", () => { readHash(); update(); });
  update();
})();
