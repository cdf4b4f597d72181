"""Nested arguments and results of the functional transforms (tuples, lists, namedtuples, dicts
of tensors), taken apart into leaves and put back together; and the prefixes that ``in_axes`` /
``out_axes`` / ``argnums`` use to say something per leaf, as in JAX.

>>> import labkit as lk
>>> from labkit.autodiff import trees
>>> leaves, spec, paths = trees.flatten({"w": 1, "b": (2, 3)}, "params")
>>> leaves, paths
([1, 2, 3], ["params['w']", "params['b'][0]", "params['b'][1]"])
>>> trees.unflatten(spec, ["a", "b", "c"])
{'w': 'a', 'b': ('b', 'c')}
>>> trees.broadcast_prefix((0, None), ((1, 2), 3), "in_axes")
[0, 0, None]
"""
_LEAF = None


def _is_node(obj):
    return isinstance(obj, (tuple, list, dict))


def flatten(tree, path=""):
    """``(leaves, spec, paths)``: every leaf of ``tree`` in order, the structure to rebuild it,
    and where each leaf is (``x[0]['w']``, from ``path``) for messages."""
    leaves, paths = [], []
    return leaves, _flatten(tree, path, leaves, paths), paths


# Module-level recursion (a nested recursive function would be a reference cycle holding every
# tensor it saw until the cyclic collector runs).
def _flatten(tree, path, leaves, paths):
    if isinstance(tree, dict):
        return (dict, tuple(tree), tuple(_flatten(v, f"{path}[{k!r}]", leaves, paths)
                                         for k, v in tree.items()))
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(_flatten(v, f"{path}[{i}]", leaves, paths)
                                  for i, v in enumerate(tree)))
    leaves.append(tree)
    paths.append(path)
    return _LEAF


def unflatten(spec, leaves):
    """The structure ``spec`` (from ``flatten``) rebuilt around ``leaves``."""
    return _build(spec, iter(leaves))


def _build(spec, it):
    if spec is _LEAF:
        return next(it)
    kind = spec[0]
    if kind is dict:
        return {k: _build(s, it) for k, s in zip(spec[1], spec[2])}
    items = [_build(s, it) for s in spec[1]]
    if kind is list:
        return items
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def map_leaves(fn, tree):
    """``tree`` with each leaf ``x`` replaced by ``fn(x)``."""
    leaves, spec, _ = flatten(tree)
    return unflatten(spec, [fn(x) for x in leaves])


def broadcast_prefix(prefix, tree, what, path=""):
    """One value of ``prefix`` per leaf of ``tree``: ``prefix`` is a leaf (an int or None) that
    holds for a whole subtree, or a container matching ``tree``'s down to such leaves. ``what``
    names the prefix in the error when it does not match."""
    out = []
    _broadcast(prefix, tree, what, path, out)
    return out


def _broadcast(prefix, tree, what, path, out):
    if not _is_node(prefix):
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
