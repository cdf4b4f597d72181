// Drawing the timeline on canvas: lanes, bars, step lines, send -> recv arrows, the selected
// range and the time axis (the main view), and the whole run in miniature with the visible
// window on it (the overview strip). Every function takes the explorer's state and draws.

import { linearScale, ticks, timeText } from "../shared/scale.js";

export const GEOM = { labelW: 170, axisH: 26, rowH: 18, laneGap: 6, overviewH: 38, pad: 8 };
const FONT = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";
const TEXT = "#111827", MUTED = "#6b7280", GRID = "#e5e7eb";
const SELECTION = "rgba(37, 99, 235, 0.14)", SELECTION_EDGE = "#2563eb";
const ARROW = "#7c3aed";

/** Height in CSS pixels of the main view for this layout. */
export function mainHeight(layout) {
  return GEOM.axisH + layout.total * GEOM.rowH + layout.rows.length * GEOM.laneGap + GEOM.pad;
}

/** Pixel y of the top of lane k, row r. */
export function rowY(layout, k, r) {
  return GEOM.axisH + (layout.top[k] + r) * GEOM.rowH + k * GEOM.laneGap;
}

/** {lane, row} under pixel y, or null outside every lane. */
export function laneAt(layout, y) {
  for (let k = 0; k < layout.rows.length; k++) {
    const top = rowY(layout, k, 0);
    if (y >= top && y < top + layout.rows[k] * GEOM.rowH) {
      return { lane: k, row: Math.floor((y - top) / GEOM.rowH) };
    }
  }
  return null;
}

/** The scale from time (ns) to x for a view, in a canvas `width` pixels wide. */
export function timeScale(view, width) {
  return linearScale(view, [GEOM.labelW, width - GEOM.pad]);
}

