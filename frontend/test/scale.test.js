import assert from "node:assert/strict";
import { test } from "node:test";

import {
  bytesText, clampView, linearScale, niceStep, panBy, ticks, timeText, wheelFactor, zoomAt,
} from "../src/shared/scale.js";

test("a linear scale maps data to pixels and back", () => {
  const x = linearScale([100, 300], [10, 410]);
  assert.equal(x(100), 10);
  assert.equal(x(300), 410);
  assert.equal(x(200), 210);
  assert.equal(x.invert(210), 200);
  assert.equal(x.k, 2);
});

test("zooming keeps the point under the pointer where it is", () => {
  const view = [0, 1000];
  const zoomed = zoomAt(view, 250, 0.5);
  assert.deepEqual(zoomed, [125, 625]);
  const before = linearScale(view, [0, 100])(250), after = linearScale(zoomed, [0, 100])(250);
  assert.equal(before, after);
  // zooming out past the bounds shows the bounds, never more
  assert.deepEqual(zoomAt([100, 200], 150, 100, [0, 1000]), [0, 1000]);
  // and in no further than the narrowest span
  const narrow = zoomAt([0, 1000], 500, 1e-9, [0, 1000], 10);
  assert.ok(Math.abs(narrow[1] - narrow[0] - 10) < 1e-9);
});

test("panning moves the view and stops at the bounds", () => {
  assert.deepEqual(panBy([100, 200], 50, [0, 1000]), [150, 250]);
  assert.deepEqual(panBy([100, 200], -500, [0, 1000]), [0, 100]);
  assert.deepEqual(panBy([800, 900], 500, [0, 1000]), [900, 1000]);
  assert.deepEqual(clampView([-50, 2000], [0, 1000]), [0, 1000]);
});

test("a wheel turn down zooms out, up zooms in, by the same factor", () => {
  const out = wheelFactor(100), inn = wheelFactor(-100);
  assert.ok(out > 1 && inn < 1);
  assert.ok(Math.abs(out * inn - 1) < 1e-12);
  assert.ok(wheelFactor(3, 1) > 1);               // lines, as Firefox reports them
});

test("ticks fall on 1, 2 or 5 times a power of ten", () => {
  assert.equal(niceStep(1000, 10), 100);
  assert.equal(niceStep(1700, 10), 200);
  assert.equal(niceStep(4000, 10), 500);
  const { step, ticks: t } = ticks([130, 1050], 10);
  assert.equal(step, 100);
  assert.deepEqual(t, [200, 300, 400, 500, 600, 700, 800, 900, 1000]);
});

test("times and sizes read as the Python side writes them", () => {
  assert.equal(timeText(512), "512 ns");
  assert.equal(timeText(1234), "1.23 us");
  assert.equal(timeText(3_000), "3 us");
  assert.equal(timeText(2.5e6), "2.5 ms");
  assert.equal(timeText(12e9), "12 s");
  assert.equal(bytesText(1024), "1 KiB");
  assert.equal(bytesText(512), "512 B");
  assert.equal(bytesText(3 * 2 ** 20), "3 MiB");
});
