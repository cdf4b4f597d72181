// A 2-D view of the graph: a transform {x, y, k} from graph units to pixels (screen = graph *
// k + [x, y]), zoomed about a point, fitted to a box, centred on a point. Pure maths.

export const MIN_K = 0.02, MAX_K = 4;

const clampK = (k) => Math.max(MIN_K, Math.min(MAX_K, k));

/** Zoom by `factor` (> 1 zooms in) keeping the screen point (px, py) fixed. */
export function zoomAt(t, px, py, factor) {
  const k = clampK(t.k * factor);
  const gx = (px - t.x) / t.k, gy = (py - t.y) / t.k;
  return { k, x: px - gx * k, y: py - gy * k };
}

/** The whole [w, h] graph shown in a [vw, vh] viewport (never zoomed in past 1). */
export function fit(w, h, vw, vh, pad = 16) {
  const k = clampK(Math.min(1, (vw - 2 * pad) / Math.max(w, 1), (vh - 2 * pad) / Math.max(h, 1)));
  return { k, x: (vw - w * k) / 2, y: Math.max(pad, (vh - h * k) / 2) };
}

/** The graph point (gx, gy) at the centre of a [vw, vh] viewport, at zoom k. */
export function centreOn(gx, gy, vw, vh, k) {
  return { k, x: vw / 2 - gx * k, y: vh / 2 - gy * k };
}

/** The graph point under the screen point (px, py). */
export function toGraph(t, px, py) {
  return [(px - t.x) / t.k, (py - t.y) / t.k];
}

/** The zoom at which the whole [w, h] graph fits a [vw, vh] viewport (at most 1). */
export function fitScale(w, h, vw, vh, pad = 16) {
  return Math.min(1, (vw - 2 * pad) / Math.max(w, 1), (vh - 2 * pad) / Math.max(h, 1));
}

/**
 * A view of the region {x, y, width, height} (graph units) in a [vw, vh] viewport: fitted
 * and centred when it fits at zoom `minK` or more; otherwise at zoom `minK`, centred across
 * and showing the region's top (where a graph's inputs are).
 */
export function showRegion(r, vw, vh, minK, pad = 16) {
  const k = Math.max(MIN_K, Math.min(fitScale(r.width, r.height, vw, vh, pad), MAX_K));
  if (k >= minK) {
    return { k, x: (vw - r.width * k) / 2 - r.x * k, y: Math.max(pad, (vh - r.height * k) / 2) - r.y * k };
  }
  const x = r.width * minK <= vw - 2 * pad ? (vw - r.width * minK) / 2 - r.x * minK
    : vw / 2 - (r.x + r.width / 2) * minK;
  return { k: minK, x, y: pad - r.y * minK };
}