export function drawMain(ctx, s, width, height) {
  const { ev, layout } = s;
  const x = timeScale(s.view, width);
  const x0 = GEOM.labelW, x1 = width - GEOM.pad;
  ctx.clearRect(0, 0, width, height);
  ctx.fillStyle = "white";
  ctx.fillRect(0, 0, width, height);
  ctx.font = FONT;
  ctx.textBaseline = "middle";
  // lane backgrounds and names
  ev.lanes.forEach((lane, k) => {
    const top = rowY(layout, k, 0), h = layout.rows[k] * GEOM.rowH;
    ctx.fillStyle = k % 2 ? "#f3f4f6" : "#f9fafb";
    ctx.fillRect(0, top, width, h);
    ctx.fillStyle = lane.stroke || MUTED;
    ctx.fillRect(2, top + 2, 5, h - 4);
    ctx.fillStyle = TEXT;
    ctx.font = `bold ${FONT}`;
    const device = clip(ctx, lane.device, x0 - 20);
    ctx.fillText(device, 12, top + GEOM.rowH / 2);
    const used = ctx.measureText(device).width + 6;
    ctx.font = FONT;
    ctx.fillStyle = MUTED;
    ctx.fillText(clip(ctx, lane.lane, x0 - 20 - used), 12 + used, top + GEOM.rowH / 2);
  });
  ctx.save();
  ctx.beginPath();
  ctx.rect(x0, 0, x1 - x0, height);
  ctx.clip();
  // grid and axis
  const { ticks: tks } = ticks(s.view, Math.max(2, Math.floor((x1 - x0) / 90)));
  ctx.strokeStyle = GRID;
  ctx.lineWidth = 1;
  ctx.fillStyle = MUTED;
  ctx.textAlign = "center";
  for (const t of tks) {
    const px = Math.round(x(t)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(px, GEOM.axisH - 6);
    ctx.lineTo(px, height);
    ctx.stroke();
    ctx.fillText(timeText(t), px, GEOM.axisH / 2 - 2);
  }
  ctx.textAlign = "left";
  // step boundaries
  ctx.strokeStyle = TEXT;
  ctx.setLineDash([4, 3]);
  for (const st of ev.steps) {
    if (st.mark == null || (s.step !== null && st.step !== s.step)) continue;
    const px = Math.round(x(st.mark)) + 0.5;
    if (px < x0 || px > x1) continue;
    ctx.beginPath();
    ctx.moveTo(px, GEOM.axisH - 4);
    ctx.lineTo(px, height);
    ctx.stroke();
  }
  ctx.setLineDash([]);
  // bars, a kind at a time so that the colour changes rarely: each bar in the kind's border
  // colour (all a bar thinner than a few pixels shows), then the wide ones' light fill inside
  const minT = s.view[0], maxT = s.view[1], k = x.k, bh = GEOM.rowH - 4;
  const labelled = [];
  for (let kind = 0; kind < ev.kinds.length; kind++) {
    const wide = [];
    ctx.fillStyle = ev.kinds[kind].stroke || ev.kinds[kind].fill;
    for (const i of s.byKind[kind]) {
      const a = ev.start[i], b = ev.end[i];
      if (b < minT || a > maxT) continue;
      const px = x0 + (a - minT) * k, w = Math.max((b - a) * k, 1);
      const py = rowY(layout, ev.lane[i], layout.row[i]) + 2;
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
      ctx.fillText(text, Math.max(px, x0) + 3, py + (GEOM.rowH - 4) / 2);
    }
  }
  // send -> recv arrows
  ctx.strokeStyle = ARROW;
  ctx.fillStyle = ARROW;
  ctx.lineWidth = 1.5;
  for (const [a, b] of s.arrows) {
    const ax = x(ev.end[a]), bx = x(ev.end[b]);
    if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1) continue;
    const ay = rowY(layout, ev.lane[a], layout.row[a]) + GEOM.rowH / 2;
    const by = rowY(layout, ev.lane[b], layout.row[b]) + GEOM.rowH / 2;
    arrow(ctx, ax, ay, bx, by);
  }
  ctx.lineWidth = 1;
  // the selected event
  if (s.selected >= 0) {
    const i = s.selected;
    const px = x(ev.start[i]), w = Math.max((ev.end[i] - ev.start[i]) * k, 2);
    const py = rowY(layout, ev.lane[i], layout.row[i]) + 1;
    ctx.strokeStyle = TEXT;
    ctx.lineWidth = 2.5;
    ctx.strokeRect(px - 1, py, w + 2, GEOM.rowH - 2);
    ctx.lineWidth = 1;
  }
  // the selected time range
  if (s.range) {
    const [a, b] = s.range;
    const pa = x(Math.min(a, b)), pb = x(Math.max(a, b));
    ctx.fillStyle = SELECTION;
    ctx.fillRect(pa, GEOM.axisH - 6, Math.max(pb - pa, 1), height);
    ctx.strokeStyle = SELECTION_EDGE;
    ctx.beginPath();
    ctx.moveTo(pa + 0.5, GEOM.axisH - 6);
    ctx.lineTo(pa + 0.5, height);
    ctx.moveTo(pb + 0.5, GEOM.axisH - 6);
    ctx.lineTo(pb + 0.5, height);
    ctx.stroke();
  }
  ctx.restore();
  ctx.strokeStyle = MUTED;
  ctx.beginPath();
  ctx.moveTo(x0, GEOM.axisH - 6.5);
  ctx.lineTo(x1, GEOM.axisH - 6.5);
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
  const h = GEOM.overviewH;
  const x = linearScale(s.bounds, [GEOM.labelW, width - GEOM.pad]);
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
  ctx.fillRect(GEOM.labelW, 0, width - GEOM.labelW - GEOM.pad, h);
  for (const [kind, px, w, py, bh] of s.overviewCache.bars) {
    ctx.fillStyle = s.ev.kinds[kind].stroke || s.ev.kinds[kind].fill;
    ctx.fillRect(px, py, w, bh);
  }
  const a = x(s.view[0]), b = x(s.view[1]);
  ctx.fillStyle = "rgba(107,114,128,0.35)";
  ctx.fillRect(GEOM.labelW, 0, Math.max(a - GEOM.labelW, 0), h);
  ctx.fillRect(b, 0, Math.max(width - GEOM.pad - b, 0), h);
  ctx.strokeStyle = SELECTION_EDGE;
  ctx.lineWidth = 1.5;
  ctx.strokeRect(a, 0.75, Math.max(b - a, 2), h - 1.5);
  ctx.lineWidth = 1;
  ctx.fillStyle = MUTED;
  ctx.font = FONT;
  ctx.textBaseline = "middle";
  ctx.fillText("overview", 12, h / 2);
  return x;
}
