"""``einsum``: one primitive whose vjp is einsum again, so gradients of any order come free.

The op takes an *explicit* equation with one letter per dimension (``"ab,bc->ac"``): the public
``lk.einsum`` first rewrites PyTorch's forms (ellipsis, implicit output, sublists) into that.
Labels of size 1 broadcast against the same label's size elsewhere, as in PyTorch.

The cotangent of operand ``i`` is the einsum of the output's cotangent with the other
operands, giving ``i``'s labels. Two kinds of label need more than that: a label only ``i``
has (summed away inside ``i`` alone: its cotangent is the same along it, a broadcast) and a
label ``i`` repeats (``"ii->i"`` reads a diagonal: the cotangent lies on that diagonal, put there
by one more einsum with identity matrices).
"""
import functools
import math
import string

import numpy as np

from ...errors import ShapeError, describe
from ..creation import eye
from ..op import needs_grad, op
from ..shape_rules import shape_of, ufunc_dtype
from .shape import broadcast_to, moved, reshape

# PyTorch numbers labels A-Z then a-z; an implicit output lists them in that order
LABELS = string.ascii_uppercase + string.ascii_lowercase


@functools.lru_cache(maxsize=512)
def parse(equation):
    """``"ab,bc->ac"`` -> ((``"ab"``, ``"bc"``), ``"ac"``): an explicit equation's terms."""
    lhs, _, out = equation.partition("->")
    return tuple(lhs.split(",")), out


def _label_sizes(terms, shapes, equation, operands):
    """Each label's size, size-1 occurrences broadcasting against the others."""
    sizes = {}
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ShapeError(f"einsum {equation!r}: operand {k} has {len(shape)} dimension(s) but "
                             f"its subscripts {term!r} name {len(term)}; operands: "
                             f"{', '.join(describe(o) for o in operands)}")
        own = {}
        for label, n in zip(term, shape):
            if own.setdefault(label, n) != n:
                raise ShapeError(f"einsum {equation!r}: subscript {label!r} is repeated in "
                                 f"operand {k} ({describe(operands[k])}) for dimensions of "
                                 f"different sizes ({own[label]} and {n}); a repeated subscript "
                                 f"reads a diagonal, which needs equal sizes")
            if label not in sizes or sizes[label] == 1:
                sizes[label] = n
            elif n != 1 and n != sizes[label]:
                raise ShapeError(
                    f"einsum {equation!r}: subscript {label!r} has size {sizes[label]} in one "
                    f"operand and {n} in operand {k}; the dimensions one subscript names must "
                    f"be equal (or 1, which broadcasts). Operands: "
                    f"{', '.join(describe(o) for o in operands)}")
    return sizes


def _einsum_rule(*operands, equation):
    terms, out = parse(equation)
    if len(terms) != len(operands):
        raise ShapeError(f"einsum {equation!r} has {len(terms)} operand term(s) but got "
                         f"{len(operands)} operand(s)")
    sizes = _label_sizes(terms, [shape_of(o) for o in operands], equation, operands)
    return tuple(sizes[c] for c in out), _product_dtype(operands)


class _DType:
    """Something with a ``dtype`` (a promoted one), for ``ufunc_dtype``."""

    def __init__(self, dtype):
        self.dtype, self.shape = dtype, ()


def _product_dtype(operands):
    """The dtype of a product of all the operands (NumPy's ``multiply``, folded)."""
    dtype = operands[0].dtype
    for x in operands[1:]:
        dtype = ufunc_dtype("einsum", np.multiply, _DType(dtype), x)
    return dtype


def _unique(term):
    return "".join(dict.fromkeys(term))


