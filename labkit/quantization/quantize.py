"""``quantize_dynamic``: PyTorch's ``torch.ao.quantization.quantize_dynamic``.

Post-training dynamic quantization: each chosen ``lk.nn.Linear`` becomes an
``lk.nn.quantized.dynamic.Linear`` (int8 weight, its input quantized to uint8 at run time),
with no data and no retraining. The result is in eval mode.

>>> import labkit as lk
>>> model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
>>> qmodel = lk.quantization.quantize_dynamic(model)
>>> print(qmodel)
Sequential(
  (0): DynamicQuantizedLinear(in_features=4, out_features=8, dtype=lk.qint8, qscheme=per_tensor_symmetric)
  (1): ReLU()
  (2): DynamicQuantizedLinear(in_features=8, out_features=2, dtype=lk.qint8, qscheme=per_tensor_symmetric)
)
>>> type(model[0]).__name__, qmodel.training          # the original is untouched
('Linear', False)
"""
import copy
import difflib
import warnings

from ..nn.linear import Linear
from ..nn.module import Module
from ..nn.recurrent import GRU, LSTM, GRUCell, LSTMCell, RNNCell
from ..nn.quantized.dynamic.linear import Linear as DynamicLinear
from ..nn.quantized.dynamic.linear import check_dtype
from ..tensor.dtypes import int8
from .qconfig import QConfig, default_dynamic_qconfig

# what PyTorch quantizes dynamically beyond Linear (its default qconfig_spec): labkit keeps these
# float, and says so when a model has one that PyTorch would have quantized
_PYTORCH_ONLY = (LSTM, GRU, LSTMCell, RNNCell, GRUCell)

_SPEC_HELP = ("qconfig_spec is a set of module types or submodule names ({lk.nn.Linear}, "
              "{'0', 'encoder.fc'}), or a dict mapping them to a QConfig "
              "(lk.quantization.default_dynamic_qconfig, per_channel_dynamic_qconfig) or to "
              "None (leave that module float)")


def get_default_dynamic_quant_module_mappings():
    """The float module types ``quantize_dynamic`` replaces, and by what.

    >>> import labkit as lk
    >>> lk.quantization.get_default_dynamic_quant_module_mappings()[lk.nn.Linear].__name__
    'Linear'
    """
    return {Linear: DynamicLinear}


def quantize_dynamic(model, qconfig_spec=None, dtype=int8, mapping=None, inplace=False):
    """``model`` with its Linear layers dynamically quantized to int8, as PyTorch's.

    ``qconfig_spec``: which submodules to quantize, and how. None: every ``lk.nn.Linear``
    (per tensor; PyTorch's default also names LSTM, GRU and their cells, which labkit leaves
    float, with a warning). A set of module types and/or submodule names (``{lk.nn.Linear}``, ``{'fc1'}``)
    quantizes those per tensor. A dict maps types or names to a ``QConfig``
    (``lk.quantization.per_channel_dynamic_qconfig`` for one scale per output feature) or to
    None (keep it float). As in PyTorch, a module gets the entry for its type, overridden by the
    entry for its name, and a module without either inherits its parent's, so ``{'': qconfig}``
    covers the whole model and ``{'encoder': qconfig}`` a part of it; only module types in
    ``mapping`` (by default ``{lk.nn.Linear: lk.nn.quantized.dynamic.Linear}``, exact types, as
    PyTorch's) are replaced, each by ``mapping[type].from_float(module)`` with ``module.qconfig``
    set. Unlike PyTorch, the model itself is replaced too if it is a Linear (also with
    ``inplace=True``: use the module returned).

    ``dtype``: ``lk.qint8`` (the only one). ``inplace``: change ``model`` itself; else a deep
    copy is quantized and ``model`` is untouched. Returns the quantized model, in eval mode.

    >>> import labkit as lk
    >>> from labkit.quantization import quantize_dynamic, per_channel_dynamic_qconfig
    >>> net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
    >>> q = quantize_dynamic(net, {"0": per_channel_dynamic_qconfig})
    >>> q[0].qscheme, type(q[2]).__name__
    ('per_channel_symmetric', 'Linear')
    """
    check_dtype(dtype, "quantize_dynamic")
    if not isinstance(model, Module):
        raise TypeError(f"quantize_dynamic needs an lk.nn.Module, got {type(model).__name__}")
    spec = _spec(qconfig_spec)
    mapping = _mapping(mapping)
    _check_names(model, spec)
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    root = _qconfig_for(model, "", None, spec)
    left = []
    _convert(model, "", root, spec, mapping, {}, left)
    model = _replaced(model, "", root, mapping, left)
    if left:
        kinds = sorted({type(m).__name__ for _, m in left})
        warnings.warn(f"quantize_dynamic: labkit has no dynamically quantized {', '.join(kinds)} "
                      f"(PyTorch has); these modules stay float: "
                      f"{', '.join(repr(p) for p, _ in left)}. Only Linear layers are quantized.",
                      stacklevel=2)
    return model.eval()


