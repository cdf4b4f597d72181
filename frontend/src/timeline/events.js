// The timeline's events as columns, and the questions the explorer asks of them: which rows
// the bars of a lane take, which events pass the step and search filters, what a time range
// holds per op and per lane, which bar is under the pointer. Pure functions, no DOM.
//
// The payload (labkit/viz/timeline_data.py writes it) holds one typed column per field, so
// 20,000 events cross from Python as a few binary buffers rather than 20,000 objects:
//   {n, columns: {start, dur, lane, op, name, kind, step, bytes_in, bytes_out, source, ...},
//    dtypes: {start: "f64", lane: "i32", ...}, strings: {op: [...], name: [...], ...},
//    lanes: [{device, lane, fill, stroke}], kinds: [{name, fill, stroke}],
//    steps: [{step, start, end, mark}], arrows: i32 pairs (send, recv), span: [0, end]}
// Times are ns from the profile's first event.

const ARRAYS = { f64: Float64Array, f32: Float32Array, i32: Int32Array, u8: Uint8Array };

/** A column as a typed array, from a DataView (as widgets deliver binary buffers), an
 *  ArrayBuffer, a typed array or a plain array. */
export function typed(value, dtype) {
  const T = ARRAYS[dtype];
  if (!T) throw new Error(`labkit timeline: unknown column type ${dtype}`);
  if (value == null) return new T(0);
  if (value instanceof T) return value;
  if (Array.isArray(value)) return T.from(value);
  let buffer = value, offset = 0, length = value.byteLength;
  if (ArrayBuffer.isView(value)) {
    buffer = value.buffer;
    offset = value.byteOffset;
  }
  if (offset % T.BYTES_PER_ELEMENT !== 0) {        // a view at an odd place: copy it
    buffer = buffer.slice(offset, offset + length);
    offset = 0;
  }
  return new T(buffer, offset, length / T.BYTES_PER_ELEMENT);
}

/** The payload decoded: typed columns plus the tables they index. */
export function decode(payload) {
  const c = payload.columns || {};
  const d = payload.dtypes || {};
  const col = (name, fallback) => typed(c[name], d[name] || fallback);
  const ev = {
    n: payload.n | 0,
    start: col("start", "f64"),
    dur: col("dur", "f64"),
    lane: col("lane", "i32"),
    op: col("op", "i32"),
    name: col("name", "i32"),
    kind: col("kind", "i32"),
    step: col("step", "i32"),
    bytesIn: col("bytes_in", "f64"),
    bytesOut: col("bytes_out", "f64"),
    source: col("source", "i32"),
    shape: c.shape ? col("shape", "i32") : null,
    line: c.line ? col("line", "i32") : null,
    scope: c.scope ? col("scope", "i32") : null,
    strings: payload.strings || {},
    lanes: payload.lanes || [],
    kinds: payload.kinds || [],
    steps: payload.steps || [],
    arrows: typed(payload.arrows, "i32"),
    title: payload.title || "",
  };
  ev.end = new Float64Array(ev.n);
  let last = 0;
  for (let i = 0; i < ev.n; i++) {
    ev.end[i] = ev.start[i] + ev.dur[i];
    if (ev.end[i] > last) last = ev.end[i];
  }
  for (const s of ev.steps) if (s.mark != null && s.mark > last) last = s.mark;
  ev.span = [0, Math.max(last, 1)];
  // the module an op ran in: the first part of its scope ("encoder" of "encoder/layers.0")
  ev.modules = [];
  ev.module = new Int32Array(ev.n).fill(-1);
  if (ev.scope) {
    const index = new Map(), byScope = (ev.strings.scope || []).map((text) => {
      const top = text ? text.split("/")[0] : "";
      if (!top) return -1;
      if (!index.has(top)) { index.set(top, ev.modules.length); ev.modules.push(top); }
      return index.get(top);
    });
    for (let i = 0; i < ev.n; i++) ev.module[i] = ev.scope[i] >= 0 ? byScope[ev.scope[i]] : -1;
  }
  return ev;
}

