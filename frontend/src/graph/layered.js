// A layered (Sugiyama-style) layout of nested boxes, one level at a time, as TensorBoard's
// graph dashboard lays out its metanodes: each open group's children are laid out on their
// own, and the group then takes part in its parent's layout as one box of that size. Edges
// between levels are lifted to the two sibling boxes that contain their ends.
//
// Within a level: layers by longest path (cycles broken by a depth-first search), each node
// then moved down next to its nearest consumer; order within layers by barycentre sweeps;
// x coordinates by placing each layer as close as possible (least squares, keeping order and
// spacing) to the centres of its neighbours. Long edges get no dummy nodes: a 2,000-node
// graph is laid out in tens of milliseconds, where a layout that routes every long edge
// around boxes (graphviz, ELK) takes seconds.

export const SPACING = { layer: 18, node: 14 };
export const PADDING = { top: 24, left: 10, bottom: 10, right: 10 };

/**
 * boxes: [{id, parent (id or null)}], edges: [{id, src, dst}] between box ids,
 * size(box) -> {width, height} of a box that holds nothing (an open group's size comes from
 * its children; minWidth(box), when given, is the least width of an open group).
 * Returns {boxes: Map id -> {x, y, width, height}, edges: Map id -> 4 points (a cubic
 * Bézier: start, two control points, end), width, height}.
 */
export function layoutBoxes(boxes, edges, size, minWidth = () => 0) {
  const byId = new Map(boxes.map((b) => [b.id, b]));
  const kids = new Map([["", []]]);
  for (const b of boxes) {
    const p = b.parent && byId.has(b.parent) ? b.parent : "";
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(b.id);
  }
  const parentOf = (id) => { const p = byId.get(id).parent; return p && byId.has(p) ? p : ""; };
  const depth = new Map();
  const depthOf = (id) => {
    if (id === "") return 0;
    let d = depth.get(id);
    if (d === undefined) { d = depthOf(parentOf(id)) + 1; depth.set(id, d); }
    return d;
  };
  const levelEdges = new Map();            // container -> Map "a>b" -> [a, b]
  for (const e of edges) {
    if (!byId.has(e.src) || !byId.has(e.dst)) continue;
    let a = e.src, b = e.dst, da = depthOf(a), db = depthOf(b);
    while (da > db) { a = parentOf(a); da--; }
    while (db > da) { b = parentOf(b); db--; }
    if (a === b) continue;                 // one end inside the other
    while (parentOf(a) !== parentOf(b)) { a = parentOf(a); b = parentOf(b); }
    const c = parentOf(a);
    if (!levelEdges.has(c)) levelEdges.set(c, new Map());
    levelEdges.get(c).set(`${a}>${b}`, [a, b]);
  }

  const local = new Map();                 // id -> {x, y} inside its container's content
  const sizes = new Map();
  const place = (c) => {                   // lays out container c's children; returns its size
    const ids = kids.get(c) || [];
    for (const id of ids) {
      sizes.set(id, kids.has(id) ? place(id) : size(byId.get(id)));
    }
    const lay = layoutLevel(ids, sizes, [...(levelEdges.get(c) || new Map()).values()]);
    for (const [id, q] of lay.pos) local.set(id, q);
    if (c === "") return { width: lay.width, height: lay.height };
    return { width: Math.max(lay.width + PADDING.left + PADDING.right, minWidth(byId.get(c))),
             height: lay.height + PADDING.top + PADDING.bottom };
  };
  const whole = place("");

  const out = new Map();
  const absolute = (c, ox, oy) => {
    for (const id of kids.get(c) || []) {
      const q = local.get(id), s = sizes.get(id);
      const x = ox + q.x, y = oy + q.y;
      out.set(id, { x, y, width: s.width, height: s.height });
      if (kids.has(id)) absolute(id, x + PADDING.left, y + PADDING.top);
    }
  };
  absolute("", 0, 0);

  const routes = new Map();
  for (const e of edges) {
    const p = out.get(e.src), q = out.get(e.dst);
    if (p && q) routes.set(e.id, curve(p, q));
  }
  return { boxes: out, edges: routes, width: whole.width, height: whole.height };
}

/** A cubic Bézier from box p to box q: bottom to top when q is below p, else side to side.
 * An edge that skips layers bows sideways, off the column of boxes it would run through. */
export function curve(p, q) {
  const a = { x: p.x + p.width / 2, y: p.y + p.height };
  const b = { x: q.x + q.width / 2, y: q.y };
  if (b.y > a.y + 1) {
    const drop = b.y - a.y, bend = Math.max(drop / 2, 8);
    const skips = drop > 2 * SPACING.layer + 4;          // passes at least one layer by
    const bow = skips ? Math.sign(b.x - a.x || 1) * Math.max(Math.min(drop / 3, 400), 48) : 0;
    return [a, { x: a.x + bow, y: a.y + bend }, { x: b.x + bow, y: b.y - bend }, b];
  }
  const s = { x: p.x + p.width, y: p.y + p.height / 2 };     // upwards: around the right side
  const t = { x: q.x + q.width, y: q.y + q.height / 2 };
  const out = Math.max(s.x, t.x) + 40 + Math.abs(s.y - t.y) / 8;
  return [s, { x: out, y: s.y }, { x: out, y: t.y }, t];
}

