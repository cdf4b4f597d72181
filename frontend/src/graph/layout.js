// The visible boxes' text and size, laid out by layered.js; all coordinates come back
// relative to the whole graph. A layout holds everything drawing it needs (each box's text
// lines too), so a layout kept in the cache draws the same when the view comes back to it.

import { layoutBoxes } from "./layered.js";

export const FONT_PX = 12;                 // box text, in graph units (pixels at zoom 1)
const CHAR_W = 6.9, LINE_H = 13, PAD_X = 10;

/** The last part of a node or scope name: 'encoder/layers.0/attn/matmul_2' -> 'matmul_2'. */
export function shortName(name) {
  const i = name.lastIndexOf("/");
  return i >= 0 ? name.slice(i + 1) : name;
}

/** Does a node's name say more than its op ('relu_3' of relu does not; 'W1' of capture does)? */
function tellsMore(name, op) {
  const s = shortName(name);
  return !(s === op || (s.startsWith(`${op}_`) && /^\d+$/.test(s.slice(op.length + 1))));
}

/** A scope's title: 'conv1 (Conv2d)' where the payload knows the module's class. */
export function scopeTitle(g) {
  return g.type && g.type !== g.label ? `${g.label} (${g.type})` : g.label;
}

/** The text lines of a box: what it is first, then its type or size. */
export function boxLabel(m, box) {
  if (box.kind === "node") {
    const i = box.node, op = m.text("op", i), name = m.text("name", i), cat = m.text("cat", i);
    if (cat === "placeholder" || cat === "capture" || cat === "constant") {
      return [shortName(name), m.text("type", i)];
    }
    return tellsMore(name, op) ? [`${op} · ${shortName(name)}`, m.text("type", i)]
      : [op, m.text("type", i)];
  }
  const g = m.groups[box.group];
  if (box.kind === "group") {
    const nodes = `${g.count.toLocaleString()} node${g.count === 1 ? "" : "s"}`;
    if (g.owner >= 0) return [`${m.text("op", g.owner)} ▸`, `${nodes} inside`];
    return [`${scopeTitle(g)} ▸`, nodes];
  }
  const op = g.owner >= 0 ? m.text("op", g.owner) : "";
  return [op && op !== g.label ? `${op} ${g.label}` : scopeTitle(g), ""];
}

export function boxSize(lines) {
  const chars = Math.max(...lines.map((l) => l.length), 3);
  return { width: Math.round(chars * CHAR_W + 2 * PAD_X),
           height: lines[1] ? 2 * LINE_H + 6 : LINE_H + 10 };
}

/** Lay out a visible graph (visibleGraph's result): {boxes: Map id -> {x, y, width, height},
 * edges: Map id -> Bézier points, labels: Map id -> text lines, width, height, ms}. The
 * visible graph itself is left as it was. */
export function layout(m, vis) {
  const started = performance.now();
  const labels = new Map(vis.boxes.map((b) => [b.id, boxLabel(m, b)]));
  const out = layoutBoxes(vis.boxes, vis.edges, (b) => boxSize(labels.get(b.id)),
                          (b) => boxSize([`▾ ${labels.get(b.id)[0]}`, ""]).width + 10);
  return { ...out, labels, ms: performance.now() - started };
}
