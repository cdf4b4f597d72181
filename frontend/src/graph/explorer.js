// The graph explorer as an anywidget view: render({model, el}) builds the controls, the
// legend, the SVG picture, and beside it the minimap and the details panel, and keeps them in
// step with the model's traits (data, expanded, selected, query, color_by, stage).
//
// Wheel zooms about the pointer, drag pans; a click on a collapsed group opens it (and the
// view moves to it), on an open group's title closes it, on a node selects it (its ancestors
// and descendants stay bright). The first view opens as many scopes as stay readable on the
// canvas actually there (measured, and again when it changes size until the person moves
// the view).

import { h, s } from "../shared/dom.js";
import { gestures } from "../shared/pointer.js";
import { timeText, wheelFactor } from "../shared/scale.js";
import {
  CROSS, boxColor, decode, legendItems, lineage, nodeColor, nodeFacts, pathsToShow, search,
  stageMarks, textColor, visibleGraph,
} from "./model.js";
import { FONT_PX, layout } from "./layout.js";
import { READ_K, chooseOpen, layoutKey } from "./firstview.js";
import { centreOn, fitScale, showRegion, toGraph, zoomAt } from "./view.js";

// The canvas is as tall as the first view needs to show the graph readably, within these
const MIN_HEIGHT = 360, MAX_HEIGHT = 860, SIDE_W = 300, MINI_H = 150, PAD = 16;

const CSS = `
.lk-gx { font: 12px system-ui, -apple-system, 'Segoe UI', sans-serif; color: #111827; }
.lk-gx-title { font-weight: 600; margin: 2px 0; }
.lk-gx-bar { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.lk-gx-bar input[type=search] { width: 200px; }
.lk-gx-status, .lk-gx-hint { color: #6b7280; }
.lk-gx-hint { font-size: 11px; }
.lk-gx-legend { display: flex; gap: 4px 14px; flex-wrap: wrap; align-items: center; margin: 2px 0 6px;
  color: #374151; font-size: 11.5px; }
.lk-gx-legend > span { display: inline-flex; align-items: center; gap: 5px; white-space: nowrap; }
.lk-gx-legend .sw { display: inline-block; width: 16px; height: 11px; border-radius: 2px; box-sizing: border-box; }
.lk-gx-legend .ramp { display: inline-block; width: 90px; height: 11px; border: 1px solid #9ca3af; }
.lk-gx-body { display: flex; gap: 10px; align-items: flex-start; }
.lk-gx-canvas { position: relative; flex: 1 1 auto; min-width: 0; height: ${MAX_HEIGHT}px;
  border: 1px solid #e5e7eb; overflow: hidden; cursor: grab; background: white; }
.lk-gx-canvas > svg.lk-gx-main { width: 100%; height: 100%; display: block; user-select: none; }
.lk-gx-side { flex: 0 0 ${SIDE_W}px; width: ${SIDE_W}px; max-height: ${MAX_HEIGHT}px; display: flex;
  flex-direction: column; gap: 6px; }
.lk-gx-mini { width: ${SIDE_W - 2}px; height: ${MINI_H}px; border: 1px solid #cbd5e1; background: #fafafa;
  cursor: pointer; flex: 0 0 auto; }
.lk-gx-details { overflow: auto; font-size: 11.5px; flex: 1 1 auto; }
.lk-gx-details h4 { margin: 2px 0 4px; font-size: 13px; word-break: break-all; }
.lk-gx-details table { border-collapse: collapse; }
.lk-gx-details td { padding: 1px 6px 1px 0; vertical-align: top; word-break: break-word; }
.lk-gx-details td:first-child { color: #6b7280; white-space: nowrap; }
.lk-gx-details pre { font-size: 10.5px; background: #f8fafc; padding: 4px; white-space: pre-wrap; }
.lk-gx-stage { min-width: 260px; }
.lk-gx-stage input { width: 160px; vertical-align: middle; }
.lk-gx-passlabel { font-weight: 600; }
g.lk-gx-box text { font-size: ${FONT_PX}px; pointer-events: none; }
g.lk-gx-box { cursor: pointer; }
g.lk-gx-dim { opacity: 0.25; }
g.lk-gx-found rect { stroke: #f59e0b !important; stroke-width: 4 !important; }
g.lk-gx-selected rect { stroke: #111827 !important; stroke-width: 3.5 !important; }
path.lk-gx-edge { fill: none; stroke: #9ca3af; stroke-width: 1; }
path.lk-gx-edge.lk-gx-lit, g.lk-gx-stub.lk-gx-lit line { stroke: #111827; stroke-width: 1.8; }
path.lk-gx-edge.lk-gx-dim, g.lk-gx-stub.lk-gx-dim { opacity: 0.15; }
`;

