// Drawing the timeline on canvas: lanes (named in full), each lane's module track, bars
// nested where their events nest, step boundaries and labels, send -> recv arrows, the
// selected range and the time axis (the main view), and the whole run in miniature with the
// visible window on it (the overview strip). Every function takes the explorer's state and
// draws.

import { linearScale, ticks, timeText } from "../shared/scale.js";

export const GEOM = { labelW: 170, axisH: 40, rowH: 18, laneGap: 6, bandH: 14, overviewH: 38, pad: 8 };
const FONT = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";
const TEXT = "#111827", MUTED = "#6b7280", GRID = "#e5e7eb";
const SELECTION = "rgba(37, 99, 235, 0.14)", SELECTION_EDGE = "#2563eb";
const ARROW = "#7c3aed", STEP_SHADE = "rgba(99, 102, 241, 0.06)";
const MODULE_FILLS = ["#e0e7ff", "#fce7f3", "#dcfce7", "#fef3c7", "#e0f2fe", "#f3e8ff", "#ffe4e6", "#ecfccb"];

/** Pixel tops of each lane, its module track and its rows, for a lane layout (layoutLanes):
 * adds {laneY, rowsY, bottom} to it. */
export function placeLanes(layout) {
  const laneY = [], rowsY = [];
  let y = GEOM.axisH;
  layout.rows.forEach((rows, k) => {
    laneY.push(y);
    const band = (layout.band && layout.band[k]) ? GEOM.bandH : 0;
    rowsY.push(y + band);
    y += band + rows * GEOM.rowH + GEOM.laneGap;
  });
  return Object.assign(layout, { laneY, rowsY, bottom: y });
}

/** Height in CSS pixels of the main view for this layout. */
export function mainHeight(layout) {
  return (layout.bottom ?? placeLanes(layout).bottom) + GEOM.pad;
}

/** Pixel y of the top of lane k, row r. */
export function rowY(layout, k, r) {
  return layout.rowsY[k] + r * GEOM.rowH;
}

/** {lane, row} under pixel y (row -1: the lane's module track), or null outside every lane. */
export function laneAt(layout, y) {
  for (let k = 0; k < layout.rows.length; k++) {
    if (y >= layout.laneY[k] && y < layout.rowsY[k]) return { lane: k, row: -1 };
    const top = layout.rowsY[k];
    if (y >= top && y < top + layout.rows[k] * GEOM.rowH) {
      return { lane: k, row: Math.floor((y - top) / GEOM.rowH) };
    }
  }
  return null;
}

/** The width the lane names need in full (bold device, then lane), within [min, max]. */
export function labelWidth(ctx, ev, min = GEOM.labelW, max = 420) {
  let w = 0;
  for (const lane of ev.lanes) {
    ctx.font = `bold ${FONT}`;
    const a = ctx.measureText(String(lane.device ?? "")).width;
    ctx.font = FONT;
    const b = ctx.measureText(String(lane.lane ?? "")).width;
    w = Math.max(w, 12 + a + 6 + b + 10);
  }
  return Math.round(Math.max(min, Math.min(max, w)));
}

/** The scale from time (ns) to x for a view, in a canvas `width` pixels wide. */
export function timeScale(view, width, labelW = GEOM.labelW) {
  return linearScale(view, [labelW, width - GEOM.pad]);
}

