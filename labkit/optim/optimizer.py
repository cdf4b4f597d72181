"""The ``Optimizer`` base class: parameter groups, per-parameter state, ``step``,
``zero_grad`` and ``state_dict`` / ``load_state_dict``, in PyTorch's shape.

A subclass states its hyperparameters and writes its update rule once, in ``_update``, in labkit
ops: the parameter and the optimiser's slots (momentum buffers, moments, step counts, each a
tensor owned by the optimiser) are changed with ``assign`` / ``assign_add`` / ``assign_sub``. So
the same rule runs eagerly and inside a captured graph: called in an ``lk.function``,
``opt.step()`` adds the update to the graph (role ``update``, under the optimiser's name scope),
and every run of the graph updates the parameters and slots in place.

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.tensor([1.0, -2.0]))
>>> opt = lk.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward(); opt.step(); opt.zero_grad()
>>> w.tolist()
[0.800000011920929, -1.600000023841858]

A whole training step, captured as one graph (forward, backward and update nodes):

>>> lk.manual_seed(0)
>>> model = lk.nn.Linear(3, 1)
>>> opt = lk.optim.Adam(model.parameters(), lr=0.05)
>>> @lk.function
... def train_step(x, y):
...     opt.zero_grad()
...     loss = lk.nn.functional.mse_loss(model(x), y)
...     loss.backward()
...     opt.step()
...     return loss
>>> first = train_step(lk.ones(4, 3), lk.zeros(4, 1)).item()
>>> later = [train_step(lk.ones(4, 3), lk.zeros(4, 1)).item() for _ in range(20)][-1]
>>> later < first, len(train_step.traces)
(True, 1)

Hyperparameters (``lr``, ``betas``...) are Python numbers read when the rule runs, so a captured
step holds the values it was traced with. To change one between runs of a captured step, make it
a 0-d tensor and assign to it: ``lr = lk.Variable(0.1, trainable=False)``,
``SGD(params, lr=lr)``, then ``lr.assign(0.01)``.

A captured function may also hold ``opt.step()`` alone, with ``backward()`` run eagerly
before each call: the graph then reads each parameter's ``.grad`` when it runs.
"""
import copy

import numpy as np

from ..autodiff import enable_grad, no_grad
from ..devices import get_device, transfer
from ..errors import DTypeError, GradError, LabkitError, describe
from ..graph.capture import current_graph, name_scope, role
from ..graph.grad_state import read_grad
from ..graph.symbolic import SymbolicTensor
from ..graph.variables import Variable
from ..tensor.op import op
from ..tensor.ops.elementwise import cast
from ..tensor.tensor import Tensor


