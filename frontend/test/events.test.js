import assert from "node:assert/strict";
import { test } from "node:test";

import {
  decode, extent, filterEvents, hitTest, layoutLanes, maskOf, rangeTotals, typed,
  visibleArrows,
} from "../src/timeline/events.js";

// Two lanes. Lane 0: matmul [0, 300], add [300, 350], send [350, 370].
// Lane 1: matmul_1 [100, 340] and, overlapping it, sum [200, 260]; recv [360, 450].
// Step 1 repeats lane 0's add at [1000, 1100].
function payload() {
  const rows = [
    // start, dur, lane, op, name, kind, step
    [0, 300, 0, 0, 0, 0, 0],
    [300, 50, 0, 1, 1, 1, 0],
    [350, 20, 0, 2, 2, 2, 0],
    [100, 240, 1, 0, 3, 0, 0],
    [200, 60, 1, 3, 4, 3, 0],
    [360, 90, 1, 4, 5, 2, 0],
    [1000, 100, 0, 1, 1, 1, 1],
  ];
  const col = (k) => rows.map((r) => r[k]);
  const f64 = (k) => new Float64Array(col(k)).buffer;
  return {
    n: rows.length,
    columns: { start: new DataView(f64(0)), dur: f64(1), lane: Int32Array.from(col(2)),
               op: col(3), name: col(4), kind: col(5), step: col(6),
               bytes_in: [1024, 0, 512, 0, 0, 0, 0], bytes_out: [0, 0, 0, 0, 0, 512, 0],
               source: [0, 0, 0, 0, 0, 0, 0] },
    dtypes: { start: "f64", dur: "f64", lane: "i32", op: "i32", name: "i32", kind: "i32",
              step: "i32", bytes_in: "f64", bytes_out: "f64", source: "i32" },
    strings: { op: ["matmul", "add", "send", "sum", "recv"],
               name: ["matmul", "add", "send_h", "matmul_1", "sum", "recv_h"],
               source: ["eager"] },
    lanes: [{ device: "cpu:0", lane: "main" }, { device: "cpu:1", lane: "worker-1" }],
    kinds: [{ name: "matmul / conv" }, { name: "elementwise" }, { name: "transfer" },
            { name: "reduction" }],
    steps: [{ step: 0, start: 0, end: 450, mark: 500 }, { step: 1, start: 1000, end: 1100 }],
    arrows: [2, 5],
  };
}

test("columns arrive as typed arrays whatever carried them", () => {
  const ev = decode(payload());
  assert.ok(ev.start instanceof Float64Array && ev.lane instanceof Int32Array);
  assert.deepEqual([...ev.end], [300, 350, 370, 340, 260, 450, 1100]);
  assert.deepEqual(ev.span, [0, 1100]);
  // a view at an offset that is not a multiple of the item size is copied, not misread
  const bytes = new Uint8Array(8 * 2 + 4);
  new DataView(bytes.buffer).setFloat64(4, 2.5, true);
  assert.equal(typed(new DataView(bytes.buffer, 4, 16), "f64")[0], 2.5);
  assert.throws(() => typed([1], "f16"), /unknown column type f16/);
});

test("overlapping bars of one lane take separate rows; lanes stack", () => {
  const ev = decode(payload());
  const layout = layoutLanes(ev);
  assert.deepEqual(layout.rows, [1, 2]);
  assert.deepEqual(layout.top, [0, 1]);
  assert.equal(layout.total, 3);
  assert.equal(layout.row[3], 0);           // matmul_1
  assert.equal(layout.row[4], 1);           // sum, inside matmul_1's time
  assert.equal(layout.row[5], 0);           // recv, after matmul_1 ended
  assert.equal(layoutLanes(ev, 1).row[4], 0);   // capped: shares the last row
});

test("filters by step and by op or node name, case-insensitively", () => {
  const ev = decode(payload());
  assert.equal(filterEvents(ev).length, 7);
  assert.deepEqual([...filterEvents(ev, { step: 1 })], [6]);
  assert.deepEqual([...filterEvents(ev, { query: "MATMUL" })], [0, 3]);
  assert.deepEqual([...filterEvents(ev, { query: "_h" })], [2, 5]);       // node names
  assert.deepEqual([...filterEvents(ev, { step: 0, query: "add" })], [1]);
  assert.deepEqual([...filterEvents(ev, { query: "nothing" })], []);
  assert.deepEqual(extent(ev, filterEvents(ev, { step: 1 })), [1000, 1100]);
});

