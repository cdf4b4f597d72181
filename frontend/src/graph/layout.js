// The visible boxes' text and size, laid out by layered.js; all coordinates come back
// relative to the whole graph.

import { layoutBoxes } from "./layered.js";

const CHAR_W = 6.4, LINE_H = 13, PAD_X = 10;

/** The two text lines of a box and its size in graph units. */
export function boxLabel(m, box) {
  if (box.kind === "node") {
    return [m.text("op", box.node), m.text("type", box.node)];
  }
  const g = m.groups[box.group];
  if (box.kind === "group") {
    if (g.owner >= 0) return [`${m.text("op", g.owner)} ▸`, `${g.count} nodes inside`];
    return [`${g.label} ▸`, `${g.count.toLocaleString()} nodes`];
  }
  const op = g.owner >= 0 ? m.text("op", g.owner) : "";
  return [op && op !== g.label ? `${op} ${g.label}` : g.label, ""];
}

export function boxSize(lines) {
  const chars = Math.max(...lines.map((l) => l.length), 3);
  return { width: Math.round(chars * CHAR_W + 2 * PAD_X), height: lines[1] ? 2 * LINE_H + 8 : LINE_H + 10 };
}

/** Lay out a visible graph (visibleGraph's result): {boxes: Map id -> {x, y, width, height},
 * edges: Map id -> Bézier points, width, height, ms}. Each box gets its two text lines. */
export function layout(m, vis) {
  const started = performance.now();
  for (const b of vis.boxes) b.lines = boxLabel(m, b);
  const out = layoutBoxes(vis.boxes, vis.edges, (b) => boxSize(b.lines),
                          (b) => boxSize([`▾ ${b.lines[0]}`, ""]).width + 10);
  return { ...out, ms: performance.now() - started };
}