def _einsum_vjp(g, out, *operands, equation):
    terms, out_term = parse(equation)
    grads = []
    for i, (x, term) in enumerate(zip(operands, terms)):
        if not needs_grad(x):
            grads.append(None)
            continue
        others = [out_term] + [t for j, t in enumerate(terms) if j != i]
        seen = set("".join(others))
        labels = _unique(term)
        kept = "".join(c for c in labels if c in seen)
        args = [g] + [o for j, o in enumerate(operands) if j != i]
        gx = einsum(*args, equation=",".join(others) + "->" + kept)
        # a label's size is x's, or gx's where x's is 1 and broadcast (the engine sums that
        # back); where gx's is 1 and x's is not, the cotangent is broadcast along it
        sizes = dict(zip(term, x.shape))
        sizes.update((c, n) for c, n in zip(kept, gx.shape) if n != 1)
        if kept != labels:             # labels only x has: the cotangent is constant along them
            gx = reshape(gx, shape=tuple(gx.shape[kept.index(c)] if c in kept else 1
                                         for c in labels))
        target = tuple(sizes[c] for c in labels)
        if gx.shape != target:
            gx = broadcast_to(gx, shape=target)
        if len(labels) != len(term):   # repeated labels: the cotangent lies on the diagonal
            gx = _on_diagonal(gx, labels, term, sizes)
        grads.append(gx)
    return tuple(grads)


def _on_diagonal(gx, labels, term, sizes):
    """``gx`` (over the distinct ``labels``) placed on the diagonals ``term`` repeats."""
    free = iter(c for c in LABELS if c not in term)
    full, eyes, terms = "", [], [labels]
    for k, c in enumerate(term):
        if c in term[:k]:                       # a repeat: a new label tied to c by an identity
            fresh = next(free)
            full += fresh
            terms.append(c + fresh)
            eyes.append(eye(sizes[c], dtype=gx.dtype, device=gx.device))
        else:
            full += c
    return einsum(gx, *eyes, equation=",".join(terms) + "->" + full)


def _einsum_batch(inputs, bdims, equation):
    """The batch dimension as one more label, first in each batched operand and the output."""
    free = [c for c in LABELS if c not in equation]
    if not free:                       # every label taken: one example at a time
        return NotImplemented
    terms, out = parse(equation)
    b = free[0]
    terms = [t if d is None else b + t for t, d in zip(terms, bdims)]
    operands = [x if d is None else moved(x, d) for x, d in zip(inputs, bdims)]
    return einsum(*operands, equation=",".join(terms) + "->" + b + out), 0


