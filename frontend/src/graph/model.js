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
    if (!edge) { edge = { id, src: a, dst: b, count: 0, nodes: [] }; edges.set(id, edge); }
    edge.count += 1;
    edge.nodes.push(m.edgeSrc[e]);
  }
  // an edge from a box into a group that holds it (or out of it) is not drawn: the box is inside
  for (const [id, e] of edges) if (inside(boxes, e.src, e.dst) || inside(boxes, e.dst, e.src)) edges.delete(id);
  return { boxes: [...boxes.values()], edges: [...edges.values()], boxOf, byId: boxes };
}

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

/** [fill, border] of node i in colour mode 'role' | 'device' | 'time' (maxTime: the largest). */
export function nodeColor(m, i, mode, maxTime = 0) {
  const c = m.colors;
  const unknown = c.unknown || ["#f3f4f6", "#4b5563"];
  const cat = m.text("cat", i);
  if (mode === "device") return (c.device || {})[m.text("device", i)] || unknown;
  if (mode === "time") {
    const t = m.time ? m.time[i] : 0;
    if (!(t > 0) || !(maxTime > 0)) return unknown;
    const f = Math.log1p(t) / Math.log1p(maxTime);
    return [HEAT[Math.min(HEAT.length - 1, Math.floor(f * HEAT.length))], "#7f2704"];
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
