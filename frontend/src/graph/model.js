// The graph explorer's payload decoded, and everything that follows from it without drawing:
// which boxes are visible for a set of open groups and a pass stage, the edges between them,
// search, colours, ancestors / descendants and a node's facts. Pure: tested with node.

/** The payload (graph_data.graph_payload) with per-node columns and the group tree ready. */
export function decode(data) {
  const s = data.strings || [];
  const cols = data.nodes || {};
  const n = data.n || 0;
  const groups = (data.groups || []).map((g, k) => ({ ...g, index: k, children: [] }));
  for (const g of groups) if (g.parent >= 0) groups[g.parent].children.push(g.index);
  const ownerOf = new Map();          // node -> the control group it opens into
  for (const g of groups) if (g.owner >= 0) ownerOf.set(g.owner, g.index);
  const text = (col, i) => (cols[col] && cols[col][i] >= 0 ? s[cols[col][i]] : "");
  const edges = data.edges || [];
  const m = {
    n, title: data.title || "", strings: s, cols, groups, ownerOf, text,
    edgeSrc: [], edgeDst: [], edgeAlive: data.edge_alive || [],
    alive: cols.alive || new Array(n).fill(1), group: cols.group || new Array(n).fill(-1),
    stateful: cols.stateful || new Array(n).fill(0),
    time: cols.time || null, stages: data.stages || [], colors: data.colors || {},
    pathIndex: new Map(groups.map((g) => [g.path, g.index])),
    inputs: Array.from({ length: n }, () => []), users: Array.from({ length: n }, () => []),
    edgeOf: Array.from({ length: n }, () => []),
  };
  for (let e = 0; 2 * e + 1 < edges.length; e++) {
    const a = edges[2 * e], b = edges[2 * e + 1];
    m.edgeSrc.push(a);
    m.edgeDst.push(b);
    m.inputs[b].push(e);
    m.users[a].push(e);
  }
  if (!data.edge_alive) m.edgeAlive = new Array(m.edgeSrc.length).fill(1);
  return m;
}

/** The stage mask: stage k shows the graph pass k made, and (k > 0) what it removed. */
export function stageMask(stage) {
  return stage > 0 ? (1 << stage) | (1 << (stage - 1)) : 1;
}

export const isAlive = (m, i, stage) => ((m.alive[i] >> stage) & 1) === 1;

/**
 * The boxes drawn for the open groups `expanded` (a Set of paths) at `stage`:
 *   boxes: [{id, kind: 'node' | 'group' | 'open', node, group, parent (box id or null),
 *            members: [node indices]}]
 *   edges: [{id, src, dst, count, nodes: [source node indices]}]
 *   boxOf: node index -> box id (the box a node is drawn in, or inside)
 * A collapsed group is one box; a collapsed control-flow group is drawn as its node; an open
 * control-flow group is a box holding its bodies, and edges to its node end on that box.
 */