class OptimizerStateError(LabkitError, ValueError):
    """An optimiser state dict that does not fit this optimiser's parameters."""


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of parameters, or of dicts ``{'params': [...], 'lr': ...}`` (each
    a parameter group with its own hyperparameters; missing ones come from ``defaults``).
    """

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}          # parameter -> {slot name: tensor owned by the optimiser}
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of tensors "
                            f"(e.g. model.parameters() or [w]), not a single tensor")
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list: pass "
                             f"model.parameters() of a model that has parameters")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group):
        """Add a group ``{'params': [...], <hyperparameter>: value, ...}`` (e.g. for fine-tuning
        a new head with another learning rate)."""
        if not isinstance(group, dict):
            raise TypeError(f"a parameter group is a dict with a 'params' key, got "
                            f"{type(group).__name__}")
        group = dict(group)
        params = group.get("params")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("parameter groups need an ordered sequence of parameters, not a set "
                            "(the order must be the same on every run for state_dict to work)")
        params = list(params or [])
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimise tensors, got "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: cannot optimise {describe(p)}: it was "
                                 f"computed by an op (not a leaf). Optimise the parameters it "
                                 f"was computed from, or use lk.nn.Parameter(t.detach())")
            if not p.dtype.is_floating:
                raise DTypeError(f"{type(self).__name__}: cannot optimise {describe(p)}: only "
                                 f"floating-point tensors have gradients")
            if id(p) in seen:
                raise ValueError(f"{type(self).__name__}: a parameter ({describe(p)}) appears "
                                 f"twice (in two groups, or twice in one)")
            seen.add(id(p))
        group["params"] = params
        for name, value in self.defaults.items():
            group.setdefault(name, value)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Validate a group's hyperparameters (subclasses add their own checks)."""
        if _number(group["lr"]) < 0:
            raise ValueError(f"{type(self).__name__}: learning rate must be >= 0, got "
                             f"{group['lr']}")
        if group.get("weight_decay", 0) < 0:
            raise ValueError(f"{type(self).__name__}: weight_decay must be >= 0, got "
                             f"{group['weight_decay']}")

    # ---- the training-loop API --------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Clear every parameter's ``.grad``: to None (default; frees memory) or to zeros.

        Inside an ``lk.function`` it works the same way: the trace sees ``.grad`` cleared, and
        each run of the captured function leaves ``.grad`` as the function left it.
        """
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if set_to_none:   # even when already None: a trace records the clear
                    p.grad = None
                elif g is None:
                    continue
                elif isinstance(g, SymbolicTensor):   # a gradient made in this trace
                    from ..tensor.ops.index import zeros_like
                    p.grad = zeros_like(g)
                else:
                    p.grad = Tensor._make(p.device.xp.zeros_like(p._data), p.device)

    def step(self, closure=None):
        """Update every parameter that has a ``.grad``, in place. ``closure`` (optional) is
        called first with gradients enabled and should return the loss, which step returns.

        The update is made of labkit ops, so inside an ``lk.function`` it becomes part of the
        captured graph (nodes with role ``update``, under the optimiser's name scope).
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        capturing = current_graph() is not None
        with no_grad(), role("update"), name_scope(type(self).__name__):
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if capturing and not isinstance(g, SymbolicTensor):
                        # a .grad from outside the trace: read the one there is at run time
                        g = read_grad(p, missing="error")
                    if g.shape != p.shape or g.device is not p.device:
                        raise ValueError(
                            f"{type(self).__name__}: the gradient {describe(g)} does not "
                            f"match its parameter {describe(p)}; was .grad set by hand?")
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = {}
                    self._update(p, g, state, group)
        return loss

    def _update(self, p, g, state, group):
        """Apply one step of the rule to parameter ``p`` with gradient ``g``, in labkit ops.

        Change ``p`` and the slots only with ``assign`` / ``assign_add`` / ``assign_sub`` and
        read a slot's new value from what the assign returns (so a graph orders the read after
        the write). ``g`` must not be written to: gradients may share memory. No Python
        decision may depend on a slot's value (under capture the rule is traced once and run
        many times): use ops (``lk.where``) for that.
        """
        raise NotImplementedError

    # ---- slots: the optimiser's own tensors -------------------------------------------------
    def _slot(self, state, name, p, fill=0.0):
        """The slot ``name`` of parameter ``p`` (like ``p``, filled with ``fill`` at first)."""
        t = state.get(name)
        if t is None:
            t = state[name] = Variable._own(p.device.xp.full_like(p._data, fill), p.device, name)
        return t

    def _counter(self, state, name, p, start=0):
        """A 0-d int64 slot on ``p``'s device (a step count), starting at ``start``."""
        t = state.get(name)
        if t is None:
            t = state[name] = Variable._own(p.device.xp.full((), start, dtype=np.int64),
                                            p.device, name)
        return t

    # ---- saving and restoring ----------------------------------------------------------------
    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]} as in PyTorch.

        Parameters are numbered in group order; array state is copied into Tensors.
        """
        index, groups = {}, []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            saved = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            saved["params"] = [index[id(p)] for p in group["params"]]
            groups.append(saved)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: _export(v, p.device)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and per-parameter state saved by ``state_dict()``.

        The optimiser must have been built over parameters of the same shapes in the same order.
        """
        groups = state_dict.get("param_groups") if hasattr(state_dict, "get") else None
        if groups is None or "state" not in state_dict:
            raise OptimizerStateError(f"{type(self).__name__}.load_state_dict expects the dict "
                                      f"from optimizer.state_dict() (keys 'state' and "
                                      f"'param_groups')")
        if len(groups) != len(self.param_groups):
            raise OptimizerStateError(
                f"{type(self).__name__}.load_state_dict: the saved state has {len(groups)} "
                f"parameter group(s), this optimiser {len(self.param_groups)}")
        by_index = {}
        for i, (saved, group) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise OptimizerStateError(
                    f"{type(self).__name__}.load_state_dict: group {i} was saved with "
                    f"{len(saved['params'])} parameters, but has {len(group['params'])} here. "
                    f"Build the optimiser over the same model.")
            for idx, p in zip(saved["params"], group["params"]):
                by_index[idx] = p
        new_state = {}
        for idx, values in state_dict["state"].items():
            p = by_index.get(int(idx))
            if p is None:
                raise OptimizerStateError(f"{type(self).__name__}.load_state_dict: state for "
                                          f"parameter {idx}, which no group lists")
            new_state[p] = {k: _import(v, p, k, type(self).__name__) for k, v in values.items()}
        for saved, group in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k == "params":
                    continue
                current = group.get(k)
                if isinstance(current, Tensor) and current._data is not None:
                    # a tensor hyperparameter (lr...) may be held by a captured step: update it
                    value = v.to(current.device)._data if isinstance(v, Tensor) else v
                    current._data[...] = value
                else:
                    group[k] = copy.deepcopy(v)
        # Slots are written into the existing tensors where they fit, so that a captured
        # training step (which holds the slots by reference) continues from the loaded state.
        for p, values in new_state.items():
            old = self.state.get(p, {})
            for k, array in values.items():
                slot = old.get(k)
                if isinstance(slot, Tensor) and hasattr(array, "shape") and \
                        slot.shape == tuple(array.shape) and slot._data.dtype == array.dtype:
                    slot._data[...] = array
                    values[k] = slot
                elif hasattr(array, "shape"):
                    values[k] = Variable._own(array, p.device, k)
        self.state = new_state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    value = group[k]
                    lines.append(f"    {k}: {_number(value)}"
                                 + (" (a tensor)" if isinstance(value, Tensor) else ""))
        lines.append(")")
        return "\n".join(lines)


