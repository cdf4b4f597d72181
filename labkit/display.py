"""Notebook display of objects from the layers below ``labkit.viz``.

A ``Graph``, a ``Profile``, a ``Tensor`` and an ``nn.Module`` show themselves as pictures in a
notebook, but the layers that define them sit below ``labkit.viz`` and never import it. Each
asks ``drawing(kind, obj)`` instead, and ``labkit.viz`` registers what draws each kind when it
is imported (``import labkit`` imports it). With nothing registered an object has no rich
display and the notebook shows its text.

>>> from labkit import display
>>> display.register("example", lambda obj: f"<b>{obj}</b>")
>>> display.drawing("example", 3)
'<b>3</b>'
>>> display.drawing("nothing registered", 3) is None
True
"""
_drawers = {}      # kind -> draw(obj)


def register(kind, draw):
    """Make ``draw(obj)`` the drawing of objects of ``kind`` (``'graph'``, ``'profile'``,
    ``'tensor'``, ``'module'``)."""
    _drawers[kind] = draw


def drawing(kind, obj):
    """What the function registered for ``kind`` draws of ``obj``, or None (no rich display)."""
    draw = _drawers.get(kind)
    return None if draw is None else draw(obj)
