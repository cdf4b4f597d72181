// What the explorer opens first: as many name scopes as stay readable. A picture fitted to
// the canvas whose text would be smaller than MIN_TEXT_PX is no use, so scopes open level by
// level (then one by one, smallest first, a fixed number of tries) only while the whole
// still fits at that size.

import { visibleGraph } from "./model.js";
import { FONT_PX, layout } from "./layout.js";
import { fitScale } from "./view.js";

export const MIN_TEXT_PX = 10;
export const READ_K = MIN_TEXT_PX / FONT_PX;   // the least zoom at which box text is readable
const MAX_BOXES = 160;       // more boxes than this never fit a notebook's canvas readably
const TRIES = 24;            // layouts tried for single scopes after the levels (the same
                             // on every machine, so a notebook opens the same everywhere)

/** The cache key of a layout: the stage and the open groups. */
export function layoutKey(stage, open) {
  return `${stage}|${[...open].sort().join("\n")}`;
}

/**
 * The Set of group paths to open first for a [vw, vh] canvas at `stage`. Layouts it makes
 * go into `cache` (Map key -> layout) under layoutKey, so showing the choice costs nothing.
 */
export function chooseOpen(m, stage, vw, vh, cache = new Map()) {
  let tries = 0;
  const G = m.groups;
  const depth = G.map(() => 0);
  for (const g of G) depth[g.index] = g.parent >= 0 ? depth[g.parent] + 1 : 0;
  const fits = (open) => {
    const vis = visibleGraph(m, open, stage);
    if (vis.boxes.filter((b) => b.kind !== "open").length > MAX_BOXES) return false;
    const key = layoutKey(stage, open);
    let lay = cache.get(key);
    if (!lay) {
      lay = layout(m, vis);
      cache.set(key, lay);
    }
    return fitScale(lay.width, lay.height, vw, vh) >= READ_K;
  };
  let best = new Set();
  const deepest = G.length ? Math.max(...depth) + 1 : 0;
  for (let d = deepest; d >= 1; d--) {
    const open = new Set(G.filter((g) => depth[g.index] < d).map((g) => g.path));
    if (fits(open)) {
      best = open;
      break;
    }
  }
  const next = () => G.filter((g) => !best.has(g.path) && (g.parent < 0 || best.has(G[g.parent].path)))
    .sort((a, b) => a.count - b.count);
  for (let round = 0; round < 3; round++) {
    let grew = false;
    for (const g of next()) {
      if (++tries > TRIES) return best;
      const open = new Set([...best, g.path]);
      if (fits(open)) {
        best = open;
        grew = true;
      }
    }
    if (!grew) break;
  }
  return best;
}