# ---- the arguments ---------------------------------------------------------------------------
def _spec(qconfig_spec):
    """``qconfig_spec`` as a dict {module type or name: QConfig or None}, checked."""
    if qconfig_spec is None:        # PyTorch's default for qint8
        return dict.fromkeys((Linear,) + _PYTORCH_ONLY, default_dynamic_qconfig)
    if isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        qconfig_spec = dict.fromkeys(qconfig_spec, default_dynamic_qconfig)
    elif not isinstance(qconfig_spec, dict):
        raise TypeError(f"quantize_dynamic: got qconfig_spec of type "
                        f"{type(qconfig_spec).__name__}; {_SPEC_HELP}.")
    for key, value in qconfig_spec.items():
        if not (isinstance(key, str) or isinstance(key, type) and issubclass(key, Module)):
            raise TypeError(f"quantize_dynamic: qconfig_spec entry {key!r} is neither a module "
                            f"type nor a submodule name; {_SPEC_HELP}.")
        _checked_qconfig(value, f"quantize_dynamic: qconfig_spec[{_named(key)}]")
    return qconfig_spec


def _checked_qconfig(value, where):
    if value is None:
        return None
    if not isinstance(value, QConfig):
        raise TypeError(f"{where} is {value!r}, not a QConfig: use "
                        f"lk.quantization.default_dynamic_qconfig (per tensor), "
                        f"per_channel_dynamic_qconfig, or None to keep the module float.")
    return value.check(where)


def _mapping(mapping):
    if mapping is None:
        return get_default_dynamic_quant_module_mappings()
    for float_type, quantized in dict(mapping).items():
        if not callable(getattr(quantized, "from_float", None)):
            raise TypeError(f"quantize_dynamic: mapping[{_named(float_type)}] is {quantized!r}, "
                            f"which has no from_float(module) to build the quantized module "
                            f"with (as lk.nn.quantized.dynamic.Linear has)")
    return dict(mapping)


def _named(key):
    """A qconfig_spec or mapping key as a person reads it: 'fc1', or Linear for a type."""
    return key.__name__ if isinstance(key, type) else repr(key)


def _check_names(model, spec):
    """Each name in ``spec`` must name a submodule, by its first name if it is shared."""
    every = list(model.named_modules(remove_duplicate=False))
    found, first = dict(every), {}
    for name, m in every:
        first.setdefault(id(m), name)
    for key in (k for k in spec if isinstance(k, str)):
        if key not in found:
            raise ValueError(_unknown_name(key, [n for n, _ in every]))
        if first[id(found[key])] != key:
            raise ValueError(f"quantize_dynamic: qconfig_spec names submodule {key!r}, which is "
                             f"the same module as {first[id(found[key])]!r} (shared); a shared "
                             f"module is quantized as its first name says, as in PyTorch: name "
                             f"{first[id(found[key])]!r} instead.")


def _unknown_name(key, names):
    near = difflib.get_close_matches(key, names, n=3)
    hint = f"did you mean {', '.join(map(repr, near))}? " if near else ""
    shown = ", ".join(repr(n) for n in names[:12]) + (", ..." if len(names) > 12 else "")
    return (f"quantize_dynamic: qconfig_spec names submodule {key!r}, which the model does not "
            f"have; {hint}its submodules are {shown} ('' is the model itself, as in "
            f"named_modules()).")


# ---- the walk ----------------------------------------------------------------------------------
def _qconfig_for(module, path, inherited, spec):
    """PyTorch's order: the entry for the module's type, else its parent's; the entry for its
    name wins over both, and a ``qconfig`` attribute set on the module over everything."""
    qconfig = spec.get(path, spec.get(type(module), inherited))
    own = module.__dict__.get("qconfig", qconfig)
    return _checked_qconfig(own, f"quantize_dynamic: {path or 'the model'}.qconfig")


def _convert(module, prefix, inherited, spec, mapping, done, left):
    """Replace each module below ``module`` as ``_replaced`` says; a module reached twice
    (shared) becomes one quantized module, reached twice."""
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        if id(child) not in done:
            path = f"{prefix}.{name}" if prefix else name
            qconfig = _qconfig_for(child, path, inherited, spec)
            _convert(child, path, qconfig, spec, mapping, done, left)
            done[id(child)] = _replaced(child, path, qconfig, mapping, left)
        if done[id(child)] is not child:
            setattr(module, name, done[id(child)])


def _replaced(module, path, qconfig, mapping, left):
    """``module`` quantized if its qconfig is not None and its type is mapped, else itself;
    one that PyTorch would have quantized and labkit cannot goes into ``left``."""
    if qconfig is None:
        return module
    if type(module) in mapping:
        return _swap(module, qconfig, mapping)
    if type(module) in _PYTORCH_ONLY:
        left.append((path, module))
    return module


def _swap(module, qconfig, mapping):
    """``mapping[type(module)].from_float(module)`` with ``module.qconfig`` set while it runs
    (PyTorch's protocol); the module's forward hooks carry over, as in PyTorch."""
    had = "qconfig" in module.__dict__
    module.__dict__["qconfig"] = qconfig
    try:
        new = mapping[type(module)].from_float(module)
    finally:
        if not had:
            del module.__dict__["qconfig"]
    new._forward_pre_hooks.update(module._forward_pre_hooks)
    new._forward_hooks.update(module._forward_hooks)
    return new
