// The timeline explorer as an anywidget view: render({model, el}) builds the controls, the
// overview strip, the canvas and the details / totals panels, and keeps them in step with
// the model's traits (data, step, query, selected, selection, view).
//
// Gestures on the main view: wheel zooms about the pointer; drag pans; shift+drag, or a drag
// on the time axis, selects a range (totals per op and per lane appear); a click on a bar
// shows its details, and hovering one shows them at once in a tooltip. Keys as in Perfetto
// (once the timeline has been clicked): W / S zoom in and out about the pointer, A / D pan
// (the arrow keys too), Escape clears the selection. On the overview strip: drag the window
// to pan, drag elsewhere to pick a new window, click to centre it.
//
// The first view is the first few steps, not the whole run (a whole run of thousands of ops
// is a barcode); "whole run" shows everything. Message arrows are drawn for the visible range
// when there are few enough to read, else only those of the selected bar or range.

import { bytesText, clampView, panBy, timeText, wheelFactor, zoomAt } from "../shared/scale.js";
import { h } from "../shared/dom.js";
import { gestures, sizeCanvas } from "../shared/pointer.js";
import {
  arrowsIn, decode, extent, filterEvents, firstSteps, hitTest, laneLabel, layoutLanes, maskOf,
  moduleRuns, rangeTotals, scopeText, visibleArrows,
} from "./events.js";
import {
  GEOM, drawMain, drawOverview, labelWidth, laneAt, mainHeight, placeLanes, timeScale,
} from "./draw.js";

const MAX_ARROWS = 40;     // more message arrows than this in view: only the selection's

const CSS = `
.lk-tl { font: 12px system-ui, -apple-system, 'Segoe UI', sans-serif; color: #111827; position: relative; }
.lk-tl-scroll:focus { outline: 2px solid #93c5fd; outline-offset: -2px; }
.lk-tl-tip { position: absolute; z-index: 10; pointer-events: none; background: rgba(17,24,39,0.94);
  color: #f9fafb; font-size: 11px; padding: 5px 7px; border-radius: 4px; max-width: 420px;
  white-space: pre-wrap; line-height: 1.35; display: none; }
.lk-tl-bar { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.lk-tl-bar input[type=search] { width: 200px; }
.lk-tl-status { color: #6b7280; }
.lk-tl-scroll { max-height: 560px; overflow-y: auto; border: 1px solid #e5e7eb; }
.lk-tl canvas { display: block; }
.lk-tl-main { cursor: grab; }
.lk-tl-overview { cursor: ew-resize; border: 1px solid #e5e7eb; border-bottom: none; }
.lk-tl-panels { display: flex; gap: 16px; margin-top: 6px; align-items: flex-start; }
.lk-tl-panels > div { flex: 1; min-width: 0; }
.lk-tl-panels h4 { margin: 2px 0 4px; font-size: 12px; }
.lk-tl-panels table { border-collapse: collapse; font-size: 11px; }
.lk-tl-panels td, .lk-tl-panels th { padding: 1px 8px 1px 0; text-align: left; }
.lk-tl-panels td.num { text-align: right; font-variant-numeric: tabular-nums; }
.lk-tl-legend { display: flex; gap: 12px; flex-wrap: wrap; margin-top: 4px; color: #374151; }
.lk-tl-legend span.sw { display: inline-block; width: 12px; height: 10px; margin-right: 4px;
  vertical-align: -1px; border: 1px solid rgba(0,0,0,0.25); }
.lk-tl-hint { color: #6b7280; font-size: 11px; }
`;

function table(rows, head) {
  const t = h("table", {}, [h("tr", {}, head.map((c) => h("th", { text: c })))]);
  for (const r of rows) {
    t.append(h("tr", {}, r.map((c, j) => h("td", { text: c, className: j ? "num" : "" }))));
  }
  return t;
}

