// What the graph explorer shows first and draws from a cached layout: readable text (a
// zoom at which box text is at least 10 px), scopes opened only while that holds, each box's
// text kept with its layout (the way back through the cache draws the same), module classes
// in scope titles, inputs of many extracted to stubs, text colour by contrast, the legend.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decode, legendItems, textColor, visibleGraph } from "../src/graph/model.js";
import { boxLabel, layout } from "../src/graph/layout.js";
import { READ_K, chooseOpen, layoutKey } from "../src/graph/firstview.js";
import { fitScale, showRegion } from "../src/graph/view.js";

// A chain of `layers` scopes ("0", "1", ...), each a Linear of `per` nodes, after an input.
function chain(layers, per = 3) {
  const S = ["x", "placeholder", "op", "forward", "f32 2", "matmul", "add", "relu", "Linear"];
  const at = (t) => { if (!S.includes(t)) S.push(t); return S.indexOf(t); };
  const cols = { name: [at("x")], op: [at("placeholder")], cat: [at("placeholder")], role: [at("forward")],
                 device: [-1], reason: [-1], type: [at("f32 2")], source: [-1], attrs: [-1], group: [-1] };
  const groups = [], edges = [];
  let prev = 0;
  for (let l = 0; l < layers; l++) {
    groups.push({ path: String(l), label: String(l), parent: -1, kind: "scope", owner: -1, count: per,
                  roles: { forward: per }, type: "Linear" });
    for (let j = 0; j < per; j++) {
      const i = cols.name.length;
      cols.name.push(at(`${l}/${["matmul", "add", "relu"][j % 3]}`));
      cols.op.push(at(["matmul", "add", "relu"][j % 3]));
      cols.cat.push(at("op")); cols.role.push(at("forward")); cols.device.push(-1); cols.reason.push(-1);
      cols.type.push(at("f32 2")); cols.source.push(-1); cols.attrs.push(-1); cols.group.push(l);
      edges.push(prev, i);
      prev = i;
    }
  }
  const n = cols.name.length;
  cols.alive = new Array(n).fill(1);
  return decode({ title: "chain", n, strings: S, nodes: cols, edges, groups, expanded: [],
                  stages: [{ name: "traced", summary: "" }],
                  colors: { role: { forward: ["#dbeafe", "#1d4ed8"] },
                            kind: { placeholder: ["#ffffff", "#374151"] }, unknown: ["#f3f4f6", "#4b5563"] } });
}

test("the first view opens scopes only while the whole stays readable", () => {
  const small = chain(3);
  const open = chooseOpen(small, 0, 700, 860);
  assert.deepEqual([...open].sort(), ["0", "1", "2"]);        // small: everything open
  const cache = new Map();
  const big = chain(12);
  const some = chooseOpen(big, 0, 700, 860, cache);
  assert.ok(some.size < 12, `opened ${some.size} of 12`);
  const lay = cache.get(layoutKey(0, some));
  assert.ok(lay, "the chosen layout is in the cache");
  assert.ok(fitScale(lay.width, lay.height, 700, 860) >= READ_K);
  // one more open scope would not have been readable
  const more = [...Array(12).keys()].map(String).filter((p) => !some.has(p));
  const tried = visibleGraph(big, new Set([...some, more[0]]), 0);
  const l2 = layout(big, tried);
  assert.ok(fitScale(l2.width, l2.height, 700, 860) < READ_K);
});

test("a cached layout keeps its boxes' text: drawing it again needs nothing else", () => {
  const m = chain(3);
  const vis = visibleGraph(m, new Set(["1"]), 0);
  const lay = layout(m, vis);
  assert.ok(vis.boxes.every((b) => b.lines === undefined), "the visible graph is left as it was");
  const again = visibleGraph(m, new Set(["1"]), 0);     // the way back: a fresh visible graph
  for (const b of again.boxes) assert.ok(lay.labels.get(b.id) && lay.boxes.get(b.id), b.id);
  assert.deepEqual(lay.labels.get("g0"), ["0 (Linear) ▸", "3 nodes"]);
  assert.deepEqual(lay.labels.get("g1"), ["1 (Linear)", ""]);
  assert.deepEqual(boxLabel(m, again.byId.get("n0")), ["x", "f32 2"]);       // an input: its name
  assert.deepEqual(boxLabel(m, again.byId.get("n4")), ["matmul", "f32 2"]);  // name says no more
});

