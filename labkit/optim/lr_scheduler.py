"""Learning-rate schedulers in PyTorch's spelling (``lk.optim.lr_scheduler``): each changes
``group["lr"]`` of its optimiser's parameter groups when its ``step()`` is called (once an epoch
or once a batch, after ``optimizer.step()``), with PyTorch's formulas, so the learning rates
follow PyTorch's step for step.

They only assign ``group["lr"]`` (and, for OneCycleLR and CyclicLR, the momentum), so a
captured training step sees each new rate without a retrace: the optimiser's groups write
assignments into the 0-d tensors the captured update reads (see ``labkit.optim.optimizer``).
Call ``scheduler.step()`` outside the captured step.

>>> import labkit as lk
>>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(2))], lr=0.1)
>>> sched = lk.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> rates = []
>>> for epoch in range(5):
...     opt.step()                  # (a training epoch)
...     sched.step()
...     rates.append(sched.get_last_lr()[0])
>>> rates
[0.1, 0.05, 0.05, 0.025, 0.025]
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from ..errors import LabkitError
from ..graph.capture import current_graph
from ..tensor.tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "SequentialLR", "PolynomialLR", "CosineAnnealingLR",
           "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts",
           "OneCycleLR"]


def _values(optimizer, key):
    """``group[key]`` of every group (tensors copied, so the list never aliases a group)."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key]
            for g in optimizer.param_groups]


def _set(group, key, value):
    """``group[key] = value``; a tensor hyperparameter is filled in place instead."""
    if isinstance(group[key], Tensor):
        group[key]._data.fill(float(value))
    else:
        group[key] = value


