"""The ``Optimizer`` base class: parameter groups, per-parameter state, ``step``,
``zero_grad`` and ``state_dict`` / ``load_state_dict``, in PyTorch's shape.

A subclass states its hyperparameters and writes its update rule once, in ``_update``, on the
backend arrays (``xp`` is numpy or cupy): the parameter is changed in place, outside autodiff,
with ``out=`` arguments and two reusable scratch buffers per parameter instead of temporaries.

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.tensor([1.0, -2.0]))
>>> opt = lk.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward(); opt.step(); opt.zero_grad()
>>> w.tolist()
[0.800000011920929, -1.600000023841858]
"""
import copy

from ..autodiff import enable_grad, no_grad
from ..devices import get_device, transfer
from ..errors import DTypeError, LabkitError, describe
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
        self.state = {}          # parameter -> {name: backend array or number}
        self.param_groups = []
        self._scratch = {}       # parameter -> [array, array]; never saved
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
        if group["lr"] < 0:
            raise ValueError(f"{type(self).__name__}: learning rate must be >= 0, got "
                             f"{group['lr']}")
        if group.get("weight_decay", 0) < 0:
            raise ValueError(f"{type(self).__name__}: weight_decay must be >= 0, got "
                             f"{group['weight_decay']}")

    # ---- the training-loop API --------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Clear every parameter's ``.grad``: to None (default; frees memory) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad = Tensor._make(p.device.xp.zeros_like(p._data), p.device)

    def step(self, closure=None):
        """Update every parameter that has a ``.grad``, in place. ``closure`` (optional) is
        called first with gradients enabled and should return the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad._data
                    if g.shape != p._data.shape or p.grad.device is not p.device:
                        raise ValueError(
                            f"{type(self).__name__}: the gradient {describe(p.grad)} does not "
                            f"match its parameter {describe(p)}; was .grad set by hand?")
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = {}
                    self._update(p.device.xp, p._data, g, state, group, self._buffers(p))
        return loss

    def _buffers(self, p):
        bufs = self._scratch.get(p)
        if bufs is None or bufs[0].dtype != p._data.dtype or type(bufs[0]) is not type(p._data):
            xp = p.device.xp
            bufs = self._scratch[p] = [xp.empty_like(p._data), xp.empty_like(p._data)]
        return bufs

    def _update(self, xp, p, g, state, group, scratch):
        """Apply one step of the rule to parameter array ``p`` with gradient ``g``, in place.

        ``state`` is this parameter's dict (persisted), ``scratch`` two arrays like ``p`` to
        compute into. ``g`` must not be written to: gradients may share memory.
        """
        raise NotImplementedError

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
                if k != "params":
                    group[k] = copy.deepcopy(v)
        self.state = new_state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)


def _export(value, device):
    """A state value as saved: arrays become Tensors (copies); numbers stay numbers."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, Tensor):
        return Tensor._make(value.copy(), device)
    return copy.deepcopy(value)


def _import(value, p, key, owner):
    """A saved state value back on ``p``'s device (floating arrays in ``p``'s dtype)."""
    if isinstance(value, Tensor):
        src, array = value.device, value._data
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        src, array = get_device("cpu:0"), value
    else:
        return copy.deepcopy(value)
    if tuple(array.shape) != tuple(p.shape):
        raise OptimizerStateError(f"{owner}.load_state_dict: state '{key}' has shape "
                                  f"{tuple(array.shape)}, but its parameter is {describe(p)}")
    array = transfer(array, src, p.device)
    if array.dtype.kind == "f":
        array = array.astype(p._data.dtype, copy=False)
    return array.copy()
