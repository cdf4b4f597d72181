// The graph explorer's pure parts: the visible boxes for a set of open groups and a pass
// stage, edges between boxes, search, lineage, colours and a pass's marks.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  boxColor, decode, lineage, nodeColor, nodeFacts, passHistory, pathsToShow, search,
  visibleGraph,
} from "../src/graph/model.js";
import { centreOn, fit, zoomAt } from "../src/graph/view.js";

// x -> layer/matmul -> layer/relu -> loss; a cond whose true body holds one node;
// stage 1 (a pass) removed 'dead' and added 'fused'.
const S = ["x", "matmul", "relu", "loss", "cond", "body_mul", "dead", "fused", "placeholder",
  "op", "forward", "backward", "f32 2×3", "cpu:0", "mul", "sum", "removed", "new", "fuses"];
const at = (t) => S.indexOf(t);
const DATA = {
  title: "t", n: 8, strings: S,
  nodes: {
    name: ["x", "matmul", "relu", "loss", "cond", "body_mul", "dead", "fused"].map(at),
    op: ["placeholder", "matmul", "relu", "sum", "cond", "mul", "mul", "mul"].map(at),
    cat: ["placeholder", "op", "op", "op", "op", "op", "op", "op"].map(at),
    role: ["forward", "forward", "forward", "backward", "forward", "forward", "forward", "forward"].map(at),
    device: new Array(8).fill(at("cpu:0")), reason: new Array(8).fill(-1),
    type: new Array(8).fill(at("f32 2×3")), source: new Array(8).fill(-1), attrs: new Array(8).fill(-1),
    group: [-1, 0, 0, -1, 1, 2, -1, -1],
    alive: [3, 3, 3, 3, 3, 3, 1, 2],
    time: [0, 500, 100, 10, 0, 0, 0, 0],
  },
  edges: [0, 1, 1, 2, 2, 3, 0, 4, 4, 3, 0, 6, 0, 7],
  edge_alive: [3, 3, 3, 3, 3, 1, 2],
  groups: [
    { path: "layer", label: "layer", parent: -1, kind: "scope", owner: -1, count: 2, roles: { forward: 2 } },
    { path: "[cond]", label: "cond", parent: -1, kind: "control", owner: 4, count: 2, roles: { forward: 2 } },
    { path: "[cond]/true", label: "true", parent: 1, kind: "body", owner: -1, count: 1, roles: { forward: 1 } },
  ],
  expanded: [],
  stages: [{ name: "traced", summary: "" }, { name: "fusion", summary: "fusion: 1 fused",
    marks: [[7, "new", at("fuses")]] }],
  colors: { role: { forward: ["#dbeafe", "#1d4ed8"], backward: ["#ffedd5", "#c2410c"] },
    kind: { placeholder: ["#ecfdf5", "#047857"] }, device: { "cpu:0": ["#eee", "#111"] },
    unknown: ["#f3f4f6", "#4b5563"], marks: { new: ["#0d9488", "new"] } },
};

test("collapsed groups are single boxes and edges join boxes", () => {
  const m = decode(DATA);
  const v = visibleGraph(m, new Set(), 1);
  const ids = v.boxes.map((b) => b.id).sort();
  assert.deepEqual(ids, ["g0", "g1", "n0", "n3", "n6", "n7"]);   // n6: removed by the pass, drawn as such
  assert.equal(v.boxOf[1], "g0");
  assert.equal(v.boxOf[5], "g1");           // inside the collapsed cond: drawn as the cond
  const edges = v.edges.map((e) => e.id).sort();
  assert.deepEqual(edges, ["g0>n3", "g1>n3", "n0>g0", "n0>g1", "n0>n6", "n0>n7"]);
  assert.ok(!visibleGraph(m, new Set(), 0).boxOf[7]);
});