/** The lines of the details panel for event i: [label, value] pairs. */
export function eventFacts(ev, i) {
  const s = ev.strings;
  const facts = [["op", s.op[ev.op[i]]], ["node", s.name[ev.name[i]]],
    ["lane", laneLabel(ev, ev.lane[i])], ["step", String(ev.step[i])],
    ["duration", timeText(ev.dur[i])], ["starts at", timeText(ev.start[i])],
    ["kind", ev.kinds[ev.kind[i]]?.name ?? "?"]];
  if (ev.bytesIn[i] || ev.bytesOut[i]) {
    facts.push(["bytes", `in ${bytesText(ev.bytesIn[i])} · out ${bytesText(ev.bytesOut[i])}`]);
  }
  if (ev.shape && ev.shape[i] >= 0) {        // "float32[8, 4], float32[4] -> float32[8, 4]"
    const text = s.shape[ev.shape[i]];
    const cut = text.lastIndexOf(" -> ");
    if (cut < 0) facts.push(["shapes", text]);
    else facts.push(["inputs", text.slice(0, cut) || "none"], ["outputs", text.slice(cut + 4)]);
  }
  facts.push(["recorded by", s.source[ev.source[i]]]);
  if (ev.line && ev.line[i] >= 0) facts.push(["source line", s.line[ev.line[i]]]);
  const scope = scopeText(ev, i);
  if (scope) facts.splice(2, 0, ["module", scope]);
  return facts;
}