test("a range's totals count the time inside it, per op and per lane", () => {
  const ev = decode(payload());
  const t = rangeTotals(ev, filterEvents(ev), 250, 360);
  // matmul 250..300 (50) + matmul_1 250..340 (90), add 50, send 10, sum 250..260 (10)
  assert.equal(t.count, 5);
  assert.equal(t.time, 50 + 90 + 50 + 10 + 10);
  assert.deepEqual(t.byOp.map((r) => [r.key, r.count, r.time]),
                   [["matmul", 2, 140], ["add", 1, 50], ["send", 1, 10], ["sum", 1, 10]]);
  assert.deepEqual(t.byLane.map((r) => [r.key, r.time]),
                   [["cpu:0 · main", 110], ["cpu:1 · worker-1", 100]]);
  // the same range backwards; and only what the filter lets through
  assert.equal(rangeTotals(ev, filterEvents(ev), 360, 250).time, t.time);
  assert.equal(rangeTotals(ev, filterEvents(ev, { query: "sum" }), 250, 360).time, 10);
  assert.equal(rangeTotals(ev, filterEvents(ev), 2000, 3000).count, 0);
});

test("the bar under the pointer, with slack for thin bars", () => {
  const ev = decode(payload());
  const layout = layoutLanes(ev);
  const all = filterEvents(ev);
  assert.equal(hitTest(ev, layout, all, 1, 1, 230), 4);        // sum, on row 1
  assert.equal(hitTest(ev, layout, all, 1, 0, 230), 3);        // matmul_1, row 0
  assert.equal(hitTest(ev, layout, all, 0, 0, 380), -1);       // past send's end
  assert.equal(hitTest(ev, layout, all, 0, 0, 380, 15), 2);    // ... within the slack
  assert.equal(hitTest(ev, layout, filterEvents(ev, { step: 1 }), 0, 0, 320), -1);
});

test("arrows join a send and its recv when both are shown", () => {
  const ev = decode(payload());
  assert.deepEqual(visibleArrows(ev, maskOf(ev.n, filterEvents(ev))), [[2, 5]]);
  assert.deepEqual(visibleArrows(ev, maskOf(ev.n, filterEvents(ev, { query: "send" }))), []);
});

test("the first view is the first few steps; arrows of a view; module runs per lane", async () => {
  const { arrowsIn, firstSteps, moduleRuns } = await import("../src/timeline/events.js");
  const p = payload();
  const ev = decode(p);
  assert.deepEqual(firstSteps(ev, 3), ev.span);                  // two steps: all of it
  assert.deepEqual(firstSteps(ev, 1), [0, 1000 + 10]);  // to where step 1 begins, 1% more
  const arrows = visibleArrows(ev, maskOf(ev.n, filterEvents(ev)));
  assert.deepEqual(arrowsIn(ev, arrows, [0, 100]), []);
  assert.deepEqual(arrowsIn(ev, arrows, [300, 400]), [[2, 5]]);
  p.columns.scope = [0, 0, 1, -1, 1, -1, 0];
  p.dtypes.scope = "i32";
  p.strings.scope = ["encoder/layers.0", "head"];
  const scoped = decode(p);
  assert.deepEqual(scoped.modules, ["encoder", "head"]);
  const runs = moduleRuns(scoped, filterEvents(scoped));
  assert.deepEqual(runs.map((r) => [r.lane, scoped.modules[r.module], r.start, r.end]),
    [[0, "encoder", 0, 350], [0, "head", 350, 370], [0, "encoder", 1000, 1100], [1, "head", 200, 260]]);
  const lanes = layoutLanes(scoped);
  assert.deepEqual(lanes.band, [1, 1]);
});

test("lanes in pixels: a module track above the rows, and what is under a pixel", async () => {
  const { GEOM, laneAt, placeLanes, rowY } = await import("../src/timeline/draw.js");
  const layout = placeLanes({ rows: [2, 1], band: [1, 0], row: new Int32Array(0) });
  assert.equal(layout.laneY[0], GEOM.axisH);
  assert.equal(rowY(layout, 0, 0), GEOM.axisH + GEOM.bandH);
  assert.equal(rowY(layout, 1, 0), GEOM.axisH + GEOM.bandH + 2 * GEOM.rowH + GEOM.laneGap);
  assert.deepEqual(laneAt(layout, GEOM.axisH + 2), { lane: 0, row: -1 });
  assert.deepEqual(laneAt(layout, rowY(layout, 0, 1) + 3), { lane: 0, row: 1 });
  assert.deepEqual(laneAt(layout, rowY(layout, 1, 0) + 3), { lane: 1, row: 0 });
  assert.equal(laneAt(layout, 3), null);
});
