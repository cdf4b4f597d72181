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

>>> _ = lk.manual_seed(0)
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

Hyperparameters under capture. ``group["lr"]`` (and every other hyperparameter) is the Python
number you set, as in PyTorch: print it, compare it, assign to it. Eagerly the rule computes with
that number. A captured rule cannot (a number would be a constant of the graph), so it reads each
numeric hyperparameter from a 0-d tensor the group keeps for it (``ParamGroup.live``), and every
assignment ``group["lr"] = x`` (what ``lk.optim.lr_scheduler`` does) is written into that tensor
too: the next run of the captured step uses the new value, with no retrace.

>>> for group in opt.param_groups:
...     group["lr"] = 0.0           # no more learning: the captured step sees it
>>> before = model.weight.tolist()
>>> _ = train_step(lk.ones(4, 3), lk.zeros(4, 1))
>>> model.weight.tolist() == before, len(train_step.traces)
(True, 1)

Which ops the rule uses is decided when it is traced (weight decay or not, momentum or not):
the trace guards each such switch on being zero or not, and every other hyperparameter that is
not a number (``nesterov``, ``maximize``, ``amsgrad``...) on its value, so changing one makes the
next call trace again, with the change as the reason (``labkit.graph.guards``):

>>> opt.param_groups[0]["amsgrad"] = True
>>> _ = train_step(lk.ones(4, 3), lk.zeros(4, 1))
>>> len(train_step.traces), train_step.traces[1].reason
(2, "optimizer Adam param_groups[0]['amsgrad']: False -> True")

A hyperparameter may also be a 0-d tensor you own (``SGD(params, lr=lk.Variable(0.1,
trainable=False))``): the captured step reads it by reference, and ``lr.assign(0.01)`` changes
it.

A captured function may also hold ``opt.step()`` alone, with ``backward()`` run eagerly
before each call: the graph then reads each parameter's ``.grad`` when it runs.
"""
import collections
import copy
import numbers

import numpy as np

from ..autodiff import enable_grad, no_grad
from ..autodiff.trees import tensor_parts
from ..devices import get_device, transfer
from ..errors import DTypeError, LabkitError, describe
from ..graph import guards
from ..graph.capture import current_graph, name_scope, role
from ..graph.symbolic import SymbolicTensor
from ..graph.variables import Variable
from ..tensor import dispatch
from ..tensor.dtypes import float64
from ..tensor.ops.elementwise import cast, neg
from ..tensor.ops.state import assign_lerp
from ..tensor.tensor import Tensor


class OptimizerStateError(LabkitError, ValueError):
    """An optimiser state dict that does not fit this optimiser's parameters."""


