"""Sizes that are not fixed in an exported model: dynamic axes, found by tracing twice.

A graph captured by ``lk.function`` holds concrete sizes: the batch of the example input is in
every shape and in attributes such as a reshape's target. To export a model whose batch (or
sequence length) may vary, the program is traced once more per dynamic axis with that axis
resized; every size that moved with it is an affine function of the axis (``B``, ``36*B``,
``T - 1``) or a product of several (``B*T``), which the ONNX graph computes from the input's
shape at run time. A size that moves in any other way, or a program whose structure changes
with the size, cannot be exported with that axis dynamic, and the export says where.
"""
from fractions import Fraction

from ..errors import LabkitError


class OnnxExportError(LabkitError, RuntimeError):
    """A labkit graph that cannot be written as ONNX (the message names the op and the line)."""


class Dim:
    """A size computed at run time: ``coef * prod(symbols) + offset``.

    Sizes print as ONNX writes symbolic dimensions (``2*batch+1``). Using one where a fixed
    integer is needed raises ``OnnxExportError``.
    """

    __slots__ = ("coef", "symbols", "offset")

    def __init__(self, coef, symbols, offset=0):
        self.coef, self.symbols, self.offset = Fraction(coef), tuple(sorted(symbols)), offset

    def key(self):
        return (self.coef, self.symbols, self.offset)

    def __eq__(self, other):
        return isinstance(other, Dim) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        text = "*".join(self.symbols)
        if self.coef != 1:
            text = f"{self.coef}*{text}"
        if self.offset:
            text += f"{self.offset:+d}"
        return text

    def __index__(self):
        raise OnnxExportError(f"a size that depends on the dynamic axis {self!r} is used where "
                              f"the exported graph needs a fixed number")

    __int__ = __index__


def fit(values, sizes, symbols):
    """The size of one dimension or integer attribute from its values in every trace:
    ``values[0]`` in the first, then two traces per symbol (symbol ``j`` resized in traces
    ``1 + 2j`` and ``2 + 2j``; ``sizes[k][j]`` is symbol ``j``'s size in trace ``k``). Returns
    an int (fixed), a Dim, or None: the value moved in a way that is neither affine in one
    symbol nor a product of them (a fit from two traces is checked against the third)."""
    base = values[0]
    moved = [j for j in range(len(symbols)) if values[1 + 2 * j] != base or
             values[2 + 2 * j] != base]
    if not moved:
        return base
    if len(moved) == 1:
        j = moved[0]
        (s0, v0), (s1, v1), (s2, v2) = [(sizes[k][j], values[k]) for k in (0, 1 + 2 * j,
                                                                           2 + 2 * j)]
        coef = Fraction(v1 - v0, s1 - s0)
        offset = v0 - coef * s0
        if offset.denominator != 1 or coef * s2 + offset != v2:
            return None
        return Dim(coef, (symbols[j],), int(offset))
    prod = 1
    for j in moved:
        prod *= sizes[0][j]
    coef = Fraction(base, prod)
    for j in moved:        # every variation must scale the value by its own ratio
        for k in (1 + 2 * j, 2 + 2 * j):
            if Fraction(values[k], base) != Fraction(sizes[k][j], sizes[0][j]):
                return None
    return Dim(coef, tuple(symbols[j] for j in moved), 0)


UNFITTED = object()


def fit_attr(values, sizes, symbols):
    """An attribute value (nested tuples, lists, ints...) with every integer that moved with a
    dynamic axis replaced by its ``Dim``; ``UNFITTED`` where something moved that cannot be."""
    base = values[0]
    if isinstance(base, bool) or not isinstance(base, (int, tuple, list)):
        return base if all(_same(v, base) for v in values) else UNFITTED
    if isinstance(base, int):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return UNFITTED
        f = fit(values, sizes, symbols)
        return UNFITTED if f is None else f
    if not all(type(v) is type(base) and len(v) == len(base) for v in values):
        return UNFITTED
    out = []
    for parts in zip(*values):
        f = fit_attr(parts, sizes, symbols)
        if f is UNFITTED:
            return UNFITTED
        out.append(f)
    return type(base)(out)


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:     # arrays, sub-graphs: compared by identity
        return a is b
