import assert from "node:assert/strict";
import { test } from "node:test";

import { closestInOrder, layoutBoxes, layoutLevel, PADDING } from "../src/graph/layered.js";

const box = (width = 40, height = 20) => ({ width, height });

test("closestInOrder keeps order and spacing, and is exact where nothing collides", () => {
  assert.deepEqual([...closestInOrder([0, 100, 200], [10, 10, 10], 5)], [0, 100, 200]);
  // two boxes both wanting 0: spread symmetrically around it, 15 apart
  assert.deepEqual([...closestInOrder([0, 0], [10, 10], 5)], [-7.5, 7.5]);
  const widths = [10, 20, 10];
  const got = closestInOrder([50, 0, 10], widths, 4);
  for (let i = 1; i < got.length; i++) {
    assert.ok(got[i] - got[i - 1] >= (widths[i - 1] + widths[i]) / 2 + 4 - 1e-9);
  }
});

test("a chain goes down in layers, and a parameter sits next to its consumer", () => {
  const ids = ["x", "w", "matmul", "relu", "loss"];
  const sizes = new Map(ids.map((id) => [id, box()]));
  const { pos } = layoutLevel(ids, sizes, [["x", "matmul"], ["w", "matmul"], ["matmul", "relu"],
                                           ["relu", "loss"], ["w", "loss"]]);
  assert.ok(pos.get("x").y < pos.get("matmul").y && pos.get("matmul").y < pos.get("relu").y);
  assert.equal(pos.get("w").y, pos.get("x").y);      // pulled down to just above matmul
  assert.ok(pos.get("relu").y < pos.get("loss").y);
});

test("a cycle between groups is laid out, one of its edges turned around", () => {
  const sizes = new Map(["a", "b"].map((id) => [id, box()]));
  const { pos } = layoutLevel(["a", "b"], sizes, [["a", "b"], ["b", "a"]]);
  assert.notEqual(pos.get("a").y, pos.get("b").y);
});

test("boxes of one layer never overlap, and children sit inside their open group", () => {
  const boxes = [{ id: "g", parent: null }, { id: "in", parent: null }, { id: "out", parent: null }];
  const edges = [];
  for (let i = 0; i < 30; i++) {
    boxes.push({ id: `n${i}`, parent: "g" });
    edges.push({ id: `in>n${i}`, src: "in", dst: `n${i}` }, { id: `n${i}>out`, src: `n${i}`, dst: "out" });
    if (i) edges.push({ id: `n${i - 1}>n${i}`, src: `n${i - 1}`, dst: `n${i}` });
  }
  const lay = layoutBoxes(boxes, edges, (b) => box(30 + (b.id.length * 7), 24));
  const g = lay.boxes.get("g");
  for (let i = 0; i < 30; i++) {
    const p = lay.boxes.get(`n${i}`);
    assert.ok(p.x >= g.x + PADDING.left - 1e-9 && p.x + p.width <= g.x + g.width + 1e-9);
    assert.ok(p.y >= g.y + PADDING.top - 1e-9 && p.y + p.height <= g.y + g.height + 1e-9);
  }
  assert.ok(lay.boxes.get("in").y + 24 <= g.y && g.y + g.height <= lay.boxes.get("out").y);
  const all = [...lay.boxes.entries()].filter(([id]) => id !== "g").map(([, p]) => p);
  for (const p of all) for (const q of all) {
    if (p === q || p.y !== q.y) continue;
    assert.ok(p.x + p.width <= q.x + 1e-9 || q.x + q.width <= p.x + 1e-9, "boxes overlap");
  }
  assert.equal(lay.edges.get("in>n0").length, 4);                 // a cubic Bézier
  assert.equal(lay.edges.get("in>n0")[3].y, lay.boxes.get("n0").y); // ends on its top
});

test("2,000 boxes in 40 open groups with edges between groups are all placed", () => {
  const boxes = [], edges = [];
  for (let s = 0; s < 40; s++) {
    boxes.push({ id: `s${s}`, parent: null });
    for (let i = 0; i < 50; i++) {
      boxes.push({ id: `s${s}/${i}`, parent: `s${s}` });
      if (i) edges.push({ id: `e${s}/${i}`, src: `s${s}/${i - 1}`, dst: `s${s}/${i}` });
    }
    if (s) edges.push({ id: `x${s}`, src: `s${s - 1}/49`, dst: `s${s}/0` }, { id: `y${s}`, src: `s${s}/3`, dst: "s0/7" });
  }
  const lay = layoutBoxes(boxes, edges, () => box(80, 30));
  assert.equal(lay.boxes.size, 2040);
  assert.equal(lay.edges.size, edges.length);
  for (const p of lay.boxes.values()) assert.ok(Number.isFinite(p.x) && Number.isFinite(p.y));
});