export function visibleGraph(m, expanded, stage) {
  const mask = stageMask(stage);
  const G = m.groups;
  const rep = new Array(G.length).fill(-1);        // outermost collapsed group at or above
  for (const g of G) {                             // parents come before their children
    const up = g.parent >= 0 ? rep[g.parent] : -1;
    rep[g.index] = up >= 0 ? up : (expanded.has(g.path) ? -1 : g.index);
  }
  const boxes = new Map();
  const boxOf = new Array(m.n).fill(null);
  const used = new Set();                           // open groups holding something
  const addBox = (id, box) => {
    let b = boxes.get(id);
    if (!b) { b = { id, members: [], ...box }; boxes.set(id, b); }
    return b;
  };
  for (let i = 0; i < m.n; i++) {
    if (!(m.alive[i] & mask)) continue;
    const g = m.group[i];
    const r = g >= 0 ? rep[g] : -1;
    let box;
    if (r >= 0) {
      const parent = G[r].parent;
      box = addBox(`g${r}`, { kind: "group", group: r, node: G[r].owner, parent });
    } else if (g >= 0 && G[g].owner === i) {
      box = addBox(`g${g}`, { kind: "open", group: g, node: i, parent: G[g].parent });
    } else {
      box = addBox(`n${i}`, { kind: "node", node: i, group: -1, parent: g });
    }
    box.members.push(i);
    boxOf[i] = box.id;
    for (let p = box.parent; p >= 0 && !used.has(p); p = G[p].parent) used.add(p);
  }
  for (const g of used) {
    addBox(`g${g}`, { kind: "open", group: g, node: G[g].owner, parent: G[g].parent });
  }
  for (const b of boxes.values()) b.parent = b.parent >= 0 ? `g${b.parent}` : null;
  const edges = new Map();
  for (let e = 0; e < m.edgeSrc.length; e++) {
    if (!(m.edgeAlive[e] & mask)) continue;
    const a = boxOf[m.edgeSrc[e]], b = boxOf[m.edgeDst[e]];
    if (a === null || b === null || a === b) continue;
    const id = `${a}>${b}`;
    let edge = edges.get(id);
    if (!edge) { edge = { id, src: a, dst: b, count: 0, nodes: [], cross: false }; edges.set(id, edge); }
    edge.count += 1;
    edge.nodes.push(m.edgeSrc[e]);
    const da = m.text("device", m.edgeSrc[e]), db = m.text("device", m.edgeDst[e]);
    if (da && db && da !== db) edge.cross = true;      // a send / recv pair goes there
  }
  // an edge from a box into a group that holds it (or out of it) is not drawn: the box is inside
  for (const [id, e] of edges) if (inside(boxes, e.src, e.dst) || inside(boxes, e.dst, e.src)) edges.delete(id);
  // a node that feeds many boxes (a shared input, a learning rate) is "extracted", as
  // TensorBoard does: its edges become short stubs at each user instead of lines across
  // the whole picture, and it no longer pulls the layout around
  const fanout = new Map();
  for (const e of edges.values()) fanout.set(e.src, (fanout.get(e.src) || 0) + 1);
  const stubs = [];
  if (boxes.size > EXTRACT_MIN_BOXES) {
    for (const [id, e] of edges) {
      const src = boxes.get(e.src);
      if (src.kind !== "node" || fanout.get(e.src) < EXTRACT_FANOUT) continue;
      src.extracted = true;
      stubs.push(e);
      edges.delete(id);
    }
  }
  return { boxes: [...boxes.values()], edges: [...edges.values()], stubs, boxOf, byId: boxes };
}

/** A node with at least this many users among the boxes drawn is extracted (see above). */
export const EXTRACT_FANOUT = 5;
const EXTRACT_MIN_BOXES = 12;

function inside(boxes, id, container) {
  for (let b = boxes.get(id); b && b.parent; b = boxes.get(b.parent)) if (b.parent === container) return true;
  return false;
}

/** The group paths to open so that node i is drawn as itself. */
export function pathsToShow(m, i) {
  const out = [];
  for (let g = m.group[i]; g >= 0; g = m.groups[g].parent) out.push(m.groups[g].path);
  return out.reverse();
}

/** Nodes alive at `stage` whose name or op contains the query (case-insensitive). */
export function search(m, query, stage) {
  const q = (query || "").trim().toLowerCase();
  if (!q) return [];
  const out = [];
  for (let i = 0; i < m.n; i++) {
    if (!isAlive(m, i, stage)) continue;
    if (m.text("name", i).toLowerCase().includes(q) || m.text("op", i).toLowerCase().includes(q)) out.push(i);
  }
  return out;
}

/** Ancestors and descendants of node i (alive at stage), as one Set, i included. */
export function lineage(m, i, stage) {
  const mask = stageMask(stage);
  const seen = new Set([i]);
  for (const [next, end] of [[m.inputs, m.edgeSrc], [m.users, m.edgeDst]]) {
    const stack = [i];
    while (stack.length) {
      const k = stack.pop();
      for (const e of next[k]) {
        if (!(m.edgeAlive[e] & mask)) continue;
        const j = end[e];
        if (!seen.has(j)) { seen.add(j); stack.push(j); }
      }
    }
  }
  return seen;
}

const HEAT = ["#fff7ec", "#fee8c8", "#fdd49e", "#fdbb84", "#fc8d59", "#ef6548", "#d7301f", "#990000"];