class ParamGroup(dict):
    """One parameter group: a dict as in PyTorch (``group["lr"]`` is the number last set), which
    also keeps, for captured steps, each numeric hyperparameter as 0-d tensors.

    ``group.live(key, device, dtype)`` is such a tensor (a tuple of them for ``betas``), made at
    first use (when a step is traced); every later ``group[key] = value`` writes the value into
    each, so a graph holding them sees the change when it next runs.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(2))], lr=0.1)
    >>> group = opt.param_groups[0]
    >>> rate = group.live("lr", lk.device("cpu"), lk.float64)
    >>> group["lr"] = 0.5
    >>> group["lr"], rate.item()
    (0.5, 0.5)
    """

    _guard_epoch = guards.GROUPS     # traces' guards on group entries look again when it moves

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._live = {}         # (key, device, dtype) -> 0-d tensor, or a tuple of them

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value)
        guards.GROUPS[0] += 1
        if self._live:
            for (k, _, _), held in self._live.items():
                if k == key:
                    _write(held, value, key)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def exact(self, key):
        """``self[key]``: what a rule does exact arithmetic with (see ``_Live.exact``)."""
        return dict.__getitem__(self, key)

    def derived(self, name, make):
        """``make()``: a factor computed from hyperparameters (see ``_Live.derived``)."""
        return make()

    def live(self, key, device, dtype):
        """``self[key]`` as a captured step reads it on ``device``: a 0-d tensor of ``dtype``
        that follows every assignment to ``self[key]`` (a tuple of them for a tuple of numbers);
        a tensor hyperparameter itself; anything else (bools, None, strings) as it is."""
        value = dict.__getitem__(self, key)
        if not _is_number(value) and not (isinstance(value, tuple) and value and
                                          all(_is_number(v) for v in value)):
            return value
        held = self._live.get((key, device, dtype))
        if held is None:
            def own(v):
                return Variable._own(device.xp.full((), float(v), dtype=dtype.np), device, key)
            held = tuple(own(v) for v in value) if isinstance(value, tuple) else own(value)
            self._live[(key, device, dtype)] = held
        return held

    def guard(self, switches, label):
        """Guard, in the trace being made, what a captured rule decides with: each of
        ``switches`` (hyperparameters whose zero/non-zero value picks the rule's ops) on being
        zero or not, every other entry that is not a number (flags, None, strings) on its value
        (``labkit.graph.guards``); numbers are read from live tensors at run time instead."""
        guards.guard_entry(self, "params", f"{label}['params']", guards.IDENTITY)
        for k, value in self.items():
            if k in ("params", "param_names"):
                continue
            what = f"{label}[{k!r}]"
            if k in switches and not isinstance(value, Tensor):
                guards.guard_entry(self, k, what, guards.TRUTH)
            elif not (_is_number(value) or isinstance(value, Tensor) or (
                    isinstance(value, tuple) and all(_is_number(v) for v in value))):
                guards.guard_entry(self, k, what)

    def __reduce__(self):   # copies and pickles are plain dicts: the live tensors stay here
        return dict, (dict(self),)