export function render({ model, el }) {
  const started = performance.now();
  const root = h("div", { className: "lk-tl", "data-lm-suppress-shortcuts": "true" });
  root.append(h("style", { text: CSS }));
  const stepSelect = h("select", { "aria-label": "step", className: "lk-tl-step" });
  const search = h("input", { type: "search", placeholder: "filter ops by name",
                              "aria-label": "filter ops", className: "lk-tl-search" });
  const reset = h("button", { text: "whole run", className: "lk-tl-reset" });
  const tip = h("div", { className: "lk-tl-tip" });
  const status = h("span", { className: "lk-tl-status" });
  const title = h("div", { className: "lk-tl-title" });
  const overview = h("canvas", { className: "lk-tl-overview" });
  const canvas = h("canvas", { className: "lk-tl-main" });
  const scroll = h("div", { className: "lk-tl-scroll", tabindex: "0" }, [canvas]);
  const details = h("div", { className: "lk-tl-details" });
  const totals = h("div", { className: "lk-tl-totals" });
  const legend = h("div", { className: "lk-tl-legend" });
  root.append(title,
    h("div", { className: "lk-tl-bar" }, [h("label", { text: "step " }, [stepSelect]),
      search, reset, status]),
    overview, scroll, legend,
    h("div", { className: "lk-tl-hint", text: "wheel or W / S: zoom · drag or A / D: pan · "
      + "shift+drag or drag on the time axis: select a range · hover a bar: details · click: keep "
      + "them · Esc: clear" }),
    h("div", { className: "lk-tl-panels" }, [details, totals]), tip);
  el.append(root);

  const s = { step: null, query: "", selected: -1, range: null, hover: -1 };
  let width = 0, mainCtx = null, overCtx = null, overScale = null, frame = 0, firstDone = false;

  function load() {
    s.ev = decode(model.get("data") || {});
    s.layout = placeLanes(layoutLanes(s.ev));
    s.bounds = s.ev.span.slice();
    s.labelW = labelWidth(canvas.getContext("2d"), s.ev, GEOM.labelW,
                          Math.max(GEOM.labelW, 0.45 * (root.clientWidth || 960)));
    root.dataset.labelW = String(s.labelW);
    root.dataset.axisH = String(GEOM.axisH);
    root.dataset.laneTops = JSON.stringify(s.layout.rowsY);
    stepSelect.replaceChildren(h("option", { value: "", text: "all steps" }),
      ...s.ev.steps.map((st) => h("option", { value: String(st.step), text: `step ${st.step}` })));
    title.textContent = s.ev.title;
    legend.replaceChildren(...s.ev.kinds.filter((k) => k.used !== false).map((k) => {
      const sw = h("span", { className: "sw" });
      sw.style.background = k.fill;
      sw.style.borderColor = k.stroke || k.fill;
      return h("span", {}, [sw, k.name]);
    }));
    if (s.ev.arrows.length) legend.append(h("span", { text: "→ message between lanes" }));
    if (s.ev.modules.length) legend.append(h("span", { text: "module track: the module each run of ops ran in" }));
    fromModel();
  }

  function viewFromModel() {
    const view = model.get("view") || [];
    if (view.length === 2) s.view = clampView(view, s.bounds, 1);
    else s.view = s.step === null ? firstSteps(s.ev) : s.bounds.slice();
  }

  function refilter() {
    const { ev } = s;
    s.indices = filterEvents(ev, { step: s.step, query: s.query });
    s.mask = maskOf(ev.n, s.indices);
    s.byKind = ev.kinds.map(() => []);
    for (const i of s.indices) s.byKind[ev.kind[i]]?.push(i);
    s.arrows = visibleArrows(ev, s.mask);
    s.runs = moduleRuns(ev, s.indices);
    s.bounds = s.step === null ? ev.span.slice() : extent(ev, filterEvents(ev, { step: s.step }));
    s.overviewCache = null;
    if (s.selected >= 0 && !s.mask[s.selected]) s.selected = -1;
    root.dataset.visible = String(s.indices.length);
  }

  function fromModel() {
    const step = model.get("step");
    s.step = step === null || step === undefined || step < 0 ? null : step;
    s.query = model.get("query") || "";
    s.selected = model.get("selected") ?? -1;
    const range = model.get("selection") || [];
    s.range = range.length === 2 ? range.slice() : null;
    stepSelect.value = s.step === null ? "" : String(s.step);
    if (search.value !== s.query) search.value = s.query;
    refilter();
    viewFromModel();
    showDetails();
    showTotals();
    draw();
  }

  function save(fields) {
    if (viewTimer && !("view" in fields)) {   // a zoom not saved yet goes first: setting the
      fields = { view: s.view.slice(), ...fields };  // other traits re-reads the model's view
    }
    clearTimeout(viewTimer);
    viewTimer = 0;
    for (const [k, v] of Object.entries(fields)) model.set(k, v);
    model.save_changes();
  }

  function resize() {
    width = Math.max(root.clientWidth || el.clientWidth || 0, 480);
    mainCtx = sizeCanvas(canvas, width - 2, mainHeight(s.layout));
    overCtx = sizeCanvas(overview, width - 2, GEOM.overviewH);
    s.overviewCache = null;
  }

  function draw() {
    if (frame) return;
    frame = requestAnimationFrame(paint);
  }

  function paint() {
    frame = 0;
    const w = width - 2;
    if (!mainCtx || Math.max(root.clientWidth, 480) !== width) resize();
    const inView = arrowsIn(s.ev, s.arrows, s.view);
    const few = inView.length <= MAX_ARROWS;
    s.drawnArrows = few ? inView : inView.filter(([a, b]) => a === s.selected || b === s.selected
      || (s.range && Math.min(s.ev.end[a], s.ev.end[b]) >= Math.min(...s.range)
          && Math.max(s.ev.end[a], s.ev.end[b]) <= Math.max(...s.range)));
    drawMain(mainCtx, s, w, mainHeight(s.layout));
    overScale = drawOverview(overCtx, s, w);
    const n = s.indices.length;
    status.textContent = `${n.toLocaleString()} of ${s.ev.n.toLocaleString()} events · `
      + `showing ${timeText(s.view[0])} – ${timeText(s.view[1])} `
      + `(${timeText(s.view[1] - s.view[0])} of ${timeText(s.bounds[1] - s.bounds[0])})`
      + (few ? "" : ` · ${inView.length} messages: click a bar or select a range to see its arrows`);
    root.dataset.arrows = String(s.drawnArrows.length);
    let events = 0;
    for (const i of s.indices) if (s.ev.end[i] >= s.view[0] && s.ev.start[i] <= s.view[1]) events++;
    root.dataset.inView = String(events);
    root.dataset.viewLo = String(s.view[0]);
    root.dataset.viewHi = String(s.view[1]);
    if (!firstDone) {
      firstDone = true;
      root.dataset.firstRenderMs = (performance.now() - started).toFixed(1);
      root.dataset.ready = "1";
    }
  }

  function showDetails() {
    if (s.selected < 0 || s.selected >= s.ev.n) {
      details.replaceChildren(h("h4", { text: "event" }),
        h("div", { className: "lk-tl-hint", text: "click a bar to see its details" }));
      return;
    }
    details.replaceChildren(h("h4", { text: "event" }), table(eventFacts(s.ev, s.selected),
      ["", ""]));
  }

  function showTotals() {
    if (!s.range) {
      totals.replaceChildren(h("h4", { text: "range" }), h("div", { className: "lk-tl-hint",
        text: "shift+drag (or drag on the time axis) to total a time range" }));
      return;
    }
    const [a, b] = [Math.min(...s.range), Math.max(...s.range)];
    const t = rangeTotals(s.ev, s.indices, a, b);
    const rows = (list) => list.slice(0, 12).map((r) => [r.key, String(r.count), timeText(r.time)]);
    totals.replaceChildren(
      h("h4", { text: `range ${timeText(a)} – ${timeText(b)} (${timeText(b - a)}): `
        + `${t.count} events, ${timeText(t.time)} busy` }),
      table(rows(t.byOp), ["op", "events", "time in range"]),
      h("div", { text: " " }),
      table(rows(t.byLane), ["lane", "events", "time in range"]));
    totals.dataset.count = String(t.count);
  }

  let viewTimer = 0;
  function setView(view, persist = "later") {
    s.view = clampView(view, s.bounds, 1);
    draw();
    clearTimeout(viewTimer);
    viewTimer = 0;
    if (persist) viewTimer = setTimeout(() => save({ view: s.view.slice() }), 150);
  }

  // ---- gestures -------------------------------------------------------------------------
  const scale = () => timeScale(s.view, width - 2, s.labelW);
  const toTime = (x) => scale().invert(x);
  let dragMode = null;
  const offMain = gestures(canvas, {
    onWheel({ x, event }) {
      if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        setView(panBy(s.view, event.deltaX / scale().k, s.bounds));
        return;
      }
      const at = toTime(Math.max(x, s.labelW));
      setView(zoomAt(s.view, at, wheelFactor(event.deltaY, event.deltaMode), s.bounds, 1));
    },
    onDrag({ phase, x, x0, y0, dx, shiftKey }) {
      if (phase === "start") dragMode = shiftKey || y0 < GEOM.axisH ? "select" : "pan";
      if (dragMode === "pan") {
        canvas.style.cursor = phase === "end" ? "" : "grabbing";
        if (dx) setView(panBy(s.view, -dx / scale().k, s.bounds));
        return;
      }
      s.range = [toTime(Math.max(x0, s.labelW)), toTime(Math.max(x, s.labelW))];
      draw();
      if (phase === "end") {
        s.range.sort((p, q) => p - q);
        showTotals();
        save({ selection: s.range.slice() });
      }
    },
    onClick({ x, y }) {
      if (y < GEOM.axisH) {               // a click on the axis clears the range
        s.range = null;
        showTotals();
        save({ selection: [] });
        draw();
        return;
      }
      const hit = eventAt(x, y);
      s.selected = hit;
      showDetails();
      save({ selected: hit });
      draw();
    },
  });
  let overMode = null, grab = 0;
  const offOverview = gestures(overview, {
    onDrag({ phase, x, x0 }) {
      if (!overScale) return;
      if (phase === "start") {
        const a = overScale(s.view[0]), b = overScale(s.view[1]);
        overMode = x0 >= a - 3 && x0 <= b + 3 ? "move" : "pick";
        grab = overScale.invert(x0) - s.view[0];
      }
      if (overMode === "move") {
        const span = s.view[1] - s.view[0], lo = overScale.invert(x) - grab;
        setView([lo, lo + span], phase === "end" ? "now" : null);
      } else {
        const a = overScale.invert(Math.min(x0, x)), b = overScale.invert(Math.max(x0, x));
        setView([a, Math.max(b, a + 1)], phase === "end" ? "now" : null);
      }
      if (phase === "end") save({ view: s.view.slice() });
    },
    onClick({ x }) {
      if (!overScale) return;
      const span = s.view[1] - s.view[0], c = overScale.invert(x);
      setView([c - span / 2, c + span / 2]);
    },
  });
  stepSelect.addEventListener("change", () => {
    const step = stepSelect.value === "" ? null : Number(stepSelect.value);
    save({ view: [], selected: -1, step: step === null ? -1 : step });
  });
  search.addEventListener("input", () => save({ query: search.value }));
  reset.addEventListener("click", () => setView(s.bounds.slice(), "now"));

  // ---- hover: the bar under the pointer, its details in a tooltip at once ----------------
  function eventAt(x, y) {
    const where = laneAt(s.layout, y);
    if (!where || where.row < 0 || x < s.labelW) return -1;
    const sc = scale();
    return hitTest(s.ev, s.layout, s.indices, where.lane, where.row, sc.invert(x), 3 / sc.k);
  }

  let pointer = null;          // the last pointer position over the canvas (for W / S)
  function hover(event) {
    const r = canvas.getBoundingClientRect();
    const x = event.clientX - r.left, y = event.clientY - r.top;
    pointer = { x, y };
    if (event.buttons) return hideTip();
    const i = eventAt(x, y);
    if (i !== s.hover) {
      s.hover = i;
      draw();
    }
    if (i < 0) return hideTip();
    const facts = eventFacts(s.ev, i).filter(([k]) => k !== "recorded by" && k !== "starts at");
    tip.textContent = facts.map(([k, v]) => `${k}: ${v}`).join("\n");
    tip.style.display = "block";
    const box = root.getBoundingClientRect();
    const left = event.clientX - box.left + 14, top = event.clientY - box.top + 14;
    tip.style.left = `${Math.min(left, Math.max(box.width - tip.offsetWidth - 4, 0))}px`;
    tip.style.top = `${top}px`;
    root.dataset.hover = String(i);
    root.dataset.hoverMs = (performance.now() - event.timeStamp).toFixed(1);
  }
  function hideTip() {
    tip.style.display = "none";
    root.dataset.hover = "-1";
    if (s.hover >= 0) {
      s.hover = -1;
      draw();
    }
  }
  canvas.addEventListener("mousemove", hover);
  canvas.addEventListener("mouseleave", () => { pointer = null; hideTip(); });

  // ---- keys, as in Perfetto: W / S zoom about the pointer, A / D pan; arrows too ----------
  const KEYS = { w: "in", arrowup: "in", s: "out", arrowdown: "out", a: "left", arrowleft: "left",
                 d: "right", arrowright: "right" };
  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const what = KEYS[event.key.toLowerCase()];
    if (event.key === "Escape") {
      s.selected = -1;
      s.range = null;
      showDetails();
      showTotals();
      save({ selected: -1, selection: [] });
      draw();
    } else if (!what) {
      return;
    } else if (what === "in" || what === "out") {
      const at = pointer && pointer.x >= s.labelW ? toTime(pointer.x) : (s.view[0] + s.view[1]) / 2;
      setView(zoomAt(s.view, at, what === "in" ? 0.8 : 1.25, s.bounds, 1));
    } else {
      const span = s.view[1] - s.view[0];
      setView(panBy(s.view, (what === "left" ? -0.15 : 0.15) * span, s.bounds));
    }
    event.preventDefault();
    event.stopPropagation();
  }
  scroll.addEventListener("keydown", onKey);
  canvas.addEventListener("mousedown", () => scroll.focus({ preventScroll: true }));

  const onData = () => load();
  const onState = () => fromModel();
  const onView = () => {
    viewFromModel();
    draw();
  };
  const STATE = ["step", "query", "selected", "selection"];
  model.on("change:data", onData);
  model.on("change:view", onView);
  for (const k of STATE) model.on(`change:${k}`, onState);
  load();
  const observer = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => draw()) : null;
  observer?.observe(root);

  return () => {
    offMain();
    offOverview();
    observer?.disconnect();
    if (frame) cancelAnimationFrame(frame);
    model.off("change:data", onData);
    model.off("change:view", onView);
    for (const k of STATE) model.off(`change:${k}`, onState);
  };
}
