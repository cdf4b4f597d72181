"""Nested structures of tensors (tuples, lists, namedtuples, dicts): taken apart into a flat list
of leaves and a hashable *spec*, and put back together around new leaves; and the prefixes that
``in_axes`` / ``out_axes`` / ``argnums`` use to say something per leaf, as in JAX.

One module for every transform that walks nested arguments and results: ``lk.grad`` /
``lk.vjp`` / ``lk.vmap`` take everything that is not a container as a leaf (``flatten``);
``lk.function`` (whose spec, with the Python values in it, is part of a trace's signature) and
``lk.cond`` / ``while_loop`` / ``scan`` say what a leaf is and what happens to anything else:
kept in the spec as a value, or an error (``flatten_into``).

>>> import labkit as lk
>>> from labkit.autodiff import trees
>>> leaves, spec, paths = trees.flatten({"w": 1, "b": (2, 3)}, "params")
>>> leaves, paths
([1, 2, 3], ["params['w']", "params['b'][0]", "params['b'][1]"])
>>> trees.unflatten(spec, ["a", "b", "c"])
{'w': 'a', 'b': ('b', 'c')}
>>> trees.broadcast_prefix((0, None), ((1, 2), 3), "in_axes")
[0, 0, None]
>>> leaves = []
>>> spec = trees.flatten_into({"w": lk.ones(2), "n": (lk.zeros(1), 3)}, leaves,
...                           is_leaf=lambda o: isinstance(o, lk.Tensor), other=trees.value)
>>> len(leaves), trees.text(spec)
(2, "{'w': tensor, 'n': (tensor, 3)}")
>>> trees.unflatten(spec, ["a", "b"])
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


def _is_container(obj):
    return isinstance(obj, (tuple, list, dict))


def _not_container(obj):
    return not isinstance(obj, (tuple, list, dict))


# The recursions are module-level functions: a nested recursive function is a reference cycle (it
# holds itself through its closure) that would keep every tensor it saw alive until the cyclic
# garbage collector runs.
def flatten_into(obj, leaves, is_leaf, other, path="", paths=None):
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
                tuple(flatten_into(p, leaves, is_leaf, other, f"{path}.parts[{i}]", paths)
                      for i, p in enumerate(parts)))
    if is_leaf(obj):
        leaves.append(obj)
        if paths is not None:
            paths.append(path)
        return LEAF
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(flatten_into(v, leaves, is_leaf, other, f"{path}[{i}]", paths)
                                 for i, v in enumerate(obj)))
    if isinstance(obj, dict):
        return (dict, tuple(obj), tuple(flatten_into(v, leaves, is_leaf, other,
                                                     f"{path}[{k!r}]", paths)
                                        for k, v in obj.items()))
    return other(obj, path)


def flatten(tree, path=""):
    """``(leaves, spec, paths)``: every leaf of ``tree`` (anything that is not a tuple, list or
    dict) in order, the structure to rebuild it, and where each leaf is (``x[0]['w']``, from
    ``path``) for messages."""
    leaves, paths = [], []
    return leaves, flatten_into(tree, leaves, _not_container, None, path, paths), paths


def value(obj, path=None):
    """``other`` for ``flatten_into`` that keeps a non-leaf in the spec: hashable objects by
    value (so a spec used as a cache key tells ``2`` from ``3``), others by identity."""
    try:
        hash(obj)
    except TypeError:
        return ("object", type(obj).__name__, id(obj))
    return ("value", type(obj).__name__, obj)


def unflatten(spec, leaves):
    """The structure ``spec`` rebuilt around ``leaves`` (in the order they were found)."""
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


def map_leaves(fn, tree):
    """``tree`` with each leaf ``x`` replaced by ``fn(x)``."""
    leaves, spec, _ = flatten(tree)
    return unflatten(spec, [fn(x) for x in leaves])


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


def broadcast_prefix(prefix, tree, what, path=""):
    """One value of ``prefix`` per leaf of ``tree``: ``prefix`` is a leaf (an int or None) that
    holds for a whole subtree, or a container matching ``tree``'s down to such leaves. ``what``
    names the prefix in the error when it does not match."""
    out = []
    _broadcast(prefix, tree, what, path, out)
    return out


def _broadcast(prefix, tree, what, path, out):
    if not _is_container(prefix):
        out.extend([prefix] * len(flatten(tree)[0]))
        return
    if isinstance(prefix, dict) and isinstance(tree, dict) and set(prefix) == set(tree):
        for k, v in tree.items():
            _broadcast(prefix[k], v, what, f"{path}[{k!r}]", out)
        return
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)) and \
            len(prefix) == len(tree):
        for i, (p, v) in enumerate(zip(prefix, tree)):
            _broadcast(p, v, what, f"{path}[{i}]", out)
        return
    raise ValueError(f"{what} {prefix!r} does not match the structure of {path or 'it'} "
                     f"({_show_structure(tree)}): give one int or None for the whole of it, "
                     f"or a {type(tree).__name__} of the same length/keys")


def _show_structure(tree):
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_show_structure(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, (tuple, list)):
        inner = ", ".join(_show_structure(v) for v in tree)
        return f"({inner},)" if isinstance(tree, tuple) and len(tree) == 1 else \
            (f"({inner})" if isinstance(tree, tuple) else f"[{inner}]")
    shape = getattr(tree, "shape", None)
    return f"tensor{tuple(shape)}" if shape is not None else type(tree).__name__
