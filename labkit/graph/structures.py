"""Nested structures of tensors (tuples, lists, namedtuples, dicts): taken apart into a flat list
of leaves and a hashable *spec*, and put back together around new leaves.

``lk.function`` flattens its arguments (the spec, with the Python values in it, is part of the
trace's signature) and its results; ``lk.cond`` / ``while_loop`` / ``scan`` flatten their
operands, loop variables and results. Each says what a leaf is and what happens to anything
else (kept in the spec as a value, or an error).

>>> import labkit as lk
>>> from labkit.graph import structures
>>> leaves = []
>>> spec = structures.flatten({"w": lk.ones(2), "n": (lk.zeros(1), 3)}, leaves,
...                           is_leaf=lambda o: isinstance(o, lk.Tensor), other=structures.value)
>>> len(leaves), structures.text(spec)
(2, "{'w': tensor, 'n': (tensor, 3)}")
>>> structures.unflatten(spec, ["a", "b"])
{'w': 'a', 'n': ('b', 3)}
"""
from ..errors import LabkitError

LEAF = "*"
PARTS = "parts"


def tensor_parts(obj):
    """``(parts, context)`` of a tensor made of other tensors (a type with
    ``__tensor_flatten__``, such as a DTensor, which holds one local tensor per device), or
    None for any other object. ``type(obj).__tensor_unflatten__(parts, context)`` rebuilds it
    around new parts; ``context`` is hashable (it is part of a trace's signature)."""
    flatten_ = getattr(type(obj), "__tensor_flatten__", None)
    return None if flatten_ is None else flatten_(obj)


# Both recursions are module-level functions: a nested recursive function is a reference cycle
# (it holds itself through its closure) that would keep every tensor it saw alive until the
# cyclic garbage collector runs.
def flatten(obj, leaves, is_leaf, other, path="", paths=None):
    """The spec of ``obj``; its leaves (``is_leaf(o)``) are appended to ``leaves`` and, when
    ``paths`` is a list, their paths (``x[0]['key']``, from ``path``) to ``paths``.

    Tuples, lists, namedtuples and dicts are walked, and so are tensors made of other tensors
    (``tensor_parts``: their parts are the leaves); any other object ``o`` becomes
    ``other(o, path)`` in the spec (``value`` keeps it; raise to refuse it).
    """
    made_of = tensor_parts(obj)
    if made_of is not None:
        parts, context = made_of
        return (PARTS, type(obj), context,
                tuple(flatten(p, leaves, is_leaf, other, f"{path}.parts[{i}]", paths)
                      for i, p in enumerate(parts)))
    if is_leaf(obj):
        leaves.append(obj)
        if paths is not None:
            paths.append(path)
        return LEAF
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(flatten(v, leaves, is_leaf, other, f"{path}[{i}]", paths)
                                 for i, v in enumerate(obj)))
    if isinstance(obj, dict):
        return (dict, tuple(obj), tuple(flatten(v, leaves, is_leaf, other, f"{path}[{k!r}]",
                                                paths) for k, v in obj.items()))
    return other(obj, path)


def value(obj, path=None):
    """``other`` for ``flatten`` that keeps a non-leaf in the spec: hashable objects by value
    (so a spec used as a cache key tells ``2`` from ``3``), others by identity."""
    try:
        hash(obj)
    except TypeError:
        return ("object", type(obj).__name__, id(obj))
    return ("value", type(obj).__name__, obj)


def unflatten(spec, leaves):
    """The structure ``spec`` rebuilt around ``leaves`` (in the order ``flatten`` found them)."""
    return _build(spec, iter(leaves))


def _build(s, it):
    if s == LEAF:
        return next(it)
    if s is None:
        return None
    kind = s[0]
    if kind == "value":
        return s[2]
    if kind == "object":
        raise LabkitError(f"cannot rebuild a structure holding a {s[1]} (it was kept by "
                          f"identity, not by value)")
    if kind == PARTS:
        return s[1].__tensor_unflatten__([_build(v, it) for v in s[3]], s[2])
    if kind is dict:
        return {k: _build(v, it) for k, v in zip(s[1], s[2])}
    items = [_build(v, it) for v in s[1]]
    if kind is list:
        return items
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def items(spec):
    """The specs of a tuple's or list's items, or ``{key: spec}`` of a dict's."""
    return dict(zip(spec[1], spec[2])) if spec[0] is dict else list(spec[1])


def text(spec):
    """A readable rendering of a spec, e.g. ``(tensor, [tensor, 2.0])``."""
    if spec == LEAF:
        return "tensor"
    if spec is None:
        return "None"
    kind = spec[0]
    if kind == "value":
        return repr(spec[2])
    if kind == "object":
        return f"a {spec[1]}"
    if kind == PARTS:
        return spec[1].__name__
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {text(v)}" for k, v in zip(spec[1], spec[2])) + "}"
    inner = ", ".join(text(v) for v in spec[1])
    if kind is list:
        return f"[{inner}]"
    return f"({inner}{',' if len(spec[1]) == 1 else ''})"


def check_rebuildable(spec, what):
    """Raise if ``spec`` holds an object kept by identity: a traced function that returns one
    would hand back that same object on every later call."""
    if spec == LEAF or spec is None or spec[0] in ("value", PARTS):
        return
    if spec[0] == "object":
        raise LabkitError(f"{what}: returns a {spec[1]}, which a captured graph cannot hand "
                          f"back; return tensors, numbers, strings, None, or tuples, lists and "
                          f"dicts of them")
    for v in spec[-1]:
        check_rebuildable(v, what)