export function render({ model, el }) {
  const started = performance.now();
  const root = h("div", { className: "lk-gx", "data-lm-suppress-shortcuts": "true" });
  root.append(h("style", { text: CSS }));
  const title = h("div", { className: "lk-gx-title" });
  const searchBox = h("input", { type: "search", placeholder: "search nodes by name or op",
                                 "aria-label": "search nodes", className: "lk-gx-search" });
  const colorSel = h("select", { "aria-label": "colour by", className: "lk-gx-color" });
  const fitBtn = h("button", { text: "fit", className: "lk-gx-fit" });
  const collapseBtn = h("button", { text: "collapse all", className: "lk-gx-collapse" });
  const slider = h("input", { type: "range", min: "0", max: "0", step: "1", "aria-label": "pass",
                              className: "lk-gx-slider" });
  const passLabel = h("span", { className: "lk-gx-passlabel" });
  const stageBox = h("span", { className: "lk-gx-stage" }, [h("span", { text: "pass " }), slider, " ", passLabel]);
  const status = h("span", { className: "lk-gx-status" });
  const legend = h("div", { className: "lk-gx-legend" });
  const svg = s("svg", { class: "lk-gx-main" });
  const world = s("g", { class: "lk-gx-world" });
  const defs = s("defs");
  const marker = s("marker", { id: "lk-gx-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
                               markerWidth: "7", markerHeight: "7", markerUnits: "userSpaceOnUse",
                               orient: "auto-start-reverse" });
  marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#6b7280" }));
  defs.append(marker);
  svg.append(defs, world);
  const mini = s("svg", { class: "lk-gx-mini" });
  const canvas = h("div", { className: "lk-gx-canvas" }, [svg]);
  const details = h("div", { className: "lk-gx-details" });
  const side = h("div", { className: "lk-gx-side" }, [mini, details]);
  root.append(title,
    h("div", { className: "lk-gx-bar" }, [searchBox, h("label", { text: "colour " }, [colorSel]),
      fitBtn, collapseBtn, stageBox, status]),
    legend,
    h("div", { className: "lk-gx-body" }, [canvas, side]),
    h("div", { className: "lk-gx-hint", text: "wheel: zoom · drag: pan · click a ▸ box: open it · "
      + "click an open box's title: close it · click a node: details, its inputs and users lit · "
      + "Enter in search: next match · the minimap: jump there" }));
  el.append(root);

  const st = { m: null, vis: null, lay: null, t: { x: 0, y: 0, k: 1 }, matches: [], found: -1,
               firstDone: false, cache: new Map(), value: null, touched: false, auto: false,
               nextView: null, size: null, anchor: null };

  // ---- the model --------------------------------------------------------------------------
  const expandedSet = () => new Set(model.get("expanded") || []);
  const stage = () => Math.max(0, Math.min(model.get("stage") | 0, st.m.stages.length - 1));
  const save = (k, v) => { model.set(k, v); model.save_changes(); };

  function load() {
    st.m = decode(model.get("data") || {});
    const m = st.m;
    st.maxTime = m.time ? Math.max(0, ...m.time) : 0;
    title.textContent = m.title;
    const modes = ["role", "device"].concat(m.time ? ["time"] : []);
    colorSel.replaceChildren(...modes.map((c) => h("option", { value: c, text: c })));
    colorSel.value = model.get("color_by");
    const n = m.stages.length;
    slider.max = String(Math.max(0, n - 1));
    // the slider is for pipelines that changed something: a tiny function's passes often don't
    const full = n ? (1 << n) - 1 : 1;
    const changed = m.stages.some((sg) => (sg.marks || []).length) || m.alive.some((a) => a !== full);
    stageBox.style.display = n > 1 && changed ? "" : "none";
    st.cache.clear();
    st.auto = !!(model.get("data") || {}).auto_open && !(model.get("expanded") || []).length;
    st.touched = false;
    relayout("fit");
  }

  // ---- layout and drawing -------------------------------------------------------------------
  function viewport() {
    const r = canvas.getBoundingClientRect();
    if (r.width > 50 && r.height > 50) return [r.width, r.height];
    // not in the page yet (a notebook may draw before it attaches): what it will be
    const outer = root.getBoundingClientRect().width || el.getBoundingClientRect?.().width || 0;
    return [Math.max((outer || 960) - SIDE_W - 12, 320), canvas.clientHeight || MAX_HEIGHT];
  }

  /** The canvas made as tall as the whole laid-out graph needs at a readable zoom (within
   * MIN_HEIGHT..MAX_HEIGHT), once for the first view, so a small graph takes little room. */
  function sizeCanvas(lay, vw) {
    const k = Math.min(1, (vw - 2 * PAD) / Math.max(lay.width, 1));
    const want = Math.ceil(lay.height * Math.max(Math.min(k, 1), READ_K) + 2 * PAD);
    const height = Math.max(MIN_HEIGHT, Math.min(MAX_HEIGHT, want));
    canvas.style.height = `${height}px`;
    side.style.maxHeight = `${height}px`;
    return height;
  }

  function relayout(view = "keep") {
    const t0 = performance.now();
    let [vw, vh] = viewport();
    const first = view === "fit" && !st.touched;
    if (st.auto) {                   // open as much as stays readable on this canvas
      st.auto = false;
      const open = chooseOpen(st.m, stage(), vw, MAX_HEIGHT, st.cache);
      const list = st.m.groups.map((g) => g.path).filter((p) => open.has(p));
      st.chosenFor = vw;
      st.silent = true;              // this layout follows: change:expanded need not make one
      try { save("expanded", list); } finally { st.silent = false; }
    }
    const open = expandedSet();
    const vis = visibleGraph(st.m, open, stage());
    const key = layoutKey(stage(), open);
    let lay = st.cache.get(key);
    if (!lay) {
      lay = layout(st.m, vis);
      st.cache.set(key, lay);
    }
    const before = st.lay && st.anchor ? st.lay.boxes.get(st.anchor) : null;
    st.vis = vis;
    st.lay = lay;
    if (first) vh = sizeCanvas(lay, vw);
    draw();
    if (view === "fit" || !st.firstDone) {
      fitView();
    } else if (view.startsWith("open:")) {
      const box = lay.boxes.get(view.slice(5));
      if (box) setView(showRegion(box, vw, vh, READ_K));
    } else {
      const box = st.anchor ? lay.boxes.get(st.anchor) : null;
      if (box && before) {              // keep the clicked box where it was
        const [sx, sy] = [before.x * st.t.k + st.t.x, before.y * st.t.k + st.t.y];
        st.t = { k: st.t.k, x: sx - box.x * st.t.k, y: sy - box.y * st.t.k };
      } else if (!st.touched) {
        fitView();
      }
    }
    if (st.centreNext !== undefined) { centreNode(st.centreNext); st.centreNext = undefined; }
    applyTransform();
    const ms = performance.now() - t0;
    root.dataset.layoutMs = ms.toFixed(1);
    root.dataset.layoutOnlyMs = lay.ms.toFixed(1);
    root.dataset.boxes = String(vis.boxes.filter((b) => b.kind !== "open").length);
    root.dataset.visibleNodes = String(vis.boxes.filter((b) => b.kind === "node").length);
    root.dataset.layouts = String((Number(root.dataset.layouts) || 0) + 1);
    if (!st.firstDone) {
      st.firstDone = true;
      root.dataset.firstRenderMs = (performance.now() - started).toFixed(1);
      root.dataset.ready = "1";
    }
  }

  function colours(b) {
    const mode = model.get("color_by");
    if (b.kind === "node") return nodeColor(st.m, b.node, mode, st.maxTime);
    return boxColor(st.m, b.members.length ? b.members : [b.node], mode, st.maxTime);
  }

  function text(x, y, content, attrs) {
    const t = s("text", { x, y, ...attrs });
    t.textContent = content;
    return t;
  }

  function draw() {
    const { m, vis, lay } = st;
    const k = stage();
    const marks = stageMarks(m, k);
    world.replaceChildren();
    // open groups underneath, outermost first; then the edges; then the boxes above them
    const groupLayer = s("g"), edgeLayer = s("g"), boxLayer = s("g");
    const depth = (b) => { let d = 0; for (let p = b.parent; p && vis.byId.get(p); p = vis.byId.get(p).parent) d++; return d; };
    const open = vis.boxes.filter((b) => b.kind === "open").sort((a, b) => depth(a) - depth(b));
    for (const b of open) {
      const p = lay.boxes.get(b.id), lines = lay.labels.get(b.id);
      if (!p || !lines) continue;
      const g = s("g", { class: "lk-gx-box lk-gx-open", "data-box": b.id });
      const ctrl = b.node >= 0;
      g.append(s("rect", { x: p.x, y: p.y, width: p.width, height: p.height, rx: 6,
        fill: ctrl ? "#fffbeb" : "#f8fafc", stroke: ctrl ? m.colors.control?.[1] || "#a16207" : "#94a3b8",
        "stroke-width": ctrl ? 2 : 1 }));
      g.append(text(p.x + 8, p.y + 16, `▾ ${lines[0]}`, { fill: "#374151", "font-weight": "600" }));
      const tip = s("title");
      tip.textContent = `${m.groups[b.group].path}: click this title to close it`;
      g.append(tip);
      groupLayer.append(g);
    }
    for (const b of vis.boxes) {
      if (b.kind === "open") continue;
      const p = lay.boxes.get(b.id), lines = lay.labels.get(b.id);
      if (!p || !lines) continue;
      const [fill, stroke] = colours(b);
      const cls = ["lk-gx-box", b.kind === "group" ? "lk-gx-group" : "lk-gx-node"];
      const g = s("g", { class: cls.join(" "), "data-box": b.id });
      if (b.kind === "node") g.dataset.node = m.text("name", b.node);
      const mark = b.kind === "node" ? marks.get(b.node) : null;
      const ghost = k > 0 && b.kind === "node" && !((m.alive[b.node] >> k) & 1);
      let border = stroke, width = 1.2, dash = "";
      if (mark) { border = (m.colors.marks?.[mark[0]] || ["#dc2626"])[0]; width = 3; }
      if (ghost) { border = mark ? border : "#dc2626"; width = 2.5; dash = "5 3"; }
      const cat = b.kind === "node" ? m.text("cat", b.node) : "";
      const rx = cat === "constant" ? p.height / 2 : cat === "placeholder" ? 2 : 4;
      const ctrl = b.kind === "group" && b.node >= 0;
      g.append(s("rect", { x: p.x, y: p.y, width: p.width, height: p.height, rx, fill,
        stroke: b.kind === "group" && !ctrl ? stroke : ctrl ? m.colors.control?.[1] || "#a16207" : border,
        "stroke-width": b.kind === "group" ? 2 : width, "stroke-dasharray": dash }));
      if (b.kind === "group") {
        g.append(s("rect", { x: p.x + 3, y: p.y + 3, width: p.width - 6, height: p.height - 6, rx: 3,
          fill: "none", stroke: ctrl ? m.colors.control?.[1] || "#a16207" : stroke, "stroke-width": 0.8 }));
      } else if (m.stateful[b.node]) {      // a side effect: a bar down its left side
        g.append(s("rect", { class: "lk-gx-stateful", x: p.x + 1.5, y: p.y + 1.5, width: 4,
          height: p.height - 3, rx: 1, fill: "#374151" }));
      }
      const ink = textColor(fill);
      g.append(text(p.x + p.width / 2, p.y + (lines[1] ? 13.5 : p.height / 2 + 4.5), lines[0],
        { "text-anchor": "middle", "font-weight": "600", fill: ink }));
      if (lines[1]) {
        g.append(text(p.x + p.width / 2, p.y + 26.5, lines[1],
          { "text-anchor": "middle", fill: ink === "#ffffff" ? "#f3f4f6" : "#4b5563" }));
      }
      const tip = s("title");
      const users = b.extracted ? vis.stubs.filter((e) => e.src === b.id).length : 0;
      tip.textContent = b.kind === "node"
        ? `${m.text("name", b.node)}: ${m.text("op", b.node)} ${m.text("type", b.node)}` + (mark ? `\n${mark[1]}` : "")
          + (ghost ? "\nremoved by this pass" : "") + (users ? `\nused by ${users} boxes: drawn as a stub at each` : "")
        : `${m.groups[b.group].path}: ${m.groups[b.group].count} nodes (click to open)`;
      g.append(tip);
      boxLayer.append(g);
    }
    for (const e of vis.edges) {
      const pts = lay.edges.get(e.id);
      if (!pts || !pts.length) continue;
      const [a, c1, c2, b] = pts.map((q) => `${q.x.toFixed(1)},${q.y.toFixed(1)}`);
      const path = s("path", { d: `M${a}C${c1} ${c2} ${b}`, class: "lk-gx-edge",
                               "marker-end": "url(#lk-gx-arrow)", "data-edge": e.id });
      if (e.count > 1) path.setAttribute("stroke-width", String(Math.min(1 + 0.3 * e.count, 3)));
      if (e.cross && model.get("color_by") === "device") {
        path.classList.add("lk-gx-cross");
        path.setAttribute("style", `stroke: ${CROSS}; stroke-dasharray: 5 3; stroke-width: 1.8`);
      }
      const tip = s("title");
      tip.textContent = e.nodes.slice(0, 6).map((i) => `${m.text("name", i)}: ${m.text("type", i)}`).join(", ")
        + (e.nodes.length > 6 ? `, … (${e.nodes.length} tensors)` : "");
      path.append(tip);
      edgeLayer.append(path);
    }
    // stubs: a short arrow into each user of an extracted node, a dot of its colour on top
    const slots = new Map();
    for (const e of vis.stubs) {
      const q = lay.boxes.get(e.dst), src = vis.byId.get(e.src);
      if (!q || !src) continue;
      const j = slots.get(e.dst) || 0;
      slots.set(e.dst, j + 1);
      const x = q.x + 10 + 9 * j, y = q.y;
      const g = s("g", { class: "lk-gx-stub", "data-edge": e.id });
      g.append(s("line", { x1: x, y1: y - 13, x2: x, y2: y - 1, stroke: "#9ca3af", "stroke-width": 1,
                           "marker-end": "url(#lk-gx-arrow)" }));
      const [fill, stroke] = colours(src);
      g.append(s("circle", { cx: x, cy: y - 15, r: 3.5, fill, stroke, "stroke-width": 1 }));
      const tip = s("title");
      tip.textContent = `from ${m.text("name", src.node)} (${m.text("type", src.node)}), an input of many`;
      g.append(tip);
      edgeLayer.append(g);
    }
    world.append(groupLayer, edgeLayer, boxLayer);
    drawMini();
    drawLegend();
    highlight();
    const shown = vis.boxes.filter((b) => b.kind !== "open").length;
    const alive = m.alive.filter((a) => (a >> k) & 1).length;
    status.textContent = `${shown.toLocaleString()} boxes · ${alive.toLocaleString()} nodes`
      + (st.matches.length ? ` · ${st.matches.length} match${st.matches.length > 1 ? "es" : ""}` : "");
    const stg = m.stages[k];
    slider.value = String(k);
    passLabel.textContent = stg ? (k === 0 ? "traced (before any pass)" : `${k}/${m.stages.length - 1} ${stg.summary.startsWith(`${stg.name}:`) ? stg.summary : `${stg.name}: ${stg.summary}`}`) : "";
    root.dataset.stageName = stg ? stg.name : "";
  }

  function drawLegend() {
    const mode = model.get("color_by");
    const items = legendItems(st.m, mode, stage(), st.vis.boxes, st.maxTime,
                              st.vis.edges.some((e) => e.cross));
    legend.replaceChildren(...items.map((it) => {
      if (it.gradient) {
        const ramp = h("span", { className: "ramp" });
        ramp.style.background = `linear-gradient(to right, ${it.gradient.join(", ")})`;
        return h("span", {}, [h("span", { text: "0" }), ramp, h("span", { text: `${timeText(it.hi)} · ${it.text}` })]);
      }
      if (it.line) {
        const sw = s("svg", { width: 22, height: 10 });
        sw.append(s("line", { x1: 1, y1: 5, x2: 21, y2: 5, stroke: it.stroke, "stroke-width": 1.8,
                              "stroke-dasharray": it.dash || "" }));
        return h("span", {}, [sw, it.text]);
      }
      if (it.stub) {
        const sw = s("svg", { width: 12, height: 14 });
        sw.append(s("circle", { cx: 6, cy: 4, r: 3.5, fill: "#ffffff", stroke: "#374151" }),
                  s("line", { x1: 6, y1: 7.5, x2: 6, y2: 14, stroke: "#9ca3af" }));
        return h("span", {}, [sw, it.text]);
      }
      const sw = h("span", { className: "sw" });
      sw.style.background = it.fill || "#fff";
      sw.style.border = `${it.width || 1.2}px ${it.dash ? "dashed" : it.double ? "double" : "solid"} ${it.stroke}`;
      if (it.double) sw.style.borderWidth = "3px";
      if (it.radius === "constant") sw.style.borderRadius = "6px";
      if (it.bar) sw.style.borderLeft = `4px solid ${it.stroke}`;
      return h("span", {}, [sw, it.text]);
    }));
    legend.dataset.items = String(items.length);
  }

  function drawMini() {
    const { lay, vis } = st;
    const big = vis.boxes.length > 12;
    mini.style.display = big ? "" : "none";
    st.miniView = null;
    if (!big) return;
    mini.setAttribute("viewBox", `0 0 ${lay.width} ${lay.height}`);
    mini.setAttribute("preserveAspectRatio", "xMidYMid meet");
    mini.replaceChildren();
    for (const b of vis.boxes) {
      const p = lay.boxes.get(b.id);
      if (!p) continue;
      mini.append(s("rect", { x: p.x, y: p.y, width: p.width, height: p.height,
        fill: b.kind === "open" ? "none" : colours(b)[0], stroke: "#94a3b8",
        "stroke-width": Math.max(lay.width, lay.height) / 400 }));
    }
    st.miniView = s("rect", { class: "lk-gx-miniview", fill: "rgba(59,130,246,0.12)", stroke: "#2563eb",
                              "stroke-width": Math.max(lay.width, lay.height) / 200 });
    mini.append(st.miniView);
  }

  function applyTransform() {
    const { x, y, k } = st.t;
    world.setAttribute("transform", `translate(${x},${y}) scale(${k})`);
    root.dataset.view = `${x.toFixed(2)},${y.toFixed(2)},${k.toFixed(4)}`;
    root.dataset.textPx = (FONT_PX * k).toFixed(2);
    if (st.miniView) {
      const [vw, vh] = viewport();
      const [gx, gy] = toGraph(st.t, 0, 0);
      st.miniView.setAttribute("x", gx);
      st.miniView.setAttribute("y", gy);
      st.miniView.setAttribute("width", vw / k);
      st.miniView.setAttribute("height", vh / k);
    }
  }

  function setView(t) {
    st.t = t;
    applyTransform();
  }

  function fitView() {
    const [vw, vh] = viewport();
    const { width, height } = st.lay;
    setView(showRegion({ x: 0, y: 0, width, height }, vw, vh, READ_K));
    root.dataset.fits = String(fitScale(width, height, vw, vh) >= READ_K);
  }

  function centreNode(i) {
    const id = st.vis.boxOf[i];
    const p = id && st.lay.boxes.get(id);
    if (!p) return;
    const [vw, vh] = viewport();
    setView(centreOn(p.x + p.width / 2, p.y + p.height / 2, vw, vh, Math.max(st.t.k, 0.9)));
    root.dataset.centred = st.m.text("name", i);
  }

  // ---- selection, search, lineage -----------------------------------------------------------
  function selectedIndex() {
    const name = model.get("selected");
    if (!name || !st.m) return -1;
    for (let i = 0; i < st.m.n; i++) if (st.m.text("name", i) === name && ((st.m.alive[i] >> stage()) & 1)) return i;
    return -1;
  }

  function highlight() {
    const i = selectedIndex();
    const lit = i >= 0 ? lineage(st.m, i, stage()) : null;
    const litBoxes = new Set();
    if (lit) for (const j of lit) if (st.vis.boxOf[j]) litBoxes.add(st.vis.boxOf[j]);
    const foundBoxes = new Set(st.matches.map((j) => st.vis.boxOf[j]).filter(Boolean));
    for (const g of world.querySelectorAll("g.lk-gx-box")) {
      const id = g.getAttribute("data-box");
      const b = st.vis.byId.get(id);
      if (!b) continue;
      g.classList.toggle("lk-gx-dim", !!lit && b.kind !== "open" && !litBoxes.has(id));
      g.classList.toggle("lk-gx-selected", i >= 0 && id === st.vis.boxOf[i] && b.kind !== "open");
      g.classList.toggle("lk-gx-found", foundBoxes.has(id) && b.kind !== "open");
    }
    for (const p of world.querySelectorAll("path.lk-gx-edge, g.lk-gx-stub")) {
      const e = p.getAttribute("data-edge").split(">");
      const on = lit && litBoxes.has(e[0]) && litBoxes.has(e[1]);
      p.classList.toggle("lk-gx-lit", !!on);
      p.classList.toggle("lk-gx-dim", !!lit && !on);
    }
    showDetails(i);
  }

  function showDetails(i) {
    if (i < 0) {
      details.replaceChildren(h("div", { className: "lk-gx-hint", text: "click a node for its details" }));
      details.dataset.node = "";
      return;
    }
    const m = st.m;
    const f = nodeFacts(m, i, stage());
    const rows = (pairs) => h("table", {}, pairs.map(([a, b]) => h("tr", {}, [h("td", { text: a }), h("td", { text: b })])));
    const valueBtn = h("button", { text: "value statistics", className: "lk-gx-value" });
    const valueOut = h("pre", { className: "lk-gx-valuetext" });
    const name = m.text("name", i);
    if (st.value && st.value.name === name) valueOut.textContent = st.value.text;
    else valueOut.style.display = "none";
    valueBtn.addEventListener("click", () => {
      valueOut.style.display = "";
      valueOut.textContent = "computing…";
      model.send({ event: "value", name, stage: stage() });
    });
    details.replaceChildren(h("h4", { text: name }), rows(f.facts),
      h("div", { text: `inputs (${f.inputs.length})`, style: "margin-top:6px;font-weight:600" }),
      rows(f.inputs.length ? f.inputs : [["(none)", ""]]),
      h("div", { text: `outputs go to (${f.users.length})`, style: "margin-top:6px;font-weight:600" }),
      rows(f.users.length ? f.users.slice(0, 40) : [["(none: an output or unused)", ""]]),
      h("div", { text: "pass history", style: "margin-top:6px;font-weight:600" }),
      rows(f.history.length ? f.history : [["(untouched by the passes)", ""]]),
      h("div", { style: "margin-top:6px" }, [valueBtn]), valueOut);
    details.dataset.node = name;
  }

  function runSearch(next) {
    const m = st.m;
    st.matches = search(m, model.get("query"), stage());
    if (!st.matches.length) { st.found = -1; draw(); return; }
    st.found = next ? (st.found + 1) % st.matches.length : 0;
    const i = st.matches[st.found];
    const want = pathsToShow(m, i).filter((p) => m.groups[m.pathIndex.get(p)].owner !== i);
    const have = expandedSet();
    st.centreNext = i;
    st.touched = true;
    if (want.some((p) => !have.has(p))) {
      save("expanded", [...new Set([...have, ...want])]);   // relayout follows, then centres
    } else {
      draw();
      centreNode(i);
      st.centreNext = undefined;
    }
  }

  // ---- gestures -----------------------------------------------------------------------------
  gestures(canvas, {
    onWheel: ({ x, y, deltaY, deltaMode }) => {
      st.touched = true;
      setView(zoomAt(st.t, x, y, 1 / wheelFactor(deltaY, deltaMode)));
    },
    onDrag: ({ phase, dx, dy }) => {
      if (phase !== "move") return;
      st.touched = true;
      setView({ ...st.t, x: st.t.x + dx, y: st.t.y + dy });
    },
    onClick: ({ x, y, event }) => {
      const g = event.target.closest ? event.target.closest("g.lk-gx-box") : null;
      if (!g) { save("selected", ""); return; }
      const b = st.vis.byId.get(g.getAttribute("data-box"));
      if (!b) return;
      const path = b.group >= 0 ? st.m.groups[b.group].path : null;
      st.anchor = b.id;
      st.touched = true;
      if (b.kind === "group") {
        if (b.node >= 0) save("selected", st.m.text("name", b.node));
        st.nextView = `open:${b.id}`;             // the view moves to what opened
        save("expanded", [...expandedSet(), path]);
      } else if (b.kind === "open") {
        const [, gy] = toGraph(st.t, x, y);
        const p = st.lay.boxes.get(b.id);
        if (p && gy - p.y < 24) {   // the title strip closes it (and everything inside)
          save("expanded", [...expandedSet()].filter((q) => q !== path && !q.startsWith(path + "/")));
        } else if (b.node >= 0) {
          save("selected", st.m.text("name", b.node));
        }
      } else {
        save("selected", st.m.text("name", b.node));
      }
    },
  });
  gestures(mini, {
    onClick: ({ event }) => miniJump(event),
    onDrag: ({ phase, event }) => { if (phase !== "end") miniJump(event); },
  });

  function miniJump(event) {
    const r = mini.getBoundingClientRect();
    const { width, height } = st.lay;
    const scale = Math.min(r.width / width, r.height / height);
    const ox = (r.width - width * scale) / 2, oy = (r.height - height * scale) / 2;
    const gx = (event.clientX - r.left - ox) / scale, gy = (event.clientY - r.top - oy) / scale;
    const [vw, vh] = viewport();
    st.touched = true;
    setView(centreOn(gx, gy, vw, vh, st.t.k));
  }

  searchBox.addEventListener("input", () => save("query", searchBox.value));
  searchBox.addEventListener("keydown", (e) => { if (e.key === "Enter") runSearch(true); });
  colorSel.addEventListener("change", () => save("color_by", colorSel.value));
  slider.addEventListener("input", () => save("stage", Number(slider.value)));
  // the arrow keys step through the passes here, whatever a page around would do with them
  // (a notebook's own shortcuts take arrow keys from elements they reach)
  slider.addEventListener("keydown", (e) => {
    const by = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1 }[e.key];
    if (by === undefined && e.key !== "Home" && e.key !== "End") return;
    e.preventDefault();
    e.stopPropagation();
    const last = Number(slider.max);
    const k = e.key === "Home" ? 0 : e.key === "End" ? last : Math.max(0, Math.min(last, stage() + by));
    if (k !== stage()) save("stage", k);
  });
  fitBtn.addEventListener("click", () => { st.touched = false; fitView(); });
  collapseBtn.addEventListener("click", () => {
    st.anchor = null;
    st.touched = false;
    st.nextView = "fit";
    save("expanded", []);
  });

  const onExpanded = () => {
    if (st.silent) return;
    const view = st.nextView || "keep";
    st.nextView = null;
    relayout(view);
  };
  model.on("change:data", load);
  model.on("change:expanded", onExpanded);
  model.on("change:stage", () => relayout(st.touched ? "keep" : "fit"));
  model.on("change:selected", () => {
    const i = selectedIndex();
    if (i >= 0 && !st.vis.boxOf[i]) { st.centreNext = i; }
    highlight();
  });
  model.on("change:query", () => {
    if (searchBox.value !== model.get("query")) searchBox.value = model.get("query");
    runSearch(false);
  });
  model.on("change:color_by", () => { colorSel.value = model.get("color_by"); draw(); });
  model.on("msg:custom", (msg) => {
    if (!msg || msg.event !== "value") return;
    st.value = { name: msg.name, text: msg.text };
    const out = details.querySelector(".lk-gx-valuetext");
    if (out && details.dataset.node === msg.name) { out.style.display = ""; out.textContent = msg.text; }
  });
  // the canvas gets its real size once the notebook shows it (and when the window changes):
  // until the person moves the view, choose what opens and fit again for that size
  if (typeof ResizeObserver !== "undefined") {
    const observer = new ResizeObserver(() => {
      const r = canvas.getBoundingClientRect();
      if (r.width < 50 || !st.m) return;
      const was = st.size;
      st.size = [r.width, r.height];
      if (was && Math.abs(was[0] - r.width) < 4 && Math.abs(was[1] - r.height) < 4) return;
      if (st.touched) { applyTransform(); return; }
      const chosen = st.chosenFor;
      if (chosen && Math.abs(chosen - r.width) > 4 && (model.get("data") || {}).auto_open) {
        st.auto = true;
      }
      relayout("fit");
    });
    observer.observe(canvas);
  }
  searchBox.value = model.get("query") || "";
  load();
}
