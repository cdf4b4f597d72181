"""``lk.viz.memory(trace)``: what each device holds over a step (a ``MemoryTrace`` from
``labkit.distributed.memory.memory_trace``), one chart per device: the bytes of each kind
stacked (parameters, gradients, optimiser state, gathered parameters, activations), over the
samples in time order, the peak marked and labelled.

>>> import labkit as lk
>>> from labkit.distributed.memory import memory_trace
>>> "<svg" in lk.viz.memory(memory_trace(lk.nn.Linear(3, 2))).svg()
True
"""
from . import style
from .svg_picture import SvgPicture
from .timeline import _esc, bytes_text

WIDTH = 640
ROW_H = 70
TOP = 40
LEFT = 70
KIND_COLORS = {
    "parameters": style.DEVICE_PALETTE[0],
    "gradients": style.ROLE["backward"],
    "optimizer": style.ROLE["update"],
    "gathered parameters": style.DEVICE_PALETTE[4],
    "activations": style.DEVICE_PALETTE[3],
}


class MemoryPicture(SvgPicture):
    """The SVG of a memory trace (``svg``, ``save(path)``)."""

    def __init__(self, trace, title=None):
        self.trace = trace
        self.title = title or "memory per device over the step"

    def svg(self):
        trace = self.trace
        devices = trace.devices()
        kinds = trace.kinds()
        height = TOP + ROW_H * len(devices) + 30
        font = f'font-family="{style.FONT}"'
        top_bytes = max([b for _, b in trace.peak().values()] + [1])
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
               f'viewBox="0 0 {WIDTH} {height}">',
               f'<text x="10" y="16" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">{_esc(self.title)}</text>']
        x = LEFT
        for k in kinds:                              # legend
            fill, border = KIND_COLORS.get(k, style.UNKNOWN)
            out.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{fill}" '
                       f'stroke="{border}"/><text x="{x + 14}" y="33" {font} font-size="10" '
                       f'fill="{style.TEXT}">{_esc(k)}</text>')
            x += 24 + 6 * len(k)
        plot_w = WIDTH - LEFT - 20
        for i, d in enumerate(devices):
            top = TOP + i * ROW_H
            series = trace.series(d)
            n = len(series)
            out.append(f'<text x="10" y="{top + ROW_H / 2}" {font} font-size="11" '
                       f'font-weight="bold" fill="{style.TEXT}">{_esc(d)}</text>')
            peak_at, peak = max(range(n), key=lambda j: sum(series[j][1].values())), 0
            for j, (_, held) in enumerate(series):
                bx = LEFT + plot_w * j / n
                bw = max(plot_w / n, 1.0)
                base = top + ROW_H - 8
                for k in kinds:
                    b = held.get(k, 0)
                    if not b:
                        continue
                    h = (ROW_H - 14) * b / top_bytes
                    fill, border = KIND_COLORS.get(k, style.UNKNOWN)
                    out.append(f'<rect x="{bx:.1f}" y="{base - h:.1f}" width="{bw:.1f}" '
                               f'height="{h:.1f}" fill="{fill}" stroke="none"><title>{_esc(d)}'
                               f' {_esc(k)}: {bytes_text(b)}</title></rect>')
                    base -= h
                if j == peak_at:
                    peak = sum(held.values())
                    out.append(f'<line x1="{bx + bw / 2:.1f}" y1="{base - 2:.1f}" '
                               f'x2="{bx + bw / 2:.1f}" y2="{top + 2}" stroke="#ef4444" '
                               f'stroke-width="1.2"/>')
            out.append(f'<text x="{WIDTH - 16}" y="{top + 12}" {font} font-size="10" '
                       f'text-anchor="end" fill="#ef4444">peak {bytes_text(peak)}</text>')
        out.append(f'<text x="{LEFT}" y="{height - 8}" {font} font-size="9" '
                   f'fill="{style.MUTED}">samples in time order (the step\'s gathers, releases '
                   f'and pipeline actions) →</text></svg>')
        return "".join(out)



def memory(trace, title=None):
    """Draw a ``MemoryTrace``: per device, the bytes held by each kind over the step."""
    return MemoryPicture(trace, title)