/** The scope an event ran in ('encoder/layers.0/attn'), or "". */
export function scopeText(ev, i) {
  return ev.scope && ev.scope[i] >= 0 ? ev.strings.scope[ev.scope[i]] : "";
}

/** The first `count` steps' time, up to where the next steps begin (or everything when
 * there are no more steps than that): what a timeline shows first, so that ops are bars and
 * not a barcode. (A step's own end is no guide: a parameter server's step 0 lasts the whole
 * run.) */
export function firstSteps(ev, count = 3) {
  const steps = ev.steps.slice().sort((a, b) => a.step - b.step);
  if (steps.length <= count) return ev.span.slice();
  const lo = Math.min(...steps.slice(0, count).map((s) => s.start));
  const hi = Math.min(...steps.slice(count).map((s) => s.start));
  if (!(hi > lo)) return ev.span.slice();
  const pad = (hi - lo) * 0.01;
  return [Math.max(ev.span[0], lo - pad), Math.min(ev.span[1], hi + pad)];
}

/** The arrows (pairs of event indices) with some part of their time inside view [lo, hi]. */
export function arrowsIn(ev, arrows, [lo, hi]) {
  return arrows.filter(([a, b]) => Math.max(ev.end[a], ev.end[b]) >= lo && Math.min(ev.end[a], ev.end[b]) <= hi);
}

/** Per lane, the runs of consecutive events (in start order) of one module: the module
 * track drawn above the lane's ops. [{lane, module, start, end}]. */
export function moduleRuns(ev, indices) {
  const byLane = new Map();
  for (const i of indices) {
    if (ev.module[i] < 0) continue;
    if (!byLane.has(ev.lane[i])) byLane.set(ev.lane[i], []);
    byLane.get(ev.lane[i]).push(i);
  }
  const runs = [];
  for (const [lane, idx] of byLane) {
    idx.sort((a, b) => ev.start[a] - ev.start[b]);
    let run = null;
    for (const i of idx) {
      if (run && run.module === ev.module[i]) { run.end = Math.max(run.end, ev.end[i]); continue; }
      run = { lane, module: ev.module[i], start: ev.start[i], end: ev.end[i] };
      runs.push(run);
    }
  }
  return runs;
}

/**
 * Rows within each lane so that bars never cover one another (first fit, in start order),
 * and each lane's top in row units. Returns {row: Int32Array, rows: [per lane], top: [per
 * lane], total}; an event beyond maxRows shares the last row.
 */
export function layoutLanes(ev, maxRows = 24) {
  const nl = Math.max(ev.lanes.length, 1);
  const byLane = Array.from({ length: nl }, () => []);
  for (let i = 0; i < ev.n; i++) byLane[ev.lane[i]]?.push(i);
  const row = new Int32Array(ev.n);
  const rows = [];
  for (const idx of byLane) {
    idx.sort((a, b) => ev.start[a] - ev.start[b] || ev.end[b] - ev.end[a]);
    const ends = [];
    for (const i of idx) {
      let r = 0;
      while (r < ends.length && ev.start[i] < ends[r]) r++;
      if (r >= maxRows) r = maxRows - 1;
      ends[r] = Math.max(ends[r] ?? 0, ev.end[i]);
      row[i] = r;
    }
    rows.push(Math.max(ends.length, 1));
  }
  const top = [];
  let y = 0;
  for (const r of rows) {
    top.push(y);
    y += r;
  }
  // lanes whose ops ran inside modules get a module track above their rows
  const band = rows.map(() => 0);
  if (ev.module) for (let i = 0; i < ev.n; i++) if (ev.module[i] >= 0 && band[ev.lane[i]] === 0) band[ev.lane[i]] = 1;
  return { row, rows, top, total: y, band };
}

