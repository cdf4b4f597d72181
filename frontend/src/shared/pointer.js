// Pointer gestures on an element, told apart once for every explorer: a wheel turn, a drag
// (with its start point and the modifier keys held when it began) and a click (a press and
// release that moved less than CLICK_SLOP pixels).

export const CLICK_SLOP = 4;

/**
 * Listen on `el`; callbacks get positions relative to the element's top-left corner.
 *   onWheel({x, y, deltaY, deltaMode, event})
 *   onDrag({phase: 'start' | 'move' | 'end', x, y, x0, y0, dx, dy, shiftKey, event})
 *   onClick({x, y, event})
 * Returns a function that removes the listeners.
 */
export function gestures(el, { onWheel, onDrag, onClick } = {}) {
  const at = (event) => {
    const r = el.getBoundingClientRect();
    return { x: event.clientX - r.left, y: event.clientY - r.top };
  };
  let press = null;          // {x0, y0, lastX, lastY, dragging, shiftKey}

  const wheel = (event) => {
    if (!onWheel) return;
    event.preventDefault();
    onWheel({ ...at(event), deltaY: event.deltaY, deltaMode: event.deltaMode, event });
  };
  const down = (event) => {
    if (event.button !== 0) return;
    const { x, y } = at(event);
    press = { x0: x, y0: y, lastX: x, lastY: y, dragging: false, shiftKey: event.shiftKey };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
    event.preventDefault();
  };
  const move = (event) => {
    if (!press) return;
    const { x, y } = at(event);
    const common = { x, y, x0: press.x0, y0: press.y0, shiftKey: press.shiftKey, event };
    if (!press.dragging) {
      if (Math.hypot(x - press.x0, y - press.y0) < CLICK_SLOP) return;
      press.dragging = true;
      onDrag?.({ ...common, phase: "start", dx: 0, dy: 0 });
    }
    onDrag?.({ ...common, phase: "move", dx: x - press.lastX, dy: y - press.lastY });
    press.lastX = x;
    press.lastY = y;
  };
  const up = (event) => {
    window.removeEventListener("mousemove", move);
    window.removeEventListener("mouseup", up);
    if (!press) return;
    const { x, y } = at(event);
    if (press.dragging) {
      onDrag?.({ phase: "end", x, y, x0: press.x0, y0: press.y0, dx: 0, dy: 0,
                 shiftKey: press.shiftKey, event });
    } else {
      onClick?.({ x, y, event });
    }
    press = null;
  };
  el.addEventListener("wheel", wheel, { passive: false });
  el.addEventListener("mousedown", down);
  return () => {
    el.removeEventListener("wheel", wheel);
    el.removeEventListener("mousedown", down);
    window.removeEventListener("mousemove", move);
    window.removeEventListener("mouseup", up);
  };
}

/** A canvas sized to `width` x `height` CSS pixels, sharp on high-density screens. */
export function sizeCanvas(canvas, width, height) {
  const ratio = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}
