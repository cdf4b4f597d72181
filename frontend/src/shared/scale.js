// One-dimensional views and their pan / zoom: the maths every explorer shares (the timeline's
// time axis now; a graph explorer's x and y next). Pure functions, no DOM: tested with node.
//
// A view is [lo, hi] in data units (ns for a timeline). Bounds are the [lo, hi] the view may
// not leave; minSpan the narrowest view allowed.

/** A linear map from data [d0, d1] to pixels [r0, r1], with its inverse. */
export function linearScale([d0, d1], [r0, r1]) {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  const scale = (v) => r0 + (v - d0) * k;
  scale.invert = (px) => (k === 0 ? d0 : d0 + (px - r0) / k);
  scale.k = k;
  return scale;
}

/** The view moved (not resized) so that it lies inside bounds; narrowed if wider than them. */
export function clampView([lo, hi], [b0, b1], minSpan = 0) {
  let span = Math.max(hi - lo, minSpan);
  if (span >= b1 - b0) return [b0, b1];
  if (lo < b0) return [b0, b0 + span];
  if (lo + span > b1) return [b1 - span, b1];
  return [lo, lo + span];
}

/** Zoom by factor (< 1 narrows, zooms in) keeping the data point `at` where it is on screen. */
export function zoomAt([lo, hi], at, factor, bounds, minSpan = 1) {
  const span = Math.max((hi - lo) * factor, minSpan);
  const f = hi === lo ? 0.5 : (at - lo) / (hi - lo);
  const view = [at - f * span, at - f * span + span];
  return bounds ? clampView(view, bounds, minSpan) : view;
}

/** The view moved by delta data units, kept inside bounds. */
export function panBy([lo, hi], delta, bounds) {
  const view = [lo + delta, hi + delta];
  return bounds ? clampView(view, bounds) : view;
}

/** A wheel event's deltaY as a zoom factor: one notch (100 px) zooms by about 1.25x. */
export function wheelFactor(deltaY, deltaMode = 0) {
  const px = deltaMode === 1 ? deltaY * 33 : deltaMode === 2 ? deltaY * 400 : deltaY;
  return Math.exp(Math.max(-10, Math.min(10, px * 0.0022)));
}

/** A tick spacing of 1, 2 or 5 times a power of ten giving about `target` ticks. */
export function niceStep(span, target = 10) {
  if (!(span > 0)) return 1;
  const raw = span / target;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/** The tick positions inside [lo, hi]: multiples of a nice step. */
export function ticks([lo, hi], target = 10) {
  const step = niceStep(hi - lo, target);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(t);
  return { step, ticks: out };
}

function sig3(v) {
  return Number(v.toPrecision(3)).toString();
}

/** 1234 -> '1.23 us'; picks ns, us, ms or s (as labkit's Python side writes times). */
export function timeText(ns) {
  const a = Math.abs(ns);
  for (const [unit, scale] of [["s", 1e9], ["ms", 1e6], ["us", 1e3]]) {
    if (a >= scale) return `${sig3(ns / scale)} ${unit}`;
  }
  return `${Math.round(ns)} ns`;
}

/** 2048 -> '2 KiB'. */
export function bytesText(n) {
  n = Number(n || 0);
  for (const [unit, scale] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
    if (n >= scale) return `${sig3(n / scale)} ${unit}`;
  }
  return `${Math.round(n)} B`;
}