/** Does a lowercase query occur in this op or node name? An empty query matches all. */
function matcher(ev, query) {
  const q = (query || "").trim().toLowerCase();
  if (!q) return null;
  const hit = (table) => (table || []).map((s) => String(s).toLowerCase().includes(q));
  return { op: hit(ev.strings.op), name: hit(ev.strings.name) };
}

/** The indices of the events of `step` (null: every step) whose op or node name contains
 *  `query` (case-insensitive), in event order. */
export function filterEvents(ev, { step = null, query = "" } = {}) {
  const m = matcher(ev, query);
  const out = [];
  for (let i = 0; i < ev.n; i++) {
    if (step !== null && step !== undefined && ev.step[i] !== step) continue;
    if (m && !m.op[ev.op[i]] && !m.name[ev.name[i]]) continue;
    out.push(i);
  }
  return Int32Array.from(out);
}

/** [first start, last end] of the events at these indices (the whole span when none). */
export function extent(ev, indices) {
  if (!indices.length) return ev.span.slice();
  let lo = Infinity, hi = -Infinity;
  for (const i of indices) {
    if (ev.start[i] < lo) lo = ev.start[i];
    if (ev.end[i] > hi) hi = ev.end[i];
  }
  return [lo, Math.max(hi, lo + 1)];
}

/**
 * What the time range [a, b] holds: per op and per lane, how many events touch it and how
 * much of their time falls inside it (an event half inside counts half its time).
 * Returns {count, time, byOp: [{key, count, time}], byLane: [...]}, each list longest first.
 */
export function rangeTotals(ev, indices, a, b) {
  if (b < a) [a, b] = [b, a];
  const ops = new Map(), lanes = new Map();
  let count = 0, time = 0;
  const add = (map, key, t) => {
    const r = map.get(key) || { key, count: 0, time: 0 };
    r.count += 1;
    r.time += t;
    map.set(key, r);
  };
  for (const i of indices) {
    const s = ev.start[i], e = ev.end[i];
    const touches = e > s ? s < b && e > a : s >= a && s <= b;   // an instant: inside or not
    if (!touches) continue;
    const t = Math.max(0, Math.min(e, b) - Math.max(s, a));
    count += 1;
    time += t;
    add(ops, ev.strings.op[ev.op[i]], t);
    add(lanes, laneLabel(ev, ev.lane[i]), t);
  }
  const sorted = (map) => [...map.values()].sort((x, y) => y.time - x.time || y.count - x.count);
  return { count, time, byOp: sorted(ops), byLane: sorted(lanes) };
}

/** The lane's name in full: 'cpu:0 · main'. */
export function laneLabel(ev, k) {
  const l = ev.lanes[k];
  return l ? `${l.device} · ${l.lane}` : `lane ${k}`;
}

/**
 * The event whose bar is at time t in lane `lane`, row `row`, among `indices`; a bar within
 * `slack` ns counts (thin bars are hard to hit). The nearest wins; -1 when none.
 */
export function hitTest(ev, layout, indices, lane, row, t, slack = 0) {
  let best = -1, bestD = Infinity;
  for (const i of indices) {
    if (ev.lane[i] !== lane || layout.row[i] !== row) continue;
    const d = t < ev.start[i] ? ev.start[i] - t : t > ev.end[i] ? t - ev.end[i] : 0;
    if (d <= slack && (d < bestD || (d === bestD && ev.dur[i] < ev.dur[best]))) {
      best = i;
      bestD = d;
    }
  }
  return best;
}

/** The send -> recv pairs whose two events both pass the filter (mask: Uint8Array by event). */
export function visibleArrows(ev, mask) {
  const out = [];
  for (let k = 0; k + 1 < ev.arrows.length; k += 2) {
    const s = ev.arrows[k], r = ev.arrows[k + 1];
    if (mask[s] && mask[r]) out.push([s, r]);
  }
  return out;
}

/** Uint8Array with 1 at each of these indices. */
export function maskOf(n, indices) {
  const m = new Uint8Array(n);
  for (const i of indices) m[i] = 1;
  return m;
}