/** Positions of `ids` (sizes: Map id -> {width, height}) for edges [[a, b]] among them. */
export function layoutLevel(ids, sizes, pairs) {
  const n = ids.length;
  const index = new Map(ids.map((id, i) => [id, i]));
  const out = Array.from({ length: n }, () => []);
  for (const [a, b] of pairs) out[index.get(a)].push(index.get(b));

  // a topological order in which each edge that closes a cycle is turned around
  const seen = new Uint8Array(n), post = [];
  for (let s = 0; s < n; s++) {
    if (seen[s]) continue;
    const stack = [[s, 0]];
    seen[s] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [u, k] = top;
      if (k < out[u].length) {
        top[1] += 1;
        const v = out[u][k];
        if (!seen[v]) { seen[v] = 1; stack.push([v, 0]); }
      } else {
        post.push(u);
        stack.pop();
      }
    }
  }
  const topo = post.reverse();
  const rank = new Int32Array(n);
  topo.forEach((u, i) => { rank[u] = i; });
  const succ = Array.from({ length: n }, () => []), pred = Array.from({ length: n }, () => []);
  for (let u = 0; u < n; u++) {
    for (const v of out[u]) {
      const [a, b] = rank[u] < rank[v] ? [u, v] : [v, u];
      succ[a].push(b);
      pred[b].push(a);
    }
  }

  // layers: longest path from the sources, then each node as low as its nearest consumer lets
  const layer = new Int32Array(n);
  for (const u of topo) for (const v of succ[u]) layer[v] = Math.max(layer[v], layer[u] + 1);
  for (let i = n - 1; i >= 0; i--) {
    const u = topo[i];
    if (succ[u].length) {
      let low = Infinity;
      for (const v of succ[u]) low = Math.min(low, layer[v]);
      layer[u] = Math.max(layer[u], low - 1);
    }
  }
  const layers = [];
  for (const u of topo) (layers[layer[u]] ||= []).push(u);
  for (let L = 0; L < layers.length; L++) layers[L] ||= [];

  // order within layers: barycentres of the neighbours' relative positions, down and up
  const where = new Float64Array(n);
  const renumber = (row) => row.forEach((u, i) => { where[u] = (i + 0.5) / row.length; });
  layers.forEach(renumber);
  const sweep = (row, nbrs) => {
    const key = new Float64Array(row.length);
    row.forEach((u, i) => {
      const list = nbrs[u];
      if (!list.length) { key[i] = where[u]; return; }
      let sum = 0;
      for (const v of list) sum += where[v];
      key[i] = sum / list.length;
    });
    const order = row.map((u, i) => i).sort((i, j) => key[i] - key[j] || i - j);
    const sorted = order.map((i) => row[i]);
    for (let i = 0; i < row.length; i++) row[i] = sorted[i];
    renumber(row);
  };
  for (let it = 0; it < 6; it++) {
    if (it % 2 === 0) for (let L = 1; L < layers.length; L++) sweep(layers[L], pred);
    else for (let L = layers.length - 2; L >= 0; L--) sweep(layers[L], succ);
  }

  // coordinates
  const w = ids.map((id) => sizes.get(id).width), h = ids.map((id) => sizes.get(id).height);
  const cx = new Float64Array(n);
  for (const row of layers) {
    const total = row.reduce((s, u) => s + w[u], 0) + SPACING.node * (row.length - 1);
    let x = -total / 2;
    for (const u of row) { cx[u] = x + w[u] / 2; x += w[u] + SPACING.node; }
  }
  const pull = (row, lists) => {
    const want = row.map((u) => {
      const list = lists(u);
      if (!list.length) return cx[u];
      let sum = 0;
      for (const v of list) sum += cx[v];
      return sum / list.length;
    });
    const got = closestInOrder(want, row.map((u) => w[u]), SPACING.node);
    row.forEach((u, i) => { cx[u] = got[i]; });
  };
  const both = (u) => pred[u].concat(succ[u]);
  for (let it = 0; it < 8; it++) {
    if (it === 7) { for (const row of layers) pull(row, both); break; }
    if (it % 2 === 0) for (let L = 1; L < layers.length; L++) pull(layers[L], (u) => pred[u]);
    else for (let L = layers.length - 2; L >= 0; L--) pull(layers[L], (u) => succ[u]);
  }
  let left = Infinity, right = -Infinity;
  for (let u = 0; u < n; u++) {
    left = Math.min(left, cx[u] - w[u] / 2);
    right = Math.max(right, cx[u] + w[u] / 2);
  }
  const pos = new Map();
  let y = 0;
  for (const row of layers) {
    const tall = row.reduce((m, u) => Math.max(m, h[u]), 0);
    for (const u of row) pos.set(ids[u], { x: cx[u] - w[u] / 2 - left, y: y + (tall - h[u]) / 2 });
    y += tall + SPACING.layer;
  }
  return { pos, width: n ? right - left : 0, height: n ? y - SPACING.layer : 0 };
}

/**
 * Centres for boxes of widths `widths`, in this order, at least `gap` apart, as close as
 * possible (least squares) to `want`: isotonic regression (pool adjacent violators) of the
 * wanted centres less each box's least offset from the first.
 */
export function closestInOrder(want, widths, gap) {
  const n = want.length, offset = new Float64Array(n);
  for (let i = 1; i < n; i++) offset[i] = offset[i - 1] + (widths[i - 1] + widths[i]) / 2 + gap;
  const value = [], count = [];
  for (let i = 0; i < n; i++) {
    value.push(want[i] - offset[i]);
    count.push(1);
    while (value.length > 1 && value[value.length - 2] > value[value.length - 1]) {
      const c = count.pop(), v = value.pop();
      const k = value.length - 1;
      value[k] = (value[k] * count[k] + v * c) / (count[k] + c);
      count[k] += c;
    }
  }
  const got = new Float64Array(n);
  let i = 0;
  value.forEach((v, b) => { for (let j = 0; j < count[b]; j++, i++) got[i] = v + offset[i]; });
  return got;
}