def _per_group(name, optimizer, value):
    """``value`` for each group: a list or tuple of one per group, or one for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} has {len(value)} values, but the optimiser has "
                             f"{len(optimizer.param_groups)} parameter groups: give one per "
                             f"group, or a single value for all")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer (a scheduler needs "
                        f"an lk.optim optimiser, e.g. lk.optim.SGD(model.parameters(), lr=0.1))")


def _not_captured(scheduler):
    if current_graph() is not None:
        raise LabkitError(
            f"{type(scheduler).__name__}.step() inside lk.function would run only when the "
            f"function is traced. Call it outside the captured step (after it, once an epoch "
            f"or once a batch): the captured step reads each new learning rate when it runs.")


class LRScheduler:
    """Base class: ``LRScheduler(optimizer, last_epoch=-1)``. A subclass computes the next
    rates in ``get_lr()`` (from ``self.last_epoch``, ``self.base_lrs`` and the groups' current
    ``lr``); ``step()`` advances ``last_epoch`` and writes them into ``group["lr"]``.

    Building one records each group's ``initial_lr`` and takes the first step (epoch 0), as
    PyTorch does; ``last_epoch >= 0`` resumes a schedule and needs ``initial_lr`` present.
    """

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming a scheduler with last_epoch={last_epoch}: "
                                   f"load the optimiser's state_dict first, or leave "
                                   f"last_epoch=-1 for a new schedule")
        self.base_lrs = _values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The rates for the epoch ``self.last_epoch`` (one per parameter group)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The rates this scheduler set last, one per parameter group."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance one epoch (or batch) and set every group's ``lr``. ``epoch`` (deprecated in
        PyTorch) jumps to that epoch, with the closed form where there is one."""
        _not_captured(self)
        if self._step_count == 1 and not getattr(self.optimizer, "_step_calls", 0):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: "
                          "call them in the opposite order, or the first value of the "
                          "schedule is skipped (as in PyTorch).", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn("The epoch parameter of scheduler.step() is deprecated (as in "
                          "PyTorch): call step() with no argument.", UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_closed_form", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            _set(group, "lr", lr)
        self._last_lr = _values(self.optimizer, "lr")

    def state_dict(self):
        """Every attribute but the optimiser (PyTorch's layout)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` saved."""
        self.__dict__.update(state_dict)

    def __repr__(self):
        return f"<{type(self).__name__} at epoch {self.last_epoch}: lr {self.get_last_lr()}>"


_LRScheduler = LRScheduler


class _LambdaState:
    """state_dict / load_state_dict for schedulers holding per-group functions: plain
    functions are not saved; a callable object's attributes are."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(attrs)

    def _lambdas(self, optimizer, lr_lambda):
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas (one per "
                                 f"parameter group), but got {len(lr_lambda)}")
            fns = list(lr_lambda)
        else:
            fns = [lr_lambda] * len(optimizer.param_groups)
        for fn in fns:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        return fns


class LambdaLR(_LambdaState, LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)`` (one function, or one per group).

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> warmup = lk.optim.lr_scheduler.LambdaLR(opt, lambda epoch: min(1.0, (epoch + 1) / 4))
    >>> opt.param_groups[0]["lr"]
    0.25
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = self._lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """``lr *= lr_lambda(epoch)`` at every step after the first.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.5)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = self._lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _values(self.optimizer, "lr")
        return [g["lr"] * fn(self.last_epoch)
                for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """``lr *= gamma`` every ``step_size`` epochs.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    >>> for _ in range(4):
    ...     opt.step(); sched.step()
    >>> round(sched.get_last_lr()[0], 6)
    0.01
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``lr *= gamma`` at each epoch in ``milestones`` (a milestone listed twice: gamma**2).

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
    >>> for _ in range(3):
    ...     opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _values(self.optimizer, "lr")
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for g in self.optimizer.param_groups]

    def _closed_form(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """``lr = initial_lr * factor`` for the first ``total_iters`` epochs, then ``initial_lr``.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> rates = [sched.get_last_lr()[0]]
    >>> for _ in range(3):
    ...     opt.step(); sched.step(); rates.append(sched.get_last_lr()[0])
    >>> rates
    [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _values(self.optimizer, "lr")
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """``lr`` goes linearly from ``initial_lr * start_factor`` to ``initial_lr * end_factor``
    over ``total_iters`` epochs (a warm-up, typically), then stays.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> rates = [sched.get_last_lr()[0]]
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); rates.append(round(sched.get_last_lr()[0], 6))
    >>> rates
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _values(self.optimizer, "lr")
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor
                                + (self.last_epoch - 1) * change)
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr *= gamma`` every epoch.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); sched.step(); opt.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``lr = initial_lr * (1 - epoch / total_iters) ** power`` until ``total_iters``.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=1.0)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.75]
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return _values(self.optimizer, "lr")
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * decay for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` down to ``eta_min`` over ``T_max`` epochs (and back
    up over the next ``T_max``, periodically), in PyTorch's recursive form.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> opt.step(); sched.step(); round(sched.get_last_lr()[0], 6)
    0.5
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups, epoch, t_max, eta_min = self.optimizer.param_groups, self.last_epoch, \
            self.T_max, self.eta_min
        if self._is_initial:
            return _values(self.optimizer, "lr")
        if self._step_count == 1 and epoch > 0:      # resumed at a later epoch
            return [eta_min + (base - eta_min) * (1 + math.cos(epoch * math.pi / t_max)) / 2
                    for base in self.base_lrs]
        if (epoch - 1 - t_max) % (2 * t_max) == 0:   # the bottom of a period: turn upwards
            return [g["lr"] + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1)
                                                                        / t_max))
                * (g["lr"] - eta_min) + eta_min for g in groups]

    def _closed_form(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class _Composite(LRScheduler):
    """state_dict / load_state_dict for schedulers made of schedulers."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, saved):
            s.load_state_dict(sd)

    def _check_parts(self, optimizer, schedulers):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             f"none")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"{type(self).__name__}: the scheduler at index {i} should have "
                                f"an `optimizer` attribute")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"{type(self).__name__} does not support ReduceLROnPlateau "
                                 f"(index {i}): its step needs the metric")
            if s.optimizer is not optimizer:
                raise ValueError(f"{type(self).__name__} expects all schedulers to belong to the "
                                 f"same optimizer, but the one at index {i} "
                                 f"({type(s).__name__}) has another")