/** The colour of a heat value f in [0, 1] (colour by time). */
export function heat(f) {
  return HEAT[Math.max(0, Math.min(HEAT.length - 1, Math.floor(f * HEAT.length)))];
}
export const HEAT_STOPS = HEAT;

/** Black or white, whichever reads better on the colour `fill` ('#rrggbb'). */
export function textColor(fill) {
  const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(fill || "");
  if (!m) return "#111827";
  const lin = (h) => { const c = parseInt(h, 16) / 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const lum = 0.2126 * lin(m[1]) + 0.7152 * lin(m[2]) + 0.0722 * lin(m[3]);
  return lum < 0.2 ? "#ffffff" : "#111827";      // WCAG: the larger contrast ratio wins
}

/** [fill, border] of node i in colour mode 'role' | 'device' | 'time' (maxTime: the largest). */
export function nodeColor(m, i, mode, maxTime = 0) {
  const c = m.colors;
  const unknown = c.unknown || ["#f3f4f6", "#4b5563"];
  const cat = m.text("cat", i);
  if (mode === "device") return (c.device || {})[m.text("device", i)] || unknown;
  if (mode === "time") {
    const t = m.time ? m.time[i] : 0;
    if (!(t > 0) || !(maxTime > 0)) return unknown;
    return [heat(Math.log1p(t) / Math.log1p(maxTime)), "#7f2704"];
  }
  if (c.kind && c.kind[cat]) return c.kind[cat];
  if (cat === "transfer" && c.transfer) return c.transfer;
  return (c.role || {})[m.text("role", i)] || unknown;
}

/** [fill, border] of a box of several nodes: the most common colour among them. */
export function boxColor(m, members, mode, maxTime = 0) {
  if (mode === "time") {
    let t = 0;
    for (const i of members) t += m.time ? m.time[i] : 0;
    return nodeColor({ ...m, time: [t], text: (c) => m.text(c, members[0]) }, 0, mode, maxTime);
  }
  const counts = new Map();
  let best = null, most = 0;
  // a scope is coloured by what its ops do, not by the parameters it reads
  const ops = mode === "role" ? members.filter((i) => !(m.colors.kind || {})[m.text("cat", i)]) : [];
  if (ops.length) members = ops;
  for (const i of members) {
    const col = nodeColor(m, i, mode, maxTime);
    const key = col.join();
    const k = (counts.get(key) || 0) + 1;
    counts.set(key, k);
    if (k > most) { most = k; best = col; }
  }
  return best || ["#f3f4f6", "#4b5563"];
}

/** What a pass stage did to each node: Map node -> [mark, note]. */
export function stageMarks(m, stage) {
  const out = new Map();
  for (const [i, mark, note] of (m.stages[stage] || {}).marks || []) out.set(i, [mark, m.strings[note] || ""]);
  return out;
}

/** Each pass's note on node i: [[pass name, note]] (its pass history). */
export function passHistory(m, i) {
  const out = [];
  m.stages.forEach((st, k) => {
    for (const [j, , note] of st.marks || []) if (j === i) out.push([st.name, m.strings[note] || ""]);
    if (k > 0 && ((m.alive[i] >> (k - 1)) & 1) && !((m.alive[i] >> k) & 1)) {
      if (!out.some(([name]) => name === st.name)) out.push([st.name, "removed"]);
    }
  });
  return out;
}

/** The details of node i: [label, value] lines, inputs and outputs with their types. */
export function nodeFacts(m, i, stage) {
  const mask = stageMask(stage);
  const t = (col) => m.text(col, i);
  const facts = [["op", t("op")], ["kind", `${t("cat")} · ${t("role")}`], ["output", t("type")]];
  const group = m.group[i];
  if (group >= 0) facts.push(["scope", m.groups[group].path]);
  if (t("device")) facts.push(["device", `${t("device")} (${t("reason")})`]);
  if (t("attrs")) facts.push(["attributes", t("attrs")]);
  if (t("source")) facts.push(["source line", t("source")]);
  if (m.time && m.time[i] > 0) facts.push(["time", `${(m.time[i] / 1e3).toPrecision(3)} us`]);
  const side = (list, end) => list.filter((e) => m.edgeAlive[e] & mask)
    .map((e) => [m.text("name", end[e]), m.text("type", end[e])]);
  return { facts, inputs: side(m.inputs[i], m.edgeSrc), users: side(m.users[i], m.edgeDst),
           history: passHistory(m, i) };
}

/** The colour of an edge that crosses devices (as lk.viz.placement draws it). */
export const CROSS = "#dc2626";

const KIND_TEXT = { placeholder: "input", capture: "state (parameters, variables)", constant: "constant" };
const ROLE_TEXT = { forward: "forward", backward: "backward (gradients)", update: "update (optimiser)" };

/**
 * What the colours and marks of the picture mean, for the legend: a list of
 * {fill, stroke, text, dash?, width?} swatches, or {gradient: [colours], lo, hi, text} for
 * colour by time. Only what the drawn boxes use is listed (boxes: visibleGraph's boxes).
 */
export function legendItems(m, mode, stage, boxes, maxTime = 0, crossing = false) {
  const out = [];
  const c = m.colors;
  const nodes = [];
  for (const b of boxes) for (const i of (b.members.length ? b.members : [b.node])) if (i >= 0) nodes.push(i);
  const cats = new Set(nodes.map((i) => m.text("cat", i)));
  if (mode === "time") {
    out.push({ gradient: HEAT, lo: "0", hi: maxTime, text: "time in the profile (log scale)" });
    out.push({ fill: (c.unknown || ["#f3f4f6"])[0], stroke: (c.unknown || [, "#4b5563"])[1], text: "not run / not timed" });
  } else if (mode === "device") {
    const used = new Set(nodes.map((i) => m.text("device", i)));
    for (const [d, col] of Object.entries(c.device || {})) if (used.has(d)) out.push({ fill: col[0], stroke: col[1], text: d });
    if (used.has("")) out.push({ fill: (c.unknown || [])[0], stroke: (c.unknown || [])[1], text: "not placed" });
  } else {
    const roles = new Set(nodes.filter((i) => !(c.kind || {})[m.text("cat", i)]).map((i) => m.text("role", i)));
    for (const r of ["forward", "backward", "update"]) {
      if (roles.has(r) && (c.role || {})[r]) out.push({ fill: c.role[r][0], stroke: c.role[r][1], text: ROLE_TEXT[r] });
    }
    for (const [k, text] of Object.entries(KIND_TEXT)) {
      if (cats.has(k) && (c.kind || {})[k]) out.push({ fill: c.kind[k][0], stroke: c.kind[k][1], text, radius: k });
    }
    if (cats.has("transfer") && c.transfer) out.push({ fill: c.transfer[0], stroke: c.transfer[1], text: "send / recv" });
  }
  if (mode === "device" && crossing) out.push({ line: true, stroke: CROSS, dash: "5 3", text: "crosses devices (a send / recv pair goes there)" });
  if (nodes.some((i) => m.stateful[i]) && boxes.some((b) => b.kind === "node" && m.stateful[b.node])) {
    out.push({ fill: "#ffffff", stroke: "#374151", bar: true, text: "stateful (a random draw, an assign)" });
  }
  if (cats.has("control") || cats.has("loop")) out.push({ fill: "#fffbeb", stroke: (c.control || [, "#a16207"])[1], text: "control flow (click to open)", width: 2 });
  if (boxes.some((b) => b.kind === "group" && b.node < 0)) out.push({ fill: "#ffffff", stroke: "#6b7280", text: "scope (click to open)", double: true });
  const used = new Set([...stageMarks(m, stage).values()].map(([mark]) => mark));
  for (const mark of Object.keys(c.marks || {})) {
    if (used.has(mark)) out.push({ fill: "#ffffff", stroke: c.marks[mark][0], text: c.marks[mark][1], width: 3 });
  }
  if (stage > 0 && boxes.some((b) => b.kind === "node" && !isAlive(m, b.node, stage))) {
    out.push({ fill: "#ffffff", stroke: "#dc2626", text: `removed by ${m.stages[stage]?.name ?? "this pass"}`, width: 2.5, dash: "5 3" });
  }
  if (boxes.some((b) => b.extracted)) out.push({ stub: true, text: "input of many: a stub at each user" });
  return out;
}