def as_count(step):
    """A step count (0-d int64) as float64, so that factors computed from it with Python floats
    (``beta ** t``) keep float64's precision, as PyTorch's Python-number arithmetic does, before
    ``in_dtype`` casts them to the parameter's dtype."""
    return cast(step, dtype="float64")


def in_dtype(x, like):
    """``x`` (a 0-d factor computed from a step count) cast to ``like``'s dtype, so that it
    scales ``like`` without promoting it (NumPy promotes float32 * float64 0-d to float64)."""
    return x if x.dtype is like.dtype else cast(x, dtype=like.dtype.name)


def _number(value):
    """A hyperparameter as a Python number (it may be a 0-d tensor, to change it under capture)."""
    return value.item() if isinstance(value, Tensor) else value


def _export(value, device):
    """A state value as saved: tensors and arrays become plain Tensors (copies)."""
    if isinstance(value, Tensor):
        return Tensor._make(value._data.copy(), value.device)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return Tensor._make(value.copy(), device)
    return copy.deepcopy(value)


def _import(value, p, key, owner):
    """A saved state value as an array on ``p``'s device: slots shaped like ``p`` in ``p``'s
    dtype; ``step`` (a Python number or 0-d tensor, as older labkit and PyTorch save it) as a
    0-d int64 count."""
    if isinstance(value, Tensor):
        src, array = value.device, value._data
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        src, array = get_device("cpu:0"), value
    elif key == "step" and isinstance(value, (int, float)):
        src, array = get_device("cpu:0"), np.asarray(value)
    else:
        return copy.deepcopy(value)
    array = transfer(array, src, p.device)
    if key == "step" and array.ndim == 0:
        return p.device.xp.asarray(array).astype(np.int64)   # a copy
    if tuple(array.shape) != tuple(p.shape):
        raise OptimizerStateError(f"{owner}.load_state_dict: state '{key}' has shape "
                                  f"{tuple(array.shape)}, but its parameter is {describe(p)}")
    if array.dtype.kind == "f":
        array = array.astype(p._data.dtype, copy=False)
    return array.copy()
