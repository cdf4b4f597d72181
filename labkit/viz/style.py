"""One palette for every labkit picture: roles, node kinds, special ops, devices.

Each entry is a ``(fill, border)`` pair of hex colours: a light fill that keeps black text
readable and a darker border of the same hue. Shapes say what a node *is* (an op, an input, a
piece of state, control flow, a transfer); colours say which *part* of the computation it belongs
to (forward, backward, update) or, in the placement view, which device runs it.

>>> from labkit.viz import style
>>> style.ROLE["backward"]
('#ffedd5', '#c2410c')
>>> style.device_colors(["cpu:1", "cpu:0"])["cpu:0"]
('#dbeafe', '#1d4ed8')
"""

FONT = "Helvetica"
TEXT = "#111827"          # node text
MUTED = "#6b7280"         # shapes, dtypes, secondary text
EDGE = "#6b7280"
CLUSTER = ("#f8fafc", "#94a3b8")   # name-scope boxes: fill, border
CROSS_DEVICE_EDGE = "#dc2626"      # an edge whose ends are on different devices

# Which part of the computation a node belongs to.
ROLE = {
    "forward": ("#dbeafe", "#1d4ed8"),    # blue
    "backward": ("#ffedd5", "#c2410c"),   # orange
    "update": ("#dcfce7", "#15803d"),     # green
}
ROLE_ORDER = ("forward", "backward", "update")
UNKNOWN = ("#f3f4f6", "#4b5563")          # a role or device the palette does not know

# What a node is (its ``kind``), when it is not an op application.
KIND = {
    "placeholder": ("#ffffff", "#374151"),   # an input fed at run time
    "capture": ("#e7e5e4", "#57534e"),       # state read by reference: variables, parameters
    "constant": ("#ffffff", "#9ca3af"),
}
SHAPE = {
    "op": "box",
    "placeholder": "invhouse",
    "capture": "cylinder",
    "constant": "ellipse",
    "control": "diamond",      # cond / switch / merge
    "loop": "hexagon",         # while / scan and the loop frame ops
    "queue": "box3d",
    "transfer": "cds",         # send / recv
    "scope": "box3d",          # a collapsed name scope
    "more": "note",            # "... N more nodes"
}

# Ops drawn apart from ordinary computation, recognised by op name.
CONTROL_OPS = frozenset({"cond", "switch", "merge"})
LOOP_OPS = frozenset({"while", "while_grad", "while_loop", "scan", "scan_grad", "enter", "exit",
                      "next_iteration", "loop_cond"})
TRANSFER_OPS = frozenset({"send", "recv"})
CONTROL = ("#fef9c3", "#a16207")           # border (and legend swatch) of control-flow ops
TRANSFER = ("#f3e8ff", "#7e22ce")          # send / recv


def is_queue_op(name):
    """Queue ops (enqueue, dequeue, queue_close, ...) are drawn as stacked boxes."""
    return "queue" in name


# Devices, in order of first use: cpu:0 is always the first colour when present.
DEVICE_PALETTE = (
    ("#dbeafe", "#1d4ed8"),   # blue
    ("#fed7aa", "#c2410c"),   # orange
    ("#bbf7d0", "#15803d"),   # green
    ("#fbcfe8", "#be185d"),   # pink
    ("#ddd6fe", "#6d28d9"),   # violet
    ("#99f6e4", "#0f766e"),   # teal
    ("#fef08a", "#a16207"),   # yellow
    ("#fecaca", "#b91c1c"),   # red
    ("#d9f99d", "#4d7c0f"),   # lime
    ("#e2e8f0", "#334155"),   # slate
)


def _device_key(name):
    kind, _, index = name.partition(":")
    return (0 if kind == "cpu" else 1, int(index) if index.isdigit() else 0, name)


def device_colors(names):
    """``{device name: (fill, border)}`` for the given names, cpu before gpu, by index."""
    ordered = sorted({n for n in names if n is not None}, key=_device_key)
    return {n: DEVICE_PALETTE[i % len(DEVICE_PALETTE)] for i, n in enumerate(ordered)}
