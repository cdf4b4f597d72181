"""Containers: ``Sequential`` (a chain of layers), ``ModuleList`` and ``ModuleDict`` (layers
registered by position or key), ``ParameterList`` and ``ParameterDict`` (parameters likewise),
with PyTorch's list and dict methods."""
import operator

from ..graph.guards import module_changed
from ..tensor.tensor import Tensor
from .module import Module, _indent
from .parameter import Parameter


def _check_module(obj, where):
    if not isinstance(obj, Module):
        raise TypeError(f"{where}: {type(obj).__name__} is not an lk.nn.Module (got {obj!r}); "
                        f"wrap plain functions in a Module subclass")
    return obj


def _position(index, length, where):
    i = operator.index(index)
    if not -length <= i < length:
        raise IndexError(f"{where}: index {index} is out of range for {length} items")
    return i % length


class _Indexed(Module):
    """Modules registered under '0', '1', ... in order (Sequential and ModuleList)."""

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return self._modules[str(_position(index, len(self), type(self).__name__))]

    def __setitem__(self, index, module):
        i = _position(index, len(self), type(self).__name__)
        self.add_module(str(i), _check_module(module, type(self).__name__))

    def __delitem__(self, index):
        items = list(self._modules.values())
        if isinstance(index, slice):
            del items[index]
        else:
            del items[_position(index, len(self), type(self).__name__)]
        self._renumber(items)

    def _renumber(self, items):
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), _check_module(module, f"{type(self).__name__}.append"))
        return self

    def extend(self, modules):
        """Add each of ``modules`` at the end; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Put ``module`` before position ``index``."""
        items = list(self._modules.values())
        items.insert(index, _check_module(module, f"{type(self).__name__}.insert"))
        self._renumber(items)
        return self

    def pop(self, index=-1):
        """Remove and return the module at ``index`` (the last by default)."""
        module = self[index]
        del self[index]
        return module

    def __iadd__(self, other):
        return self.extend(other)

    def __add__(self, other):
        combined = type(self)()
        for m in list(self) + list(other):
            combined.append(m)
        return combined

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_Indexed):
    """Layers applied one after another; ``Sequential(a, b)(x)`` is ``b(a(x))``.

    Layers are named '0', '1', ... (or by the keys of a dict passed as the only argument).

    >>> import labkit as lk
    >>> net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
    >>> net(lk.ones(5, 4)).shape
    (5, 2)
    >>> net[0]
    Linear(in_features=4, out_features=8, bias=True)
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], dict):
            for name, layer in args[0].items():
                self.add_module(str(name), _check_module(layer, "Sequential"))
        else:
            for i, layer in enumerate(args):
                self.add_module(str(i), _check_module(layer, "Sequential"))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(dict(list(self._modules.items())[index]))
        return list(self._modules.values())[_position(index, len(self), "Sequential")]

    def __setitem__(self, index, module):
        key = list(self._modules)[_position(index, len(self), "Sequential")]
        self.add_module(key, _check_module(module, "Sequential"))

    def forward(self, input):
        for layer in self._modules.values():
            input = layer(input)
        return input


class ModuleList(_Indexed):
    """A list of modules whose parameters are registered (a plain Python list's would not be).

    >>> import labkit as lk
    >>> blocks = lk.nn.ModuleList([lk.nn.Linear(2, 2) for _ in range(3)])
    >>> len(list(blocks.parameters()))
    6
    >>> blocks
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
    )
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __repr__(self):
        reprs = [repr(m) for m in self]
        if not reprs:
            return "ModuleList()"
        runs = []                        # [first, last, text]: repeated blocks shown once
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [_indent(f"({a}): {t}" if a == b else f"({a}-{b}): {b - a + 1} x {t}", 2)
                 for a, b, t in runs]
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules whose parameters are registered, in insertion order.

    >>> import labkit as lk
    >>> heads = lk.nn.ModuleDict({"cls": lk.nn.Linear(4, 3), "box": lk.nn.Linear(4, 4)})
    >>> heads["box"](lk.ones(1, 4)).shape, list(heads)
    ((1, 4), ['cls', 'box'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, _check_module(module, "ModuleDict"))

    def __delitem__(self, key):
        del self._modules[key]
        module_changed()           # traces that called it no longer fit

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()
        module_changed()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add or replace entries from a dict, a ModuleDict or (key, module) pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module


def _as_parameter(value):
    """Tensors become Parameters (as in PyTorch's containers); other values stay as they are."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


# PyTorch's legacy tensor type names, which ParameterDict's repr shows
_TYPE_NAMES = {"float16": "HalfTensor", "float32": "FloatTensor", "float64": "DoubleTensor",
               "int8": "CharTensor", "int16": "ShortTensor", "int32": "IntTensor",
               "int64": "LongTensor", "uint8": "ByteTensor", "bool_": "BoolTensor"}


def _describe_entry(key, value, typename):
    """A line of ParameterList's (dtype) or ParameterDict's (type name) repr."""
    if isinstance(value, Tensor):
        size = "x".join(str(s) for s in value.shape)
        where = f" ({value.device.name})" if value.device.type != "cpu" else ""
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        what = f"lk.{_TYPE_NAMES[value.dtype.name]}" if typename else f"{value.dtype}"
        return f"  ({key}): {kind} containing: [{what} of size {size}{where}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class _ParameterContainer(Module):
    """Entries stored as attributes named by their keys: Parameters registered, others kept."""

    def _put(self, key, value):
        value = _as_parameter(value)
        if isinstance(value, Parameter):
            self.register_parameter(key, value)
        else:
            self._forget(key)
            object.__setattr__(self, key, value)
        if key not in self._order:
            self._order.append(key)

    def _get(self, key):
        if key not in self._order:
            raise KeyError(key)
        return getattr(self, key)

    _typename = False

    def extra_repr(self):
        return "\n".join(_describe_entry(k, self._get(k), self._typename)
                         for k in self._order)

    def __len__(self):
        return len(self._order)


class ParameterList(_ParameterContainer):
    """A list of parameters registered in order (tensors given become Parameters).

    >>> import labkit as lk
    >>> scales = lk.nn.ParameterList([lk.nn.Parameter(lk.ones(2)) for _ in range(3)])
    >>> len(list(scales.parameters())), [n for n, _ in scales.named_parameters()][:2]
    (3, ['0', '1'])
    """

    def __init__(self, values=None):
        super().__init__()
        self.__dict__["_order"] = []
        if values is not None:
            self.extend(values)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList([self._get(k) for k in self._order[index]])
        return self._get(str(_position(index, len(self), "ParameterList")))

    def __setitem__(self, index, value):
        self._put(str(_position(index, len(self), "ParameterList")), value)

    def __iter__(self):
        return iter(self._get(k) for k in self._order)

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Add ``value`` at the end; returns self."""
        self._put(str(len(self)), value)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self


class ParameterDict(_ParameterContainer):
    """A dict of parameters registered by key, in insertion order.

    >>> import labkit as lk
    >>> p = lk.nn.ParameterDict({"scale": lk.nn.Parameter(lk.ones(2)), "shift": lk.zeros(2)})
    >>> sorted(n for n, _ in p.named_parameters()), type(p["shift"]).__name__
    (['scale', 'shift'], 'Parameter')
    """

    _typename = True

    def __init__(self, parameters=None):
        super().__init__()
        self.__dict__["_order"] = []
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._get(key)

    def __setitem__(self, key, value):
        self._put(key, value)

    def __delitem__(self, key):
        self._get(key)
        self._order.remove(key)
        self._forget(key)

    def __iter__(self):
        return iter(list(self._order))

    def __contains__(self, key):
        return key in self._order

    def keys(self):
        return list(self._order)

    def values(self):
        return [self._get(k) for k in self._order]

    def items(self):
        return [(k, self._get(k)) for k in self._order]

    def get(self, key, default=None):
        return self._get(key) if key in self._order else default

    def pop(self, key):
        value = self._get(key)
        del self[key]
        return value

    def clear(self):
        for k in list(self._order):
            del self[k]

    def update(self, parameters):
        """Add or replace entries from a dict or (key, value) pairs."""
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value