test("opening a group shows its members inside it", () => {
  const m = decode(DATA);
  const v = visibleGraph(m, new Set(["layer", "[cond]", "[cond]/true"]), 1);
  const byId = v.byId;
  assert.equal(byId.get("n1").parent, "g0");
  assert.equal(byId.get("g0").kind, "open");
  assert.equal(v.boxOf[4], "g1");           // the open cond: edges to it end on its box
  assert.equal(byId.get("g1").kind, "open");
  assert.equal(byId.get("n5").parent, "g2");
  assert.equal(byId.get("g2").parent, "g1");
  assert.ok(v.edges.some((e) => e.id === "n1>n2"));
  assert.ok(v.boxes.filter((b) => b.kind !== "open").length > visibleGraph(m, new Set(), 1).boxes.length - 2);
});

test("a stage shows its graph and what its pass removed", () => {
  const m = decode(DATA);
  const s0 = visibleGraph(m, new Set(["layer"]), 0);
  assert.ok(s0.boxOf[6] && !s0.boxOf[7]);    // traced: 'dead' there, 'fused' not yet
  const s1 = visibleGraph(m, new Set(["layer"]), 1);
  assert.ok(s1.boxOf[6] && s1.boxOf[7]);     // after the pass: both (dead drawn as removed)
  assert.deepEqual(passHistory(m, 6), [["fusion", "removed"]]);
  assert.deepEqual(passHistory(m, 7), [["fusion", "fuses"]]);
});

test("search by name or op, and the scopes to open to show a match", () => {
  const m = decode(DATA);
  assert.deepEqual(search(m, "RELU", 1), [2]);
  assert.deepEqual(search(m, "mul", 1), [1, 5, 7]);    // matmul by name, mul by op
  assert.deepEqual(search(m, "mul", 0), [1, 5, 6]);
  assert.deepEqual(search(m, "  ", 1), []);
  assert.deepEqual(pathsToShow(m, 5), ["[cond]", "[cond]/true"]);
});

test("lineage: the path from the input to the loss", () => {
  const m = decode(DATA);
  assert.deepEqual([...lineage(m, 2, 1)].sort(), [0, 1, 2, 3]);
  assert.ok(!lineage(m, 2, 1).has(4));
});

test("colours by role, kind, device and time", () => {
  const m = decode(DATA);
  assert.deepEqual(nodeColor(m, 1, "role"), ["#dbeafe", "#1d4ed8"]);
  assert.deepEqual(nodeColor(m, 3, "role"), ["#ffedd5", "#c2410c"]);
  assert.deepEqual(nodeColor(m, 0, "role"), ["#ecfdf5", "#047857"]);     // an input
  assert.deepEqual(nodeColor(m, 1, "device"), ["#eee", "#111"]);
  const hot = nodeColor(m, 1, "time", 500), cool = nodeColor(m, 3, "time", 500);
  assert.notDeepEqual(hot, cool);
  assert.deepEqual(nodeColor(m, 0, "time", 500), ["#f3f4f6", "#4b5563"]);   // no time
  assert.deepEqual(boxColor(m, [1, 2, 3], "role"), ["#dbeafe", "#1d4ed8"]); // the majority
});

test("a node's facts list its inputs and users with their types", () => {
  const m = decode(DATA);
  const f = nodeFacts(m, 1, 1);
  assert.deepEqual(f.inputs, [["x", "f32 2×3"]]);
  assert.deepEqual(f.users, [["relu", "f32 2×3"]]);
  assert.ok(f.facts.some(([k, v]) => k === "scope" && v === "layer"));
});

test("2-D view: zoom keeps the pointer's point, fit shows everything", () => {
  const t = zoomAt({ x: 10, y: 20, k: 1 }, 100, 50, 2);
  assert.deepEqual(t, { k: 2, x: -80, y: -10 });
  const f = fit(1000, 500, 500, 300, 0);
  assert.equal(f.k, 0.5);
  assert.deepEqual(centreOn(10, 10, 100, 100, 1), { k: 1, x: 40, y: 40 });
});
