"""``lk.viz.placement(dtensor)``: which device holds which piece of a distributed tensor.

The tensor is drawn as a grid (its first dimension down; across, the first other dimension a
placement splits, or all the others flattened), cut along the boundaries of its pieces; each cell is filled with the
colour of the device(s) that hold it and names them, with ``+`` for a partial sum. So
``Shard(0)`` on 4 devices is four horizontal bands, ``Replicate()`` one cell naming all four,
a 2-d mesh's ``(Shard(0), Shard(1))`` a 2 x 2 checkerboard.

>>> import labkit as lk
>>> from labkit.distributed.tensor import Shard, distribute_tensor, init_device_mesh
>>> lk.devices.configure(cpus=2)
>>> x = distribute_tensor(lk.ones(4, 6), init_device_mesh("cpu", (2,)), [Shard(1)])
>>> pic = lk.viz.placement(x)
>>> pic.cells
[((0, 4), (0, 3), ['cpu:0']), ((0, 4), (3, 6), ['cpu:1'])]
>>> lk.devices.configure(cpus=1)
"""
import math

from . import style
from .svg_picture import SvgPicture
from .timeline import _esc

WIDTH, HEIGHT = 420, 220


def _cut(lo, hi, points):
    marks = sorted({lo, hi} | {p for p in points if lo < p < hi})
    return list(zip(marks, marks[1:]))


class ShardingPicture(SvgPicture):
    """The SVG of a DTensor's layout (``svg``, ``save(path)``); ``cells``: ``((rows),
    (columns), [devices])`` of each cell of the grid."""

    def __init__(self, dt):
        self.dtensor = dt
        spec = dt._spec
        shape = tuple(spec.shape) or (1,)
        split = sorted({p.dim for p in spec.placements if hasattr(p, "dim") and p.dim > 0})
        self.col_dim = split[0] if split else None     # the dimension drawn across
        rows = shape[0]
        cols = shape[self.col_dim] if self.col_dim is not None else (
            math.prod(shape[1:]) if len(shape) > 1 else 1)
        self.shape = (rows, cols)
        pieces = []
        for c in dt.local_tensors():
            sl = spec.local_slices(c) if spec.shape else (slice(0, 1),)
            col = (sl[self.col_dim].start, sl[self.col_dim].stop) if self.col_dim else (0, cols)
            pieces.append(((sl[0].start, sl[0].stop), col, dt.device_mesh.device(c).name))
        row_cuts = [p for r, _, _ in pieces for p in r]
        col_cuts = [p for _, c, _ in pieces for p in c]
        self.partial = any(p.is_partial() for p in spec.placements)
        self.cells = []
        for r in _cut(0, rows, row_cuts):
            for c in _cut(0, cols, col_cuts):
                holders = [d for pr, pc, d in pieces
                           if pr[0] <= r[0] and r[1] <= pr[1] and pc[0] <= c[0] and c[1] <= pc[1]]
                self.cells.append((r, c, holders))

    def svg(self):
        dt = self.dtensor
        rows, cols = self.shape
        colors = style.device_colors(sorted({d for _, _, ds in self.cells for d in ds}))
        top, left = 36, 10
        w, h = WIDTH - 2 * left, HEIGHT - top - 10
        font = f'font-family="{style.FONT}"'
        title = (f"{list(dt.shape)} {dt.dtype} as "
                 f"({', '.join(str(p) for p in dt.placements)}) on {dt.device_mesh.size()} "
                 f"devices")
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
               f'viewBox="0 0 {WIDTH} {HEIGHT}">',
               f'<text x="{left}" y="16" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">{_esc(title)}</text>',
               f'<text x="{left}" y="30" {font} font-size="10" fill="{style.MUTED}">rows: '
               f'dim 0 ({rows}) · columns: '
               f'{f"dim {self.col_dim}" if self.col_dim else "the other dims"} ({cols})'
               f'{" · +: a partial sum, added up over the devices" if self.partial else ""}'
               f'</text>']
        for (r0, r1), (c0, c1), holders in self.cells:
            x, y = left + w * c0 / cols, top + h * r0 / rows
            cw, ch = w * (c1 - c0) / cols, h * (r1 - r0) / rows
            fill, border = colors.get(holders[0], style.UNKNOWN) if holders else style.UNKNOWN
            if len(holders) > 1:
                fill = "#f3f4f6"
            sep = " + " if self.partial else ", "
            label = sep.join(holders) if len(holders) <= 4 else f"{len(holders)} devices"
            out.append(f'<g><title>rows {r0}..{r1 - 1}, columns {c0}..{c1 - 1}: '
                       f'{_esc(", ".join(holders))}</title>'
                       f'<rect x="{x:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{ch:.1f}" '
                       f'fill="{fill}" stroke="{border}" stroke-width="1.2"/>'
                       f'<text x="{x + cw / 2:.1f}" y="{y + ch / 2 + 4:.1f}" {font} '
                       f'font-size="10" text-anchor="middle" fill="{style.TEXT}">'
                       f'{_esc(label)}</text></g>')
        out.append("</svg>")
        return "".join(out)


    def __repr__(self):
        return f"<ShardingPicture of {self.dtensor!r}: {len(self.cells)} cells>"


def sharding(dt):
    """The picture of which device holds which piece of the DTensor ``dt``."""
    return ShardingPicture(dt)
