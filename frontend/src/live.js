// The live training view's anywidget module (bundled into labkit/viz/static/live.js): the
// curves, a status line and a Stop button that says "stopping…" at once, before the kernel answers.
const LABEL = {idle: "Stop", running: "Stop", stopping: "stopping…", stopped: "stopped",
               done: "done"};
function render({ model, el }) {
  const bar = document.createElement("div");
  bar.style.cssText = "display:flex;align-items:center;gap:10px;margin:2px 0 4px 0";
  const button = document.createElement("button");
  button.className = "lk-live-stop";
  button.style.cssText = "min-width:96px;padding:3px 12px;border:1px solid #b91c1c;" +
    "border-radius:3px;background:#dc2626;color:white;font:13px sans-serif;cursor:pointer";
  const status = document.createElement("span");
  status.className = "lk-live-status";
  status.style.cssText = "font:12px sans-serif;color:#111827";
  const picture = document.createElement("div");
  picture.className = "lk-live-picture";
  bar.append(button, status);
  el.append(bar, picture);
  let pressed = null;                       // the run a click here asked to stop
  function draw() {
    const state = model.get("state");
    const asked = state === "running" && pressed === model.get("run");
    button.textContent = asked ? "stopping…" : (LABEL[state] || state);
    button.disabled = state !== "running" || asked || !model.get("can_stop");
    button.style.opacity = button.disabled ? "0.6" : "1";
    button.title = model.get("hint");
    status.textContent = model.get("status");
  }
  button.addEventListener("click", () => {
    if (button.disabled) return;
    pressed = model.get("run");
    draw();                                 // at once, before the kernel answers
    model.send({event: "stop", run: pressed});
  });
  for (const name of ["state", "run", "status", "hint", "can_stop"]) {
    model.on("change:" + name, draw);
  }
  model.on("change:svg", () => { picture.innerHTML = model.get("svg"); });
  picture.innerHTML = model.get("svg");
  draw();
}
export default { render };