class SequentialLR(_Composite):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted at its
    epoch 0), and so on: e.g. a linear warm-up followed by cosine annealing.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> warm = lk.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = lk.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched = lk.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> rates = [sched.get_last_lr()[0]]
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); rates.append(round(sched.get_last_lr()[0], 6))
    >>> rates
    [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        self._check_parts(optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects one milestone fewer than schedulers, but "
                             f"got {len(schedulers)} schedulers and {len(milestones)} "
                             f"milestones")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:        # undo the schedulers' initial steps
            _set(group, "lr", group["initial_lr"])
        self._undo(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo(self, scheduler):
        parts = getattr(scheduler, "_schedulers", None)
        if parts is not None:
            for s in parts:
                self._undo(s)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self):
        _not_captured(self)
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step several schedulers together (their factors multiply), e.g. ConstantLR and
    ExponentialLR.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> s1 = lk.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=1)
    >>> s2 = lk.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    >>> sched = lk.optim.lr_scheduler.ChainedScheduler([s1, s2])
    >>> opt.step(); sched.step(); round(sched.get_last_lr()[0], 6)
    0.9
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler, but got none")
        optimizer = optimizer or schedulers[0].optimizer
        self._check_parts(optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _values(optimizer, "lr")

    def step(self):
        _not_captured(self)
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _values(self.optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """``lr *= factor`` when the metric passed to ``step(metric)`` has not improved (by
    ``threshold``, relative or absolute) for more than ``patience`` epochs; then wait
    ``cooldown`` epochs; never below ``min_lr``.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> for val_loss in [1.0, 0.9, 0.9, 0.9, 0.9]:
    ...     opt.step(); sched.step(val_loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        _check_optimizer(optimizer)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown: 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown: "
                             f"'rel' or 'abs'")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold

    def step(self, metrics, epoch=None):
        _not_captured(self)
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("The epoch parameter of scheduler.step() is deprecated (as in "
                          "PyTorch): call step(metric).", UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _values(self.optimizer, "lr")

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimiser has {len(groups)} "
                                   f"parameter groups now, but min_lr has {len(self.min_lrs)} "
                                   f"values; set scheduler.min_lrs to one per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                _set(group, "lr", new)

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _set_momentum(group, use_beta1, value):
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _momentum_range(scheduler, optimizer, base_momentum, max_momentum, last_epoch):
    """Check the optimiser has a momentum (or beta1) to cycle; start it at ``max_momentum``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(f"{type(scheduler).__name__}: cycle_momentum needs an optimiser with "
                         f"momentum or betas ({type(optimizer).__name__} has neither); pass "
                         f"cycle_momentum=False")
    scheduler.use_beta1 = "betas" in optimizer.defaults
    bases = _per_group("base_momentum", optimizer, base_momentum)
    maxes = _per_group("max_momentum", optimizer, max_momentum)
    if last_epoch == -1:
        for top, bottom, group in zip(maxes, bases, optimizer.param_groups):
            _set_momentum(group, scheduler.use_beta1, top)
            group["max_momentum"] = top
            group["base_momentum"] = bottom
    return bases, maxes


class CyclicLR(LRScheduler):
    """The rate cycles between ``base_lr`` and ``max_lr`` (``step_size_up`` steps up,
    ``step_size_down`` down), in mode 'triangular', 'triangular2' (amplitude halved each
    cycle), 'exp_range' (scaled by ``gamma ** iteration``) or a ``scale_fn``; the momentum
    cycles the other way (``cycle_momentum``). Step it once a batch.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=0.1, momentum=0.9)
    >>> sched = lk.optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=1.0, step_size_up=2)
    >>> rates = [sched.get_last_lr()[0]]
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); rates.append(round(sched.get_last_lr()[0], 6))
    >>> rates
    [0.1, 0.55, 1.0, 0.55, 0.1]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is not 'triangular', 'triangular2' or "
                             f"'exp_range', and there is no scale_fn")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums, self.max_momentums = _momentum_range(
                self, optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        if self._scale_fn_custom is None and self.mode != "exp_range":
            self.scale_mode = "cycle"
        elif self._scale_fn_custom is None:
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The amplitude factor at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale = x / self.step_ratio
        else:
            scale = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (top - base) * scale * self.scale_fn(at)
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, base, top in zip(self.optimizer.param_groups, self.base_momentums,
                                        self.max_momentums):
                _set_momentum(group, self.use_beta1, top - (top - base) * scale
                              * self.scale_fn(at))
        return lrs

    def state_dict(self):
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) \
            else dict(fn.__dict__)
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_0`` epochs, then a restart;
    each period ``T_mult`` times longer than the last. ``step(epoch)`` may take a fractional
    epoch (``epoch + batch / batches``).

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=1.0)
    >>> sched = lk.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> rates = [sched.get_last_lr()[0]]
    >>> for _ in range(3):
    ...     opt.step(); sched.step(); rates.append(round(sched.get_last_lr()[0], 6))
    >>> rates
    [1.0, 0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min!r}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        _not_captured(self)
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            _set(group, "lr", lr)
        self._last_lr = _values(self.optimizer, "lr")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate rises from ``max_lr / div_factor`` to ``max_lr`` over the
    first ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then anneals
    ('cos' or 'linear') to ``max_lr / div_factor / final_div_factor`` (``three_phase``: back
    to the start first); the momentum moves the other way. Step it once a batch.

    >>> import labkit as lk
    >>> opt = lk.optim.SGD([lk.nn.Parameter(lk.zeros(1))], lr=0.1, momentum=0.9)
    >>> sched = lk.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    >>> for _ in range(3):
    ...     opt.step(); sched.step()
    >>> round(sched.get_last_lr()[0], 4), round(opt.param_groups[0]["momentum"], 4)
    (0.9505, 0.855)
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got "
                                 f"{total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(v, int) or v <= 0:
                    raise ValueError(f"Expected positive integer {name}, but got {v}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        up = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=last, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=last, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _momentum_range(self, optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, self.use_beta1, momentum)
        return lrs