@op("einsum", shape=_einsum_rule, vjp=_einsum_vjp, batch=_einsum_batch)
def einsum(xp, *operands, equation):
    """Einstein summation over an explicit equation (one letter per dimension, ``->`` and the
    output given). Two operands without a repeated label run as one matrix product."""
    terms, out = parse(equation)
    sizes = {}
    for term, a in zip(terms, operands):
        for c, n in zip(term, a.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    if len(operands) == 2 and all(len(set(t)) == len(t) for t in terms):
        return _pair(xp, *operands, *terms, out, sizes)
    operands = [_broadcast(xp, a, t, sizes) for a, t in zip(operands, terms)]
    return xp.einsum(equation, *operands, optimize=len(operands) > 2)


def _broadcast(xp, a, term, sizes):
    """``a`` broadcast (a view) to the size each of its labels has in the equation."""
    target = tuple(sizes[c] for c in term)
    return a if a.shape == target else xp.broadcast_to(a, target)


def _pair(xp, a, b, ta, tb, out, sizes):
    """``a`` (labels ``ta``) times ``b`` (``tb``) summed to ``out`` as one batched matmul:
    labels of all three are the batch, labels of a or b alone are summed first, the rest are
    rows, columns and the contracted dimension."""
    only_a = tuple(k for k, c in enumerate(ta) if c not in tb and c not in out)
    only_b = tuple(k for k, c in enumerate(tb) if c not in ta and c not in out)
    if only_a:
        a = a.sum(axis=only_a, dtype=a.dtype)
        ta = "".join(c for k, c in enumerate(ta) if k not in only_a)
    if only_b:
        b = b.sum(axis=only_b, dtype=b.dtype)
        tb = "".join(c for k, c in enumerate(tb) if k not in only_b)
    batch = [c for c in out if c in ta and c in tb]
    rows = [c for c in out if c in ta and c not in tb]
    cols = [c for c in out if c in tb and c not in ta]
    inner = [c for c in ta if c in tb and c not in out]
    # contracted labels must agree in size: a size-1 side is broadcast (a view)
    a = _broadcast(xp, a, ta, {c: (sizes[c] if c in inner else n) for c, n in zip(ta, a.shape)})
    b = _broadcast(xp, b, tb, {c: (sizes[c] if c in inner else n) for c, n in zip(tb, b.shape)})
    a = a.transpose([ta.index(c) for c in batch + rows + inner])
    b = b.transpose([tb.index(c) for c in batch + inner + cols])
    nb = len(batch)
    m = math.prod(a.shape[nb:nb + len(rows)])
    n = math.prod(b.shape[nb + len(inner):])
    k = math.prod(sizes[c] for c in inner)
    product = xp.matmul(a.reshape(a.shape[:nb] + (m, k)), b.reshape(b.shape[:nb] + (k, n)))
    shape = product.shape[:nb] + tuple(sizes[c] for c in rows) + tuple(sizes[c] for c in cols)
    result = product.reshape(shape)
    order = batch + rows + cols
    return result.transpose([order.index(c) for c in out])


# ---- PyTorch's equations, made explicit ---------------------------------------------------------
def _syntax(equation, why):
    return ShapeError(f"einsum {equation!r}: {why}")


@functools.lru_cache(maxsize=512)
def explicit_equation(equation, ndims):
    """PyTorch's ``equation`` for operands of ``ndims`` dimensions as the op's explicit one:
    spaces dropped, each ``...`` replaced by letters of its own (right-aligned, so they
    broadcast), and an implicit output written out (the ellipsis dimensions, then the labels
    that appear once, in PyTorch's order A-Z, a-z)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise _syntax(equation, f"names {len(terms)} operand(s) but {len(ndims)} were given")
    bad = sorted(set(eq) - set(LABELS) - set(".,->"))
    if bad or "->" in out:
        raise _syntax(equation, f"subscripts are letters a-z, A-Z and '...', with one '->' at "
                                f"most{'; got ' + repr(''.join(bad)) if bad else ''}")
    parts, ellipsis = [], 0
    for k, (term, nd) in enumerate(zip(terms, ndims)):
        before, dots, after = term.partition("...")
        if "." in before + after:
            raise _syntax(equation, f"term {term!r} has a '.' outside one '...'")
        count = nd - len(before) - len(after) if dots else 0
        if count < 0 or (not dots and len(term) != nd):
            raise _syntax(equation, f"operand {k} has {nd} dimension(s) but its term {term!r} "
                                    f"names {len(before) + len(after)}")
        parts.append((before, count, after))
        ellipsis = max(ellipsis, count)
    spare = [c for c in LABELS if c not in eq]
    if len(spare) < ellipsis:
        raise _syntax(equation, "too many dimensions under '...' for the letters left")
    dots = "".join(spare[:ellipsis])
    terms = [before + dots[ellipsis - count:] + after for before, count, after in parts]
    if arrow:
        before, has_dots, after = out.partition("...")
        if "." in before + after:
            raise _syntax(equation, "the output has a '.' outside one '...'")
        out = before + (dots if has_dots else "") + after
        lhs_labels = set("".join(terms))
        for c in out:
            if c not in lhs_labels:
                raise _syntax(equation, f"output subscript {c!r} appears in no operand")
            if out.count(c) > 1:
                raise _syntax(equation, f"output subscript {c!r} appears more than once")
    else:
        counts = {}
        for c in lhs.replace(".", "").replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = dots + "".join(sorted((c for c, n in counts.items() if n == 1), key=LABELS.index))
    return ",".join(terms) + "->" + out


def sublist_equation(args):
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])``'s operands and equation (labels 0..51 are
    A-Z, a-z; ``...`` is Ellipsis)."""
    def term(sublist):
        out = ""
        for label in sublist:
            if label is Ellipsis:
                out += "..."
            elif isinstance(label, int) and 0 <= label < len(LABELS):
                out += LABELS[label]
            else:
                raise ShapeError(f"einsum: a sublist holds ints in 0..{len(LABELS) - 1} and "
                                 f"Ellipsis, got {label!r}")
        return out
    operands, terms = list(args[0::2]), [term(s) for s in args[1::2]]
    if len(args) % 2:                      # the last sublist names the output
        operands.pop()
        return operands, ",".join(terms[:len(operands)]) + "->" + term(args[-1])
    return operands, ",".join(terms)