export function drawMain(ctx, s, width, height) {
  const { ev, layout } = s;
  const L = s.labelW || GEOM.labelW;
  const x = timeScale(s.view, width, L);
  const x0 = L, x1 = width - GEOM.pad;
  ctx.clearRect(0, 0, width, height);
  ctx.fillStyle = "white";
  ctx.fillRect(0, 0, width, height);
  ctx.font = FONT;
  ctx.textBaseline = "middle";
  // lane backgrounds and names (in full: the name column is as wide as they need)
  ev.lanes.forEach((lane, k) => {
    const top = layout.laneY[k], h = layout.rowsY[k] - top + layout.rows[k] * GEOM.rowH;
    ctx.fillStyle = k % 2 ? "#f3f4f6" : "#f9fafb";
    ctx.fillRect(0, top, width, h);
    ctx.fillStyle = lane.stroke || MUTED;
    ctx.fillRect(2, top + 2, 5, h - 4);
    const mid = layout.rowsY[k] + GEOM.rowH / 2;
    ctx.fillStyle = TEXT;
    ctx.font = `bold ${FONT}`;
    const device = String(lane.device ?? "");
    ctx.fillText(device, 12, mid);
    const used = ctx.measureText(device).width + 6;
    ctx.font = FONT;
    ctx.fillStyle = MUTED;
    ctx.fillText(clip(ctx, lane.lane, x0 - 16 - used), 12 + used, mid);
    if (layout.band && layout.band[k]) {
      ctx.fillStyle = MUTED;
      ctx.fillText("module", 12, top + GEOM.bandH / 2);
    }
  });
  ctx.save();
  ctx.beginPath();
  ctx.rect(x0, 0, x1 - x0, height);
  ctx.clip();
  // steps: every other step shaded, a dashed line where each ends, its number on top
  const shown = ev.steps.filter((st) => s.step === null || st.step === s.step);
  let labelEnd = -Infinity;           // where the last step label ended: labels never overlap
  shown.forEach((st, j) => {
    const a = x(st.start), b = x(Math.max(st.end, st.mark ?? st.end));
    if (b < x0 || a > x1) return;
    if (j % 2) {
      ctx.fillStyle = STEP_SHADE;
      ctx.fillRect(a, GEOM.axisH - 12, b - a, height);
    }
    ctx.font = `bold ${FONT}`;
    const label = `step ${st.step}`;
    const at = Math.max(a, x0) + 3, w = ctx.measureText(label).width;
    if (Math.min(b, x1) - at > w + 3 && at > labelEnd + 6) {           // room for it
      ctx.fillStyle = "#4338ca";
      ctx.fillText(label, at, GEOM.axisH - 6);
      labelEnd = at + w;
    }
    ctx.font = FONT;
  });
  // grid and axis
  const { ticks: tks } = ticks(s.view, Math.max(2, Math.floor((x1 - x0) / 90)));
  ctx.strokeStyle = GRID;
  ctx.lineWidth = 1;
  ctx.fillStyle = MUTED;
  ctx.textAlign = "center";
  for (const t of tks) {
    const px = Math.round(x(t)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(px, 20);
    ctx.lineTo(px, height);
    ctx.stroke();
    const label = timeText(t), half = ctx.measureText(label).width / 2;
    ctx.fillText(label, Math.min(Math.max(px, x0 + half + 1), x1 - half - 1), 9);   // whole
  }
  ctx.textAlign = "left";
  ctx.strokeStyle = "#4338ca";
  ctx.setLineDash([4, 3]);
  for (const st of shown) {
    if (st.mark == null) continue;
    const px = Math.round(x(st.mark)) + 0.5;
    if (px < x0 || px > x1) continue;
    ctx.beginPath();
    ctx.moveTo(px, GEOM.axisH - 14);
    ctx.lineTo(px, height);
    ctx.stroke();
  }
  ctx.setLineDash([]);
  // module tracks: which module each run of ops ran in
  const minT = s.view[0], maxT = s.view[1], k = x.k;
  for (const r of s.runs || []) {
    if (r.end < minT || r.start > maxT) continue;
    const px = x0 + (r.start - minT) * k, w = Math.max((r.end - r.start) * k, 1);
    const py = layout.laneY[r.lane] + 1, bh = GEOM.bandH - 2;
    ctx.fillStyle = MODULE_FILLS[r.module % MODULE_FILLS.length];
    ctx.fillRect(px, py, w, bh);
    const name = ev.modules[r.module];
    if (w > ctx.measureText(name).width + 6) {
      ctx.fillStyle = "#374151";
      ctx.fillText(name, Math.max(px, x0) + 3, py + bh / 2);
    }
  }
  // bars, a kind at a time so that the colour changes rarely: each bar in the kind's border
  // colour (all a bar thinner than a few pixels shows), then the wide ones' light fill inside
  const bh = GEOM.rowH - 4;
  const labelled = [];
  for (let kind = 0; kind < ev.kinds.length; kind++) {
    const wide = [];
    ctx.fillStyle = ev.kinds[kind].stroke || ev.kinds[kind].fill;
    for (const i of s.byKind[kind]) {
      const a = ev.start[i], b = ev.end[i];
      if (b < minT || a > maxT) continue;
      const px = x0 + (a - minT) * k, w = Math.max((b - a) * k, 1);
      const py = layout.rowsY[ev.lane[i]] + layout.row[i] * GEOM.rowH + 2;
      ctx.fillRect(px, py, w, bh);
      if (w >= 4) wide.push(px, py, w);
      if (w > 40) labelled.push([i, px, w, py]);
    }
    ctx.fillStyle = ev.kinds[kind].fill;
    for (let j = 0; j < wide.length; j += 3) {
      ctx.fillRect(wide[j] + 1, wide[j + 1] + 1, wide[j + 2] - 2, bh - 2);
    }
  }
  ctx.fillStyle = TEXT;
  for (const [i, px, w, py] of labelled) {
    const text = ev.strings.op[ev.op[i]];
    if (w > ctx.measureText(text).width + 6) {
      ctx.fillText(text, Math.max(px, x0) + 3, py + bh / 2);
    }
  }
  // send -> recv arrows: those of the visible range when few, else those of the selection
  ctx.strokeStyle = ARROW;
  ctx.fillStyle = ARROW;
  ctx.lineWidth = 1.5;
  for (const [a, b] of s.drawnArrows || []) {
    const ax = x(ev.end[a]), bx = x(ev.end[b]);
    if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1) continue;
    const ay = rowY(layout, ev.lane[a], layout.row[a]) + GEOM.rowH / 2;
    const by = rowY(layout, ev.lane[b], layout.row[b]) + GEOM.rowH / 2;
    arrow(ctx, ax, ay, bx, by);
  }
  ctx.lineWidth = 1;
  // the hovered and the selected event
  for (const [i, w0] of [[s.hover, 1.5], [s.selected, 2.5]]) {
    if (!(i >= 0)) continue;
    const px = x(ev.start[i]), w = Math.max((ev.end[i] - ev.start[i]) * k, 2);
    const py = rowY(layout, ev.lane[i], layout.row[i]) + 1;
    ctx.strokeStyle = TEXT;
    ctx.lineWidth = w0;
    ctx.strokeRect(px - 1, py, w + 2, GEOM.rowH - 2);
    ctx.lineWidth = 1;
  }
  // the selected time range
  if (s.range) {
    const [a, b] = s.range;
    const pa = x(Math.min(a, b)), pb = x(Math.max(a, b));
    ctx.fillStyle = SELECTION;
    ctx.fillRect(pa, GEOM.axisH - 14, Math.max(pb - pa, 1), height);
    ctx.strokeStyle = SELECTION_EDGE;
    ctx.beginPath();
    ctx.moveTo(pa + 0.5, GEOM.axisH - 14);
    ctx.lineTo(pa + 0.5, height);
    ctx.moveTo(pb + 0.5, GEOM.axisH - 14);
    ctx.lineTo(pb + 0.5, height);
    ctx.stroke();
  }
  ctx.restore();
  ctx.strokeStyle = MUTED;
  ctx.beginPath();
  ctx.moveTo(x0, 19.5);
  ctx.lineTo(x1, 19.5);
  ctx.stroke();
}

