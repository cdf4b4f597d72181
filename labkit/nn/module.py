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
import re
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from .. import display
from ..devices import Device, get_device, transfer
from ..errors import DTypeError, LabkitError, hide_internal_frames
from ..graph.capture import _UNSET, current_graph, note_attribute
from ..graph import guards
from ..graph.symbolic import SymbolicTensor
from ..tensor.dtypes import DType, as_dtype
from ..tensor.tensor import Tensor
from .hooks import BackwardHookCall, add_hook
from .parameter import Parameter

_running = threading.local()      # .stack: the modules whose forward is being captured
# what Module.__init__ sets up (asked for before it ran: super().__init__() was not called)
_STATE = ("_parameters", "_buffers", "_modules", "_persistent", "training", "_forward_pre_hooks",
          "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_REGISTRIES = ("_modules", "_parameters", "_buffers")
# what a trace does not guard by value (labkit/graph/guards.py): the registries (their tensors
# and modules are read by reference or guarded where called) and the hook tables (by size)
_UNGUARDED = frozenset(_STATE) - {"training"} | {"_compiled_call"}


class StateDictError(LabkitError, RuntimeError):
    """A state dict that does not fit a model (missing or unexpected keys, other shapes)."""


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys it could not match (empty when strict)."""
    missing_keys: list
    unexpected_keys: list

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"IncompatibleKeys(missing_keys={self.missing_keys}, " \
               f"unexpected_keys={self.unexpected_keys})"


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
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()

    # ---- calling --------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(): define forward(self, ...) in your Module "
            f"subclass; calling the module runs it.")

    def __call__(self, *args, **kwargs):
        """Run ``forward`` (with the hooks, if any). Under graph capture the call's nodes are
        in a name scope named by the module's attribute path in the module that called it
        (``encoder/layers.0/attn``); the outermost module called adds no scope. After
        ``compile()``, the compiled call runs instead."""
        try:
            compiled = self.__dict__.get("_compiled_call")
            if compiled is not None:
                return compiled(*args, **kwargs)
            if (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                    or self._backward_pre_hooks or current_graph() is not None):
                return self._call_impl(args, kwargs)
            return self.forward(*args, **kwargs)
        except Exception as e:      # show the user's frames (their forward), not labkit's
            hide_internal_frames(e)
            raise

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place, with ``lk.compile``'s arguments (PyTorch's
        ``Module.compile``): its parameters, ``state_dict()`` keys and type stay as they are,
        and calling it runs the compiled call (``module._compiled_call``: ``.traces``,
        ``.explain()``).

        >>> import labkit as lk
        >>> layer = lk.nn.Linear(2, 1)
        >>> layer.compile()
        >>> layer(lk.ones(3, 2)).shape, len(layer._compiled_call.traces), list(layer.state_dict())
        ((3, 1), 1, ['weight', 'bias'])
        """
        from .compiled import compile_calls
        self.__dict__["_compiled_call"] = compile_calls(self, *args, **kwargs)

    def _call_impl(self, args, kwargs):
        graph = current_graph()
        if graph is None:
            return self._hooked_forward(args, kwargs)
        stack = getattr(_running, "stack", None)
        if stack is None:
            stack = _running.stack = []
        scope = self._scope_in(stack[-1]) if stack else None
        if guards.recording():     # the trace reads this module's attributes, mode and hooks
            self._guard(graph, scope)
        stack.append(self)
        try:
            if scope is None:
                return self._hooked_forward(args, kwargs)
            with graph.name_scope(scope):
                # which class made this scope, for pictures: "conv1 (Conv2d)"
                types = graph.__dict__.setdefault("module_types", {})
                types.setdefault("/".join(graph._scope), type(self).__name__)
                return self._hooked_forward(args, kwargs)
        finally:
            stack.pop()

    def _guard(self, graph, scope):
        path = "/".join(graph._scope + ([scope] if scope else []))
        where = f" (module {path})" if path else ""
        name = type(self).__name__
        guards.record_attributes(self, (f"{name}.", where), skip=_UNGUARDED, mode_key="training")
        for table in _HOOKS:
            guards.guard_size(self.__dict__[table], f"{table[1:].replace('_', ' ')} of "
                              f"{name}{where}")
        # a layer, parameter or buffer added or replaced anywhere below (in a ModuleList the
        # trace iterated, which it did not call): each registry's size and entries
        stack = [(path, self)]
        while stack:
            at, m = stack.pop()
            if guards.guarded(m.__dict__["_modules"]):
                continue                       # this subtree is guarded already
            kind, where = type(m).__name__, f" (module {at})" if at else ""
            for table in _REGISTRIES:
                entries = m.__dict__[table]
                guards.guard_size(entries, f"{table[1:]} of {kind}{where}")
                for key in entries:
                    guards.guard_entry(entries, key, f"{kind}.{key}{where}", guards.IDENTITY,
                                       guards.MODULES)
            stack.extend((f"{at}.{k}" if at else k, c) for k, c in m._modules.items()
                         if c is not None)

    def _scope_in(self, caller):
        """This module's attribute path inside ``caller`` (its class name if it is not there)."""
        if caller is self:
            return None
        for name, m in caller._walk():
            if m is self:
                return name
        return type(self).__name__

    def _hooked_forward(self, args, kwargs):
        for hook, opts in list(self._forward_pre_hooks.values()):
            if opts["with_kwargs"]:
                new = hook(self, args, kwargs)
                if new is not None:
                    if not (isinstance(new, tuple) and len(new) == 2):
                        raise TypeError(f"{type(self).__name__}: a forward pre-hook registered "
                                        f"with_kwargs=True must return None or (args, kwargs)")
                    args, kwargs = new
            else:
                new = hook(self, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        call = None
        if self._backward_hooks or self._backward_pre_hooks:
            call = BackwardHookCall(self)
            args = call.setup_inputs(args)
        result = self.forward(*args, **kwargs)
        for hook, opts in list(self._forward_hooks.values()):
            new = hook(self, args, kwargs, result) if opts["with_kwargs"] else \
                hook(self, args, result)
            if new is not None:
                result = new
        if call is not None:
            result = call.setup_outputs(result)
        return result

    # ---- hooks ----------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before every ``forward``; it may return new ``args`` (a
        tuple, or a single value that becomes a 1-tuple), or None to keep them. With
        ``with_kwargs=True`` it is ``hook(module, args, kwargs)`` returning None or
        ``(args, kwargs)``. Hooks run in registration order (``prepend=True`` puts this one
        first). Returns a handle whose ``remove()`` unregisters it.

        >>> import labkit as lk
        >>> layer = lk.nn.Identity()
        >>> h = layer.register_forward_pre_hook(lambda m, args: args[0] * 2)
        >>> layer(lk.ones(2)).tolist()
        [2.0, 2.0]
        >>> h.remove(); layer(lk.ones(2)).tolist()
        [1.0, 1.0]
        """
        return add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs=with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Call ``hook(module, args, output)`` after every ``forward`` (``hook(module, args,
        kwargs, output)`` with ``with_kwargs=True``); a value it returns replaces the output.
        Returns a handle whose ``remove()`` unregisters it.

        >>> import labkit as lk
        >>> net = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.ReLU())
        >>> shapes = []
        >>> h = net[0].register_forward_hook(lambda m, args, out: shapes.append(out.shape))
        >>> _ = net(lk.ones(2, 3)); shapes
        [(2, 4)]
        """
        return add_hook(self._forward_hooks, hook, prepend, with_kwargs=with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients with respect to
        the module's positional tensor inputs have been computed: tuples with one entry per
        input / output (None for what is not a tensor or needs no gradient). It may return a
        new ``grad_input`` tuple, used in their place. Under graph capture it runs once, when
        the backward pass is traced, with symbolic tensors.

        >>> import labkit as lk
        >>> layer = lk.nn.Linear(3, 2)
        >>> seen = []
        >>> h = layer.register_full_backward_hook(
        ...     lambda m, gin, gout: seen.append((gin[0].shape, gout[0].shape)))
        >>> layer(lk.ones(4, 3, requires_grad=True)).sum().backward(); seen
        [((4, 3), (4, 2))]
        """
        return add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients with respect to the module's
        outputs have been computed; it may return a new ``grad_output`` tuple."""
        return add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        raise NotImplementedError(
            "register_backward_hook is PyTorch's deprecated form (its grad_input is that of the "
            "module's last op); use register_full_backward_hook(hook), which has the same "
            "signature and gives the gradients of the module's inputs")

    # ---- attribute registration -----------------------------------------------------------------
    _guard_epoch = guards.MODULES    # traces guarding module attributes look again when it moves

    def __setattr__(self, name, value):
        guards.MODULES[0] += 1
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, SymbolicTensor):     # set inside a trace: lk.function sets it back
            buffers = d.get("_buffers") or {}
            note_attribute(self, name, value,
                           buffers[name] if name in buffers else d.get(name, _UNSET))
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
        guards.MODULES[0] += 1        # (every registration passes here)
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
        if "_parameters" not in d and name in _STATE:
            raise AttributeError(f"{type(self).__name__} was not initialised: call "
                                 f"super().__init__() at the start of its __init__")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        guards.MODULES[0] += 1
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
        _check_name("parameter", name)
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
        _check_name("buffer", name)
        if name not in self._buffers and hasattr(self, name):
            raise KeyError(f"register_buffer: attribute '{name}' already exists on "
                           f"{type(self).__name__}; delete it first or pick another name")
        self._forget(name, keep="_buffers")
        self._buffers[name] = tensor
        if persistent:
            self._persistent.add(name)
        else:
            self._persistent.discard(name)

    def add_module(self, name, module):
        """Register ``module`` as a child under ``name`` (same as assigning it)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module('{name}', ...) needs a Module, got "
                            f"{type(module).__name__}")
        _check_name("module", name)
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

    def _each_module(self):
        """Each module of the tree once, in ``_walk``'s order, without making names."""
        seen = set()
        stack = [self]
        while stack:
            module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield module
            children = [m for m in module._modules.values() if m is not None]
            stack.extend(reversed(children))

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module ('') and every descendant, each once (every time it
        is reached with ``remove_duplicate=False``)."""
        for name, m in self._walk(prefix, remove_duplicate):
            if memo is not None:
                if m in memo:
                    continue
                memo.add(m)
            yield name, m

    def modules(self):
        """This module and every descendant, each once."""
        return self._each_module()

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

    def _named_members(self, registry, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        walk = self._walk(prefix, remove_duplicate) if recurse else [(prefix, self)]
        for mod_name, module in walk:
            for name, t in getattr(module, registry).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{mod_name}.{name}" if mod_name else name), t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(qualified name, Parameter) pairs; a parameter shared by two layers appears once.

        >>> import labkit as lk
        >>> [n for n, _ in lk.nn.Linear(2, 3).named_parameters()]
        ['weight', 'bias']
        """
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Every Parameter of this module and its descendants (what an optimiser needs), in
        ``named_parameters``' order, each once."""
        seen = set()
        for module in self._each_module() if recurse else (self,):
            for p in module._parameters.values():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(qualified name, buffer) pairs, persistent or not (running statistics...).

        >>> import labkit as lk
        >>> [n for n, _ in lk.nn.BatchNorm1d(3).named_buffers()]
        ['running_mean', 'running_var', 'num_batches_tracked']
        """
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Every buffer of this module and its descendants."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        """The submodule at the dotted path ``target`` ('' is this module).

        >>> import labkit as lk
        >>> net = lk.nn.Sequential(lk.nn.Linear(2, 3), lk.nn.ReLU())
        >>> net.get_submodule("1")
        ReLU()
        """
        module = self
        if target == "":
            return module
        walked = []
        for part in target.split("."):
            child = module._modules.get(part) if isinstance(module, Module) else None
            if child is None:
                where = ".".join(walked) or "the model"
                raise AttributeError(
                    f"get_submodule({target!r}): {type(module).__name__} ({where}) has no "
                    f"submodule {part!r}; it has {sorted(module._modules) or 'none'}")
            walked.append(part)
            module = child
        return module

    def _get_member(self, target, registry, what):
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        table = getattr(module, registry)
        if name not in table:
            raise AttributeError(f"get_{what}({target!r}): {type(module).__name__} has no "
                                 f"{what} {name!r}; it has {sorted(table) or 'none'}")
        return table[name]

    def get_parameter(self, target):
        """The parameter at the dotted path ``target`` (``'encoder.0.weight'``)."""
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` (``'bn.running_mean'``)."""
        return self._get_member(target, "_buffers", "buffer")

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
        """Training mode (dropout active, batch statistics) for this module and, through their
        own ``train``, every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(mode): mode must be True or False, got {mode!r}")
        self.__dict__["training"] = mode
        guards.MODULES[0] += 1
        for m in self.children():
            m.train(mode)
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
    def to(self, *args, **kwargs):
        """Move every parameter and buffer to a device and/or cast the floating ones to a
        dtype, in place (the Parameter objects stay the same, so an optimiser keeps working if
        it is created after the move). Returns self. PyTorch's forms: ``to(device)``,
        ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` (its device and dtype),
        ``to(device=..., dtype=...)``; ``non_blocking`` is accepted.

        >>> import labkit as lk
        >>> lk.nn.Linear(2, 2).to(dtype=lk.float64).weight.dtype
        lk.float64
        >>> lk.nn.Linear(2, 2).to(lk.zeros(1, dtype=lk.float64)).bias.dtype
        lk.float64
        """
        device, dtype = _to_args(args, kwargs)
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
        """Move parameters and buffers to the CPU; returns self."""
        return self.to("cpu")

    def cuda(self, device=None):
        """Move parameters and buffers to the GPU (``device``: an index or name); returns self."""
        return self.to(f"gpu:{device}" if isinstance(device, int) else (device or "gpu"))

    def half(self):
        """Cast floating parameters and buffers to float16; returns self."""
        return self.to(dtype="float16")

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16; returns self."""
        return self.to(dtype="bfloat16")

    def double(self):
        """Cast floating parameters and buffers to float64 (handy for gradient checks)."""
        return self.to(dtype="float64")

    def float(self):
        """Cast floating parameters and buffers to float32; returns self."""
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

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """A dict of every parameter and persistent buffer by qualified name (``prefix``
        before each; into ``destination`` if given).

        The values are detached tensors sharing memory with the model (as in PyTorch; the
        tensors themselves with ``keep_vars=True``): copy them, or save them with ``lk.save``,
        to keep a snapshot.

        >>> import labkit as lk
        >>> {k: v.shape for k, v in lk.nn.Linear(2, 3).state_dict().items()}
        {'weight': (3, 2), 'bias': (3,)}
        """
        if args:            # PyTorch's old positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][
                len(args):])[:3]
        out = OrderedDict() if destination is None else destination
        for k, t in self._state_items():
            out[prefix + k] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from ``state_dict`` into this model's parameters and buffers, in place.

        With ``strict=True`` (default) the keys must match exactly; with ``strict=False`` only
        the matching keys are loaded, and the others are returned as PyTorch reports them:
        ``missing_keys`` in the model's order, ``unexpected_keys`` module by module. A shape
        mismatch is always an error. Nothing is changed when an error is raised. Values may be
        Tensors or NumPy arrays; they are copied to each parameter's device and dtype
        (``assign=True`` puts the given tensors in place of the parameters and buffers
        instead, keeping which parameters require grad).

        >>> import labkit as lk
        >>> a, b = lk.nn.Linear(2, 3), lk.nn.Linear(2, 3)
        >>> b.load_state_dict(a.state_dict())
        <All keys matched successfully>
        >>> bool((a.weight == b.weight).all())
        True
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict expects a dict of name -> tensor (from "
                            f"model.state_dict()), got {type(state_dict).__name__}")
        own = dict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = self._unexpected_keys(state_dict)
        # every value checked and converted before any is written: an error changes nothing
        given = {key: _array_of(key, target, state_dict[key])
                 for key, target in own.items() if key in state_dict}
        mismatched = [(key, tuple(own[key].shape), tuple(array.shape))
                      for key, (_, array) in given.items()
                      if tuple(array.shape) != tuple(own[key].shape)]
        if mismatched or (strict and (missing or unexpected)):
            raise StateDictError(self._mismatch_text(missing, unexpected, mismatched, strict))
        ready = [(key, own[key], _converted(own[key], state_dict[key], device, array, assign))
                 for key, (device, array) in given.items()]
        for key, target, value in ready:
            if assign:
                self._assign_member(key, target, value)
            else:
                target.device.xp.copyto(target._data, value)
        return IncompatibleKeys(missing, unexpected)

    def _unexpected_keys(self, state_dict):
        """The keys no module claims, module by module in traversal order (PyTorch's)."""
        out = []
        for prefix, module in self._walk(remove_duplicate=False):
            prefix = f"{prefix}." if prefix else ""
            local = {k for k, p in module._parameters.items() if p is not None}
            local |= {k for k, b in module._buffers.items()
                      if b is not None and k in module._persistent}
            for key in state_dict:
                if key.startswith(prefix):
                    first = key[len(prefix):].split(".", 1)[0]
                    if first not in module._modules and first not in local:
                        out.append(key)
        return out

    def _assign_member(self, key, target, value):
        path, _, name = key.rpartition(".")
        module = self.get_submodule(path)
        if name in module._parameters:
            module._parameters[name] = Parameter(value, requires_grad=target.requires_grad)
            _name_parameters(key, module._parameters[name])
        else:
            module._buffers[name] = value

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

    def _get_name(self):
        """The name this module's repr starts with (its class's, unless a layer says otherwise)."""
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): {_indent(repr(m), 2)}" for name, m in self._modules.items()]
        name = self._get_name()
        if not children:
            return f"{name}({extra})" if len(lines) <= 1 else \
                f"{name}(\n  " + "\n  ".join(lines) + "\n)"
        return f"{name}(\n  " + "\n  ".join(lines + children) + "\n)"

    def _repr_html_(self):        # notebook display: lk.viz.module_html(self)
        return display.drawing("module", self)


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


def _array_of(key, target, value):
    """``(device, array)`` of the state dict's value for ``key``; a StateDictError naming the
    key if it is not a tensor or numeric array."""
    if isinstance(value, Tensor):
        return value.device, value._data
    try:
        array = np.asarray(value)
    except Exception as exc:     # a ragged list and the like
        array, got = None, f"a {type(value).__name__} that is not an array ({exc})"
    else:
        got = "None" if value is None else f"a {type(value).__name__} of dtype {array.dtype}"
    if array is None or array.dtype.kind not in "biuf":
        raise StateDictError(
            f"load_state_dict: the value of {key!r} is {got}, which cannot go into {key!r} "
            f"(shape {tuple(target.shape)}, {target.dtype}): the values of a state dict must "
            f"be tensors or numeric arrays. Nothing was loaded.")
    return get_device("cpu:0"), array


def _converted(target, value, device, array, assign):
    """A value ready to go into ``target``: an array on its device in its dtype (to copy), or
    a Tensor (``assign=True``)."""
    if assign:
        if isinstance(value, Tensor):
            return value
        from ..tensor.creation import tensor
        return tensor(array)
    return transfer(array, device, target.device).astype(target._data.dtype, copy=False)


def _name_parameters(name, value):
    """Name a Parameter registered as ``name``, or prefix the names of a module's parameters
    with it (a module attached to a parent later gets the parent's prefix in turn)."""
    if isinstance(value, Parameter):
        value.name = name
    else:
        for qualified, p in value.named_parameters():
            p.name = f"{name}.{qualified}"


def _check_name(what, name):
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a string, got {type(name).__name__}")
    if "." in name or name == "":
        raise KeyError(f"{what} name {name!r} must be non-empty and contain no '.': dots "
                       f"separate the levels of qualified names such as 'encoder.0.weight'")


def _to_args(args, kwargs):
    """(device, dtype) from ``Module.to``'s argument forms (None where not given)."""
    kwargs = dict(kwargs)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"Module.to() got unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, int):                  # PyTorch's to(0): the first accelerator
            device = f"gpu:{a}"
        elif isinstance(a, Device) or (isinstance(a, str) and _is_device(a)):
            device = a
        elif isinstance(a, (DType, str)) or a is not None:
            dtype = a
    return device, dtype


def _is_device(text):
    """Whether ``text`` names a device ('cpu', 'gpu:1', 'cuda'...), whether or not it exists."""
    return re.fullmatch(r"(cpu|gpu|cuda)(:\d+)?", text.strip().lower()) is not None