class _Live:
    """What a captured rule computes with, for parameters of one device and dtype:
    ``h[key]`` is the hyperparameter as a live 0-d tensor of the parameters' dtype (to scale
    them: PyTorch, too, casts a Python number to the tensor's dtype), ``h.exact(key)`` one in
    float64 (for factors computed from it, as PyTorch computes them with Python floats; cast
    them with ``in_dtype`` before they meet a parameter). Eagerly both are the group's number."""

    __slots__ = ("group", "device", "dtype", "made")

    def __init__(self, group, device, dtype):
        self.group, self.device, self.dtype = group, device, dtype
        self.made = {}

    def __getitem__(self, key):
        return self.group.live(key, self.device, self.dtype)

    def exact(self, key):
        return self.group.live(key, self.device, float64)

    def derived(self, name, make):
        """``make()`` (a factor computed from hyperparameters alone, such as ``1 - beta1``),
        made once for all the group's parameters of this device and dtype: its nodes read only
        live values, which change between runs of the graph, never within one."""
        made = self.made.get(name)
        if made is None:
            made = self.made[name] = make()
        return made


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _write(held, value, key):
    """Write the number(s) ``value`` into the live tensor(s) ``held``."""
    if isinstance(held, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(held):
            raise ValueError(f"param_groups[...][{key!r}] held {len(held)} numbers when a "
                             f"captured step was traced; it cannot become {value!r}")
        for h, v in zip(held, value):
            h._data.fill(float(_number(v)))
    elif held is not value:
        held._data.fill(float(_number(value)))


def _number(value):
    """A hyperparameter as a Python number (it may be a 0-d tensor)."""
    return value.item() if isinstance(value, Tensor) else value


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of parameters, of ``(name, parameter)`` pairs (as
    ``model.named_parameters()`` gives), or of dicts ``{'params': [...], 'lr': ...}`` (each a
    parameter group with its own hyperparameters; missing ones come from ``defaults``).
    Subclasses write ``_update`` and may list in ``_switches`` the hyperparameters whose
    zero/non-zero value selects the ops of their rule.
    """

    _switches = ("weight_decay",)
    _scalar_state = {"step": np.int64}     # 0-d state of the rule, and its dtype
    _shaped_state = True                    # other state is shaped like its parameter
    _internal_state = ()                    # labkit's own state, not in PyTorch's state_dict

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        # parameter -> {slot name: tensor owned by the optimiser}; {} for one without state yet
        self.state = collections.defaultdict(dict)
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

    def add_param_group(self, param_group):
        """Add a group ``{'params': [...], <hyperparameter>: value, ...}`` (e.g. for fine-tuning
        a new head with another learning rate); unset hyperparameters come from ``defaults``.

        >>> import labkit as lk
        >>> body, head = lk.nn.Linear(2, 2), lk.nn.Linear(2, 1)
        >>> opt = lk.optim.SGD(body.parameters(), lr=0.1)
        >>> opt.add_param_group({"params": head.parameters(), "lr": 0.01})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.01]
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"a parameter group is a dict with a 'params' key, got "
                            f"{type(param_group).__name__}")
        group = ParamGroup(param_group)
        params = group.get("params")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("parameter groups need an ordered sequence of parameters, not a set "
                            "(the order must be the same on every run for state_dict to work)")
        params = list(params or [])
        named = [isinstance(p, tuple) for p in params]
        if any(named):
            if not all(named):
                raise ValueError(f"{type(self).__name__}: give every parameter a name "
                                 f"((name, tensor) pairs, as model.named_parameters()) or none")
            group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        if self.param_groups and ("param_names" in group) != \
                ("param_names" in self.param_groups[0]):
            raise ValueError(f"{type(self).__name__}: all parameter groups are named "
                             f"((name, tensor) pairs) or none is")
        params, names = _local_parts(params, group.get("param_names"))
        if names is not None:
            group["param_names"] = names
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
        if _number(group.get("weight_decay", 0)) < 0:
            raise ValueError(f"{type(self).__name__}: weight_decay must be >= 0, got "
                             f"{group['weight_decay']}")
        for name in ("eps", "lr_decay", "momentum", "initial_accumulator_value",
                     "momentum_decay"):
            if name in group and _number(group[name]) < 0:
                raise ValueError(f"{type(self).__name__}: {name} must be >= 0, got "
                                 f"{group[name]}")
        betas = group.get("betas")
        if betas is not None and not all(0.0 <= _number(b) < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: betas must each be in [0, 1), got "
                             f"{betas}")

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
        self._step_calls = getattr(self, "_step_calls", 0) + 1
        capturing = current_graph() is not None
        mode = dispatch.current_mode()
        if capturing:     # a group added or its parameters replaced: trace again
            guards.guard_size(self.param_groups, f"optimizer {type(self).__name__} "
                              f"param_groups", epoch=None)
        with no_grad(), role("update"), name_scope(type(self).__name__):
            for i, group in enumerate(self.param_groups):
                if type(group) is not ParamGroup:      # a dict put in param_groups by hand
                    group = self.param_groups[i] = ParamGroup(group)
                if capturing:
                    group.guard(self._switches,
                                f"optimizer {type(self).__name__} param_groups[{i}]")
                views = {}
                for p in group["params"]:
                    g = mode.get_grad(p)     # under capture: read at run time if from outside
                    if g is None:
                        continue
                    if g.shape != p.shape or g.device is not p.device:
                        raise ValueError(
                            f"{type(self).__name__}: the gradient {describe(g)} does not "
                            f"match its parameter {describe(p)}; was .grad set by hand?")
                    state = self.state[p]
                    if capturing:
                        h = views.get((p.device, p.dtype))
                        if h is None:
                            h = views[(p.device, p.dtype)] = _Live(group, p.device, p.dtype)
                    else:
                        h = group
                    if group.get("maximize"):
                        g = neg(g)
                    self._update(p, g, state, group, h)
        return loss

    def _update(self, p, g, state, group, h):
        """Apply one step of the rule to parameter ``p`` with gradient ``g`` (already negated
        for ``maximize``), in labkit ops.

        Compute with the hyperparameters of ``h`` (Python numbers eagerly, live 0-d tensors
        under capture: ``h[key]`` to scale tensors, ``h.exact(key)`` for factors computed from
        it, cast with ``in_dtype``; see ``_Live``); make Python decisions
        (``if group["weight_decay"]:``) on ``group``'s numbers, and list those hyperparameters
        in ``_switches``. Change ``p`` and the slots
        only with ``assign`` / ``assign_add`` / ``assign_sub`` and read a slot's new value from
        what the assign returns (so a graph orders the read after the write). ``g`` must not be
        written to: gradients may share memory. No Python decision may depend on a slot's value
        (under capture the rule is traced once and run many times): use ops (``where``).
        """
        raise NotImplementedError

    # ---- slots: the optimiser's own tensors -------------------------------------------------
    def _slot(self, state, name, p, fill=0.0):
        """The slot ``name`` of parameter ``p`` (like ``p``, filled with ``fill`` at first)."""
        t = state.get(name)
        if t is None:
            t = state[name] = Variable._own(p.device.xp.full_like(p._data, fill), p.device, name)
        return t

    def _counter(self, state, name, p, start=0, dtype=np.int64):
        """A 0-d slot on ``p``'s device (a step count, int64), starting at ``start``."""
        t = state.get(name)
        if t is None:
            t = state[name] = Variable._own(p.device.xp.full((), start, dtype=dtype),
                                            p.device, name)
        return t

    # ---- saving and restoring ----------------------------------------------------------------
    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}``, PyTorch's
        layout: parameters numbered in group order, each group's hyperparameters, and each
        parameter's state as tensors (copies; ``step`` a 0-d float32 tensor, as PyTorch saves it).

        >>> import labkit as lk
        >>> w = lk.nn.Parameter(lk.ones(2))
        >>> opt = lk.optim.Adam([w])
        >>> w.sum().backward(); opt.step()
        >>> saved = opt.state_dict()
        >>> state, group = saved["state"][0], saved["param_groups"][0]
        >>> sorted(state), state["step"].item(), group["params"]
        (['exp_avg', 'exp_avg_sq', 'step'], 1.0, [0])
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
                saved = {k: _export(k, v, p.device) for k, v in self.state.get(p, {}).items()
                         if k not in self._internal_state}
                if saved:                        # as PyTorch: no entry for a rule without state
                    state[index[id(p)]] = saved
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and per-parameter state saved by ``state_dict()`` (labkit's
        or PyTorch's, its tensors converted with ``lk.tensor``).

        The optimiser must have been built over parameters of the same shapes in the same
        order. Slots are written into the tensors the optimiser already has where they fit, so
        a captured training step continues from the loaded state.
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
            new_state[p] = {k: _import(v, p, k, type(self).__name__, self._scalar_state,
                                       self._shaped_state) for k, v in values.items()}
        for i, (saved, group) in enumerate(zip(groups, self.param_groups)):
            if type(group) is not ParamGroup:
                group = self.param_groups[i] = ParamGroup(group)
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
        self.state = collections.defaultdict(dict, new_state)

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


def with_weight_decay(p, g, group, h):
    """The gradient with the group's weight decay: L2 (``g + weight_decay * p``), or with
    ``decoupled_weight_decay`` (AdamW's) ``p *= 1 - lr * weight_decay`` and ``g`` unchanged."""
    if group.get("weight_decay"):
        if group.get("decoupled_weight_decay"):
            p.assign(p * h.derived("decay", lambda: in_dtype(
                1 - h.exact("lr") * h.exact("weight_decay"), p)))
        else:
            g = g + p * h["weight_decay"]
    return g


def moments(m, v, g, p, h):
    """Adam's moments ``m = b1 m + (1 - b1) g`` and ``v = b2 v + (1 - b2) g g`` of parameter
    ``p``, updated in place as ``m += (g - m)(1 - b1)`` (PyTorch's ``lerp_``) and
    ``v += (g g - v)(1 - b2)`` (one pass fewer than PyTorch's ``mul_(b2).addcmul_``, equal to
    it but for rounding), each one op (``assign_lerp``); returns their new values."""
    b1, b2 = h.exact("betas")
    return (assign_lerp(m, g, h.derived("1-b1", lambda: in_dtype(1 - b1, p))),
            assign_lerp(v, g, h.derived("1-b2", lambda: in_dtype(1 - b2, p)), square_end=True))


def as_count(step):
    """A step count (0-d int64) as float64, so that factors computed from it with Python floats
    (``beta ** t``) keep float64's precision, as PyTorch's Python-number arithmetic does, before
    ``in_dtype`` casts them to the parameter's dtype."""
    return cast(step, dtype="float64")


def in_dtype(x, like):
    """``x`` (a factor computed from hyperparameters or a step count: a Python number eagerly,
    a 0-d tensor under capture or from a step count) to scale ``like``: a number as it is, a
    tensor cast to ``like``'s dtype."""
    if not isinstance(x, Tensor) or x.dtype is like.dtype:
        return x
    return cast(x, dtype=like.dtype.name)


def _export(key, value, device):
    """A state value as saved: tensors and arrays become plain Tensors (copies), also inside
    lists; the step count a 0-d float32 tensor, as PyTorch keeps it."""
    if isinstance(value, list):
        return [_export(key, v, device) for v in value]
    if isinstance(value, Tensor):
        value, device = value._data, value.device
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        array = value.astype(np.float32) if key == "step" and value.ndim == 0 else value.copy()
        return Tensor._make(array, device)
    return copy.deepcopy(value)


def _import(value, p, key, owner, scalars, shaped=True):
    """A saved state value as an array on ``p``'s device: slots shaped like ``p`` (``shaped``)
    in ``p``'s dtype; the rule's 0-d state (``scalars``: name -> dtype; the step count, which
    PyTorch saves as a 0-d float32 tensor and older labkit as a number) in its own dtype.
    Lists hold tensors of any shape (L-BFGS's history), imported as tensors."""
    if isinstance(value, list):
        return [Tensor._make(v, p.device) if hasattr(v, "shape") else v
                for v in (_import(v, p, key, owner, scalars, False) for v in value)]
    if isinstance(value, Tensor):
        src, array = value.device, value._data
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        src, array = get_device("cpu:0"), value
    elif key in scalars and isinstance(value, (int, float)):
        src, array = get_device("cpu:0"), np.asarray(value)
    else:
        return copy.deepcopy(value)
    array = transfer(array, src, p.device)
    if key in scalars and array.ndim == 0:
        return p.device.xp.asarray(array).astype(scalars[key])   # a copy
    if shaped and tuple(array.shape) != tuple(p.shape):
        raise OptimizerStateError(f"{owner}.load_state_dict: state '{key}' has shape "
                                  f"{tuple(array.shape)}, but its parameter is {describe(p)}")
    if array.dtype.kind == "f":
        array = array.astype(p._data.dtype, copy=False)
    return array.copy()


def _local_parts(params, names):
    """``(params, names)`` with each parameter made of local tensors (a DTensor: one local
    shard per device) replaced by those locals, in order: each is optimised where it lives,
    with its own state there (sharded optimiser state, as ZeRO's). Names get ``[i]``."""
    out, out_names = [], [] if names is not None else None
    for k, p in enumerate(params):
        made_of = tensor_parts(p)
        parts = made_of[0] if made_of is not None else [p]
        out.extend(parts)
        if names is not None:
            out_names.extend([names[k]] if made_of is None else
                             [f"{names[k]}[{i}]" for i in range(len(parts))])
    return out, out_names