test("opening a scope shows it: fitted when readable, else readable from its top", () => {
  const fitted = showRegion({ x: 100, y: 50, width: 200, height: 100 }, 600, 400, READ_K);
  assert.equal(fitted.k, 1);
  assert.equal(fitted.x + 100 * fitted.k, (600 - 200) / 2);
  const tall = showRegion({ x: 0, y: 1000, width: 300, height: 5000 }, 600, 400, READ_K);
  assert.equal(tall.k, READ_K);
  assert.equal(tall.y + 1000 * tall.k, 16);                   // its top at the top
});

test("a node that feeds many boxes becomes stubs at its users", () => {
  const S = ["lr", "capture", "op", "forward", "f32", "mul"];
  const n = 14;
  const cols = { name: [0], op: [1], cat: [1], role: [3], device: [-1], reason: [-1], type: [4],
                 source: [-1], attrs: [-1], group: [-1] };
  const edges = [];
  for (let i = 1; i < n; i++) {
    S.push(`mul_${i}`);
    cols.name.push(S.length - 1); cols.op.push(5); cols.cat.push(2); cols.role.push(3);
    cols.device.push(-1); cols.reason.push(-1); cols.type.push(4); cols.source.push(-1);
    cols.attrs.push(-1); cols.group.push(-1);
    edges.push(0, i);
    if (i > 1) edges.push(i - 1, i);
  }
  cols.alive = new Array(n).fill(1);
  const m = decode({ n, strings: S, nodes: cols, edges, groups: [], stages: [], colors: {} });
  const vis = visibleGraph(m, new Set(), 0);
  assert.equal(vis.stubs.length, n - 1);
  assert.ok(vis.byId.get("n0").extracted);
  assert.ok(vis.edges.every((e) => e.src !== "n0"));
  assert.ok(legendItems(m, "role", 0, vis.boxes).some((it) => it.stub));
});

test("text is white on dark fills and black on light ones", () => {
  assert.equal(textColor("#990000"), "#ffffff");
  assert.equal(textColor("#d7301f"), "#ffffff");
  assert.equal(textColor("#fff7ec"), "#111827");
  assert.equal(textColor("#dbeafe"), "#111827");
});

test("the legend lists what the drawn boxes use, in each colour mode", () => {
  const m = chain(2);
  const vis = visibleGraph(m, new Set(["0"]), 0);
  const role = legendItems(m, "role", 0, vis.boxes).map((it) => it.text);
  assert.ok(role.includes("forward") && role.includes("input") && role.includes("scope (click to open)"));
  assert.ok(!role.includes("backward (gradients)"));
  const time = legendItems({ ...m, time: [0, 5, 5, 5, 5, 5, 5] }, "time", 0, vis.boxes, 5);
  assert.ok(time[0].gradient && time[0].hi === 5);
});

test("edges across devices are marked, stateful nodes are in the legend", () => {
  const S = ["a", "b", "add", "placeholder", "op", "forward", "f32", "cpu:0", "cpu:1", "uniform"];
  const m = decode({
    n: 3, strings: S,
    nodes: { name: [0, 1, 9], op: [3, 2, 9], cat: [3, 4, 4], role: [5, 5, 5], device: [7, 8, 8],
             reason: [-1, -1, -1], type: [6, 6, 6], source: [-1, -1, -1], attrs: [-1, -1, -1],
             group: [-1, -1, -1], alive: [1, 1, 1], stateful: [0, 0, 1] },
    edges: [0, 1, 2, 1], groups: [], stages: [],
    colors: { device: { "cpu:0": ["#dbeafe", "#1d4ed8"], "cpu:1": ["#ffedd5", "#c2410c"] } },
  });
  const vis = visibleGraph(m, new Set(), 0);
  const cross = Object.fromEntries(vis.edges.map((e) => [e.id, e.cross]));
  assert.deepEqual(cross, { "n0>n1": true, "n2>n1": false });
  const texts = legendItems(m, "device", 0, vis.boxes, 0, true).map((it) => it.text);
  assert.ok(texts.some((t) => t.startsWith("crosses devices")));
  assert.ok(texts.some((t) => t.startsWith("stateful")));
  assert.ok(!legendItems(m, "role", 0, vis.boxes, 0, true).some((it) => it.line));
});
