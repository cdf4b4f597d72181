// Laying out the visible boxes with ELK's layered algorithm (elkjs, bundled, run in this
// thread: no worker is fetched). Open groups are compound nodes; all coordinates come back
// relative to the whole graph.

import ELK from "elkjs/lib/elk.bundled.js";

const CHAR_W = 6.4, LINE_H = 13, PAD_X = 10;

let elk = null;

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

/** The ELK graph of a visible graph (visibleGraph's result). */
export function toElk(m, vis) {
  const nodes = new Map();
  const root = {
    id: "root", children: [], edges: [],
    layoutOptions: {
      "elk.algorithm": "layered", "elk.direction": "DOWN",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.json.edgeCoords": "ROOT", "elk.json.shapeCoords": "ROOT",
      "elk.layered.spacing.nodeNodeBetweenLayers": "22", "elk.spacing.nodeNode": "14",
      "elk.layered.thoroughness": "2",
      "elk.layered.nodePlacement.strategy": "LINEAR_SEGMENTS",
      "elk.edgeRouting": "POLYLINE",
    },
  };
  for (const b of vis.boxes) {
    const lines = boxLabel(m, b);
    const node = b.kind === "open"
      ? { id: b.id, children: [], layoutOptions: { "elk.padding": "[top=24,left=10,bottom=10,right=10]" } }
      : { id: b.id, ...boxSize(lines) };
    b.lines = lines;
    nodes.set(b.id, node);
  }
  for (const b of vis.boxes) (b.parent ? nodes.get(b.parent).children : root.children).push(nodes.get(b.id));
  for (const e of vis.edges) root.edges.push({ id: e.id, sources: [e.src], targets: [e.dst] });
  return root;
}

/** Lay out: resolves to {boxes: Map id -> {x, y, width, height}, edges: Map id -> points,
 * width, height, ms}. */
export async function layout(m, vis) {
  elk = elk || new ELK();
  const started = performance.now();
  const out = await elk.layout(toElk(m, vis));
  const boxes = new Map(), edges = new Map();
  const stack = [...(out.children || [])];
  while (stack.length) {
    const n = stack.pop();
    boxes.set(n.id, { x: n.x, y: n.y, width: n.width, height: n.height });
    if (n.children) stack.push(...n.children);
  }
  for (const e of out.edges || []) {
    const pts = [];
    for (const s of e.sections || []) {
      pts.push(s.startPoint, ...(s.bendPoints || []), s.endPoint);
    }
    edges.set(e.id, pts);
  }
  return { boxes, edges, width: out.width || 0, height: out.height || 0, ms: performance.now() - started };
}