function arrow(ctx, ax, ay, bx, by) {
  ctx.beginPath();
  ctx.moveTo(ax, ay);
  ctx.lineTo(bx, by);
  ctx.stroke();
  const angle = Math.atan2(by - ay, bx - ax), h = 7;
  ctx.beginPath();
  ctx.moveTo(bx, by);
  ctx.lineTo(bx - h * Math.cos(angle - 0.45), by - h * Math.sin(angle - 0.45));
  ctx.lineTo(bx - h * Math.cos(angle + 0.45), by - h * Math.sin(angle + 0.45));
  ctx.closePath();
  ctx.fill();
}

function clip(ctx, text, width) {
  text = String(text ?? "");
  if (ctx.measureText(text).width <= width) return text;
  while (text.length > 1 && ctx.measureText(`${text}…`).width > width) text = text.slice(0, -1);
  return `${text}…`;
}

/** The overview: every visible event in miniature (a row per lane) and the view's window.
 *  The miniature is drawn once per filter into `s.overviewCache`. */
export function drawOverview(ctx, s, width) {
  const h = GEOM.overviewH, L = s.labelW || GEOM.labelW;
  const x = linearScale(s.bounds, [L, width - GEOM.pad]);
  if (!s.overviewCache || s.overviewCache.width !== width) {
    const { ev } = s;
    const nl = Math.max(ev.lanes.length, 1), laneH = (h - 6) / nl;
    const bars = [];
    for (let kind = 0; kind < ev.kinds.length; kind++) {
      for (const i of s.byKind[kind]) {
        bars.push([kind, x(ev.start[i]), Math.max((ev.end[i] - ev.start[i]) * x.k, 0.7),
                   3 + ev.lane[i] * laneH, Math.max(laneH - 1, 1)]);
      }
    }
    s.overviewCache = { width, bars };
  }
  ctx.clearRect(0, 0, width, h);
  ctx.fillStyle = "#f9fafb";
  ctx.fillRect(L, 0, width - L - GEOM.pad, h);
  for (const [kind, px, w, py, bh] of s.overviewCache.bars) {
    ctx.fillStyle = s.ev.kinds[kind].stroke || s.ev.kinds[kind].fill;
    ctx.fillRect(px, py, w, bh);
  }
  const a = x(s.view[0]), b = x(s.view[1]);
  ctx.fillStyle = "rgba(107,114,128,0.35)";
  ctx.fillRect(L, 0, Math.max(a - L, 0), h);
  ctx.fillRect(b, 0, Math.max(width - GEOM.pad - b, 0), h);
  ctx.strokeStyle = SELECTION_EDGE;
  ctx.lineWidth = 1.5;
  ctx.strokeRect(a, 0.75, Math.max(b - a, 2), h - 1.5);
  ctx.lineWidth = 1;
  ctx.fillStyle = MUTED;
  ctx.font = FONT;
  ctx.textBaseline = "middle";
  ctx.fillText("overview (drag)", 12, h / 2);
  return x;
}
