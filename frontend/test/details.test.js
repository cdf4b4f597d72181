import assert from "node:assert/strict";
import { test } from "node:test";

import { decode } from "../src/timeline/events.js";
import { eventFacts } from "../src/timeline/explorer.js";

// Two events as timeline_data.py sends them: the first with the shapes and line the profiler
// recorded (record_shapes=True, with_stack=True), the second without (-1 in both columns).
function payload() {
  return {
    n: 2,
    columns: { start: [0, 2000], dur: [1500, 250], lane: [0, 0], op: [0, 1], name: [0, 1],
               kind: [0, 1], step: [0, 0], bytes_in: [4096, 0], bytes_out: [2048, 0],
               source: [0, 0], shape: [0, -1], line: [0, -1] },
    dtypes: { start: "f64", dur: "f64", lane: "i32", op: "i32", name: "i32", kind: "i32",
              step: "i32", bytes_in: "f64", bytes_out: "f64", source: "i32", shape: "i32",
              line: "i32" },
    strings: { op: ["matmul", "relu"], name: ["matmul", "relu"], source: ["eager"],
               shape: ["float32[32, 16], float32[16, 16] -> float32[32, 16]"],
               line: ["train.py:12: y = x @ w"] },
    lanes: [{ device: "cpu:0", lane: "main" }],
    kinds: [{ name: "matmul / conv" }, { name: "elementwise" }],
    steps: [{ step: 0, start: 0, end: 2250, mark: null }],
    arrows: [],
  };
}

test("the details of an event list its shapes, bytes and the user's line", () => {
  const facts = Object.fromEntries(eventFacts(decode(payload()), 0));
  assert.equal(facts.op, "matmul");
  assert.equal(facts.inputs, "float32[32, 16], float32[16, 16]");
  assert.equal(facts.outputs, "float32[32, 16]");
  assert.equal(facts.bytes, "in 4 KiB · out 2 KiB");
  assert.equal(facts["source line"], "train.py:12: y = x @ w");
  assert.equal(facts.duration, "1.5 us");
});

test("an event recorded without shapes or line shows neither", () => {
  const facts = Object.fromEntries(eventFacts(decode(payload()), 1));
  assert.equal(facts.op, "relu");
  for (const k of ["inputs", "outputs", "shapes", "source line", "bytes"]) {
    assert.ok(!(k in facts), `${k} should not be shown: ${JSON.stringify(facts)}`);
  }
});

test("an op with no tensor input says so", () => {
  const p = payload();
  p.strings.shape = [" -> float32[4]"];
  const facts = Object.fromEntries(eventFacts(decode(p), 0));
  assert.equal(facts.inputs, "none");
  assert.equal(facts.outputs, "float32[4]");
});
