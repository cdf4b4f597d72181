"""Short HTML summaries that tensors and modules show in a notebook (``_repr_html_``).

The tensor and module classes call these lazily, so the lower layers never import ``viz``.

>>> import labkit as lk
>>> "requires_grad" in tensor_html(lk.ones(2, 3))
True
>>> "Linear" in module_html(lk.nn.Sequential(lk.nn.Linear(2, 3)))
True
"""
import html

import numpy as np

_TABLE = ('<table style="border-collapse:collapse;font-size:12px;text-align:left">')
_TH = '<th style="padding:1px 10px 1px 0;color:#6b7280;font-weight:normal;text-align:left">'
_TD = '<td style="padding:1px 0;text-align:left;font-family:monospace">'
_FEW = 6            # values shown
_STATS_UP_TO = 10_000_000


def _row(name, value):
    return f"<tr>{_TH}{html.escape(name)}</th>{_TD}{html.escape(str(value))}</td></tr>"


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def tensor_html(t):
    """A small table: shape, dtype, device, gradient information and the first few values."""
    shape = tuple(t.shape)
    rows = [_row("shape", f"({', '.join(str(s) for s in shape)}{',' if len(shape) == 1 else ''})"),
            _row("dtype", t.dtype.name), _row("device", t.device.name)]
    node = getattr(t, "_gnode", None)
    if node is not None:    # a symbolic tensor: it has no values yet
        rows.append(_row("node", f"%{node.index} {node.name} ({node.op_name}) of graph "
                                 f"{node.graph.name!r}"))
        rows.append(_row("values", "symbolic: computed when the graph runs"))
        title = "SymbolicTensor"
    else:
        rows.append(_row("requires_grad", t.requires_grad))
        if t._node is not None:
            rows.append(_row("grad_fn", t._node.op.name))
        if t.grad is not None:
            rows.append(_row("grad", f"{t.grad.dtype.name}{list(t.grad.shape)}"))
        data = t._data
        size = int(data.size)
        few = _host(data.reshape(-1)[:_FEW])
        text = np.array2string(few, separator=", ", precision=4, threshold=_FEW + 1)
        if data.ndim == 0:
            text = str(few[0])
        elif size > _FEW:
            text = text[:-1] + f", ... ({size:,} values)]"
        rows.append(_row("values", text))
        if 1 < size <= _STATS_UP_TO and t.dtype.name != "bool_":
            xp = t.device.xp
            stats = [float(_host(f(data))) for f in (xp.min, xp.max, xp.mean)]
            rows.append(_row("min / max / mean", " / ".join(f"{v:.4g}" for v in stats)))
        title = type(t).__name__
    return (f'<div><b style="font-size:12px">{html.escape(title)}</b>{_TABLE}'
            f'{"".join(rows)}</table></div>')


def _count(module):
    return sum(p.numel() for p in module._parameters.values() if p is not None)


def module_html(module):
    """A tree of submodules with each one's layer description and parameter count."""
    total = module.num_parameters()
    out = [f'<div style="font-size:12px"><b>{html.escape(type(module).__name__)}</b> '
           f'<span style="color:#6b7280">{total:,} parameters</span>',
           '<ul style="margin:2px 0;padding-left:18px;list-style:none">']
    stack = [("open", name, m) for name, m in reversed(list(module._modules.items()))
             if m is not None]
    while stack:   # iterative: deep models are fine
        what, name, m = stack.pop()
        if what == "close":
            out.append("</ul></li>")
            continue
        extra = m.extra_repr()
        desc = f"{type(m).__name__}({extra})" if extra else type(m).__name__
        own, sub = _count(m), m.num_parameters()
        count = f"{sub:,} params" if sub else "no params"
        if sub and own != sub:
            count += f" ({own:,} own)" if own else ""
        out.append(f'<li><b>{html.escape(name)}</b> <code>{html.escape(desc)}</code> '
                   f'<span style="color:#6b7280">{count}</span>')
        children = [(n, c) for n, c in m._modules.items() if c is not None]
        if children:
            out.append('<ul style="margin:0;padding-left:18px;list-style:none">')
            stack.append(("close", name, m))
            stack.extend(("open", n, c) for n, c in reversed(children))
        else:
            out.append("</li>")
    out.append("</ul></div>")
    return "".join(out)
