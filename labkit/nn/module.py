"""``Module``: the base class of every layer and model, as in PyTorch.

A model is a plain Python class. Assigning a ``Parameter`` or another ``Module`` to an attribute
registers it, so ``parameters()``, ``state_dict()``, ``to(device)``, ``train()`` / ``eval()`` and
``zero_grad()`` find it without any bookkeeping by the author.

>>> import labkit as lk
>>> class MLP(lk.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.hidden = lk.nn.Linear(4, 8)
...         self.out = lk.nn.Linear(8, 2)
...     def forward(self, x):
...         return self.out(lk.relu(self.hidden(x)))
>>> model = MLP()
>>> model(lk.ones(3, 4)).shape
(3, 2)
>>> list(model.state_dict())
['hidden.weight', 'hidden.bias', 'out.weight', 'out.bias']
"""
from typing import NamedTuple

import numpy as np

from ..devices import Device, get_device, transfer
from ..errors import DTypeError, LabkitError
from ..tensor.dtypes import as_dtype
from ..tensor.tensor import Tensor
from .parameter import Parameter


class StateDictError(LabkitError, RuntimeError):
    """A state dict that does not fit a model (missing or unexpected keys, other shapes)."""


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys it could not match (empty when strict)."""
    missing_keys: list
    unexpected_keys: list


def _no_init_error(module, name):
    return AttributeError(
        f"cannot assign '{name}' before {type(module).__name__}.__init__ has called "
        f"super().__init__(): add super().__init__() as the first line of __init__.")


class Module:
    """Base class for layers and models: subclass it, assign layers in ``__init__``, define
    ``forward``. Calling the module calls ``forward``.

    >>> import labkit as lk
    >>> class Affine(lk.nn.Module):
    ...     def __init__(self, n):
    ...         super().__init__()
    ...         self.w = lk.nn.Parameter(lk.ones(n))
    ...         self.b = lk.nn.Parameter(lk.zeros(n))
    ...     def forward(self, x):
    ...         return x * self.w + self.b
    >>> Affine(3)(lk.tensor([1.0, 2.0, 3.0])).tolist()
    [1.0, 2.0, 3.0]
    """

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_persistent"] = set()
        d["_modules"] = {}
        d["training"] = True

    # ---- calling --------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(): define forward(self, ...) in your Module "
            f"subclass; calling the module runs it.")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- attribute registration -----------------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise _no_init_error(self, name)
            self._forget(name, keep="_parameters")
            params[name] = value
            _name_parameters(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise _no_init_error(self, name)
            self._forget(name, keep="_modules")
            d["_modules"][name] = value
            _name_parameters(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} to '{name}', a parameter of "
                    f"{type(self).__name__}: assign an lk.nn.Parameter (e.g. "
                    f"lk.nn.Parameter(t)) or None, or load values with load_state_dict")
            params[name] = None
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} to '{name}', a submodule "
                                f"of {type(self).__name__}: assign a Module or None")
            d["_modules"][name] = None
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} to buffer '{name}' of "
                                f"{type(self).__name__}: assign a Tensor or None")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Unregister ``name`` everywhere except ``keep`` (so a replaced layer keeps its place)."""
        d = self.__dict__
        d.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                d[registry].pop(name, None)
        d["_persistent"].discard(name)

    def __getattr__(self, name):   # only called when normal lookup fails
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            table = d.get(registry)
            if table is not None and name in table:
                return table[name]
        if "_parameters" not in d and name in ("_parameters", "_buffers", "_modules",
                                               "_persistent", "training"):
            raise AttributeError(f"{type(self).__name__} was not initialised: call "
                                 f"super().__init__() at the start of its __init__")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if name in d[registry]:
                del d[registry][name]
                d["_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter or None) under ``name``; same as assigning it."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter('{name}', ...) needs an lk.nn.Parameter or "
                            f"None, got {type(param).__name__}; wrap it: lk.nn.Parameter(t)")
        self._forget(name, keep="_parameters")
        self._parameters[name] = param
        if param is not None:
            _name_parameters(name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Register a tensor that is state but not trained (e.g. running statistics).

        Buffers move with ``to(device)`` and, if ``persistent``, appear in ``state_dict()``.
        """
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer('{name}', ...) needs a Tensor or None, got "
                            f"{type(tensor).__name__}")
        self._forget(name, keep="_buffers")
        self._buffers[name] = tensor
        if persistent:
            self._persistent.add(name)

    def add_module(self, name, module):
        """Register ``module`` as a child under ``name`` (same as assigning it)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module('{name}', ...) needs a Module, got "
                            f"{type(module).__name__}")
        self._forget(name, keep="_modules")
        self._modules[name] = module
        if module is not None:
            _name_parameters(name, module)

    register_module = add_module

    # ---- walking the tree -----------------------------------------------------------------------
    def _walk(self, prefix="", remove_duplicate=True):
        """(qualified name, module) pairs in pre-order; iterative, no recursion limit."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in seen:
                    continue
                seen.add(id(module))
            yield name, module
            children = [(f"{name}.{k}" if name else k, m) for k, m in module._modules.items()
                        if m is not None]
            stack.extend(reversed(children))

    def named_modules(self, prefix=""):
        """(name, module) for this module ('') and every descendant, each once."""
        return self._walk(prefix)

    def modules(self):
        """This module and every descendant, each once."""
        for _, m in self._walk():
            yield m

    def named_children(self):
        """(name, module) for the direct submodules."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """The direct submodules."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix="", recurse=True):
        seen = set()
        walk = self._walk(prefix) if recurse else [(prefix, self)]
        for mod_name, module in walk:
            for name, t in getattr(module, registry).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mod_name}.{name}" if mod_name else name), t

    def named_parameters(self, prefix="", recurse=True):
        """(qualified name, Parameter) pairs; a parameter shared by two layers appears once.

        >>> import labkit as lk
        >>> [n for n, _ in lk.nn.Linear(2, 3).named_parameters()]
        ['weight', 'bias']
        """
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        """Every Parameter of this module and its descendants (what an optimiser needs)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self):
        """The number of trainable values (elements of every parameter).

        >>> import labkit as lk
        >>> lk.nn.Linear(3, 2).num_parameters()
        8
        """
        return sum(p.numel() for p in self.parameters())

    def apply(self, fn):
        """Call ``fn(module)`` on every descendant and then on this module; returns self."""
        for m in reversed(list(self.modules())):
            fn(m)
        return self

    # ---- modes and gradients --------------------------------------------------------------------
    def train(self, mode=True):
        """Training mode (dropout active) for this module and every descendant; returns self."""
        for m in self.modules():
            m.__dict__["training"] = bool(mode)
        return self

    def eval(self):
        """Evaluation mode (dropout off); same as ``train(False)``. Returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Switch gradient tracking of every parameter (e.g. to freeze a layer); returns self."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        """Clear every parameter's ``.grad`` (to None, or to zeros if ``set_to_none=False``)."""
        for p in self.parameters():
            if set_to_none:   # even when already None: a trace records the clear
                p.grad = None
            elif p.grad is not None:
                xp = p.device.xp
                p.grad = Tensor._make(xp.zeros_like(p._data), p.device)

    # ---- devices and dtypes ---------------------------------------------------------------------
    def to(self, device=None, dtype=None):
        """Move every parameter and buffer to ``device`` and/or cast floating ones to ``dtype``,
        in place (the Parameter objects stay the same, so an optimiser keeps working if it is
        created after the move). Returns self.

        >>> import labkit as lk
        >>> lk.nn.Linear(2, 2).to(dtype=lk.float64).weight.dtype
        lk.float64
        """
        if dtype is None and device is not None and not isinstance(device, Device):
            try:                                   # model.to(lk.float64) / model.to("float64")
                dtype, device = as_dtype(device), None
            except (DTypeError, TypeError):
                pass
        dev = get_device(device) if device is not None else None
        dt = as_dtype(dtype) if dtype is not None else None
        if dt is not None and not dt.is_floating:
            raise DTypeError(f"Module.to(dtype={dt}): parameters must stay floating-point; "
                             f"use lk.float16, lk.float32 or lk.float64")
        for t in list(self.parameters()) + list(self.buffers()):
            _move(t, dev, dt)
            if t.grad is not None:
                _move(t.grad, dev, dt)
        return self

    def cpu(self):
        return self.to("cpu")

    def double(self):
        """Cast floating parameters and buffers to float64 (handy for gradient checks)."""
        return self.to(dtype="float64")

    def float(self):
        return self.to(dtype="float32")

    # ---- state ----------------------------------------------------------------------------------
    def _state_items(self):
        """(key, tensor) for every parameter and persistent buffer, shared ones under each name."""
        for mod_name, module in self._walk(remove_duplicate=False):
            prefix = f"{mod_name}." if mod_name else ""
            for name, p in module._parameters.items():
                if p is not None:
                    yield prefix + name, p
            for name, b in module._buffers.items():
                if b is not None and name in module._persistent:
                    yield prefix + name, b

    def state_dict(self):
        """A dict of every parameter and persistent buffer by qualified name.

        The values are detached tensors sharing memory with the model (as in PyTorch): copy them,
        or save them with ``lk.save``, to keep a snapshot.

        >>> import labkit as lk
        >>> {k: v.shape for k, v in lk.nn.Linear(2, 3).state_dict().items()}
        {'weight': (3, 2), 'bias': (3,)}
        """
        return {k: t.detach() for k, t in self._state_items()}

    def load_state_dict(self, state_dict, strict=True):
        """Copy values from ``state_dict`` into this model's parameters and buffers, in place.

        With ``strict=True`` (default) the keys must match exactly; with ``strict=False`` only
        the matching keys are loaded and the rest are returned. A shape mismatch is always an
        error. Nothing is changed when an error is raised. Values may be Tensors or NumPy
        arrays; they are copied to each parameter's device and dtype.

        >>> import labkit as lk
        >>> a, b = lk.nn.Linear(2, 3), lk.nn.Linear(2, 3)
        >>> b.load_state_dict(a.state_dict())
        IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        >>> bool((a.weight == b.weight).all())
        True
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict expects a dict of name -> tensor (from "
                            f"model.state_dict()), got {type(state_dict).__name__}")
        own = dict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        for key, target in own.items():
            if key in state_dict:
                shape = tuple(getattr(state_dict[key], "shape", np.shape(state_dict[key])))
                if shape != tuple(target.shape):
                    mismatched.append((key, tuple(target.shape), shape))
        if mismatched or (strict and (missing or unexpected)):
            raise StateDictError(self._mismatch_text(missing, unexpected, mismatched, strict))
        for key, target in own.items():
            if key in state_dict:
                _copy_into(target, state_dict[key])
        return IncompatibleKeys(missing, unexpected)

    def _mismatch_text(self, missing, unexpected, mismatched, strict):
        lines = [f"load_state_dict: the state dict does not fit this {type(self).__name__}."]
        if strict and missing:
            lines.append(f"  missing keys (in the model, not in the state dict): "
                         f"{', '.join(missing)}")
        if strict and unexpected:
            lines.append(f"  unexpected keys (in the state dict, not in the model): "
                         f"{', '.join(unexpected)}")
        for key, want, got in mismatched:
            lines.append(f"  shape mismatch for {key}: the model has {want}, the state dict "
                         f"{got}")
        lines.append("Nothing was loaded. Check that the model is built with the same layer "
                     "sizes as the one that was saved"
                     + ("; load_state_dict(..., strict=False) loads the matching keys and "
                        "reports the others" if strict and (missing or unexpected) else "")
                     + ".")
        return "\n".join(lines)

    # ---- printing -------------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside this module's parentheses in its repr (layers override it)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): {_indent(repr(m), 2)}" for name, m in self._modules.items()]
        name = type(self).__name__
        if not children:
            return f"{name}({extra})" if len(lines) <= 1 else \
                f"{name}(\n  " + "\n  ".join(lines) + "\n)"
        return f"{name}(\n  " + "\n  ".join(lines + children) + "\n)"

    def _repr_html_(self):        # notebook display; viz is imported only when shown
        from ..viz.html import module_html
        return module_html(self)


def _indent(text, spaces):
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


def _move(t, device, dtype):
    """Move/cast a tensor's storage in place (keeps the object, so references stay valid)."""
    if dtype is not None and t.dtype.is_floating and t.dtype is not dtype:
        t._data = t._data.astype(dtype.np)
    if device is not None and device is not t._device:
        t._data = transfer(t._data, t._device, device)
        t._device = device


def _copy_into(target, value):
    """Copy ``value`` (Tensor or array) into ``target``'s storage, on its device and dtype."""
    if isinstance(value, Tensor):
        src_device, array = value.device, value._data
    else:
        src_device, array = get_device("cpu:0"), np.asarray(value)
    array = transfer(array, src_device, target.device)
    xp = target.device.xp
    xp.copyto(target._data, array.astype(target._data.dtype, copy=False))


def _name_parameters(name, value):
    """Name a Parameter registered as ``name``, or prefix the names of a module's parameters
    with it (a module attached to a parent later gets the parent's prefix in turn)."""
    if isinstance(value, Parameter):
        value.name = name
    else:
        for qualified, p in value.named_parameters():
            p.name = f"{name}.{qualified}"
