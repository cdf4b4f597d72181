"""``lk.amp.GradScaler``: loss scaling for float16 training, as PyTorch's ``torch.amp.GradScaler``.

float16's smallest normal value is about 6e-5, so small gradients flush to zero. The scaler
multiplies the loss by a large factor before ``backward()`` (``scale``), divides the gradients
by it again before the optimiser uses them (``unscale_``, or inside ``step``), skips a step
whose gradients hold an inf or NaN (the factor was too large: it is halved), and doubles the
factor after ``growth_interval`` steps without one (``update``). The same schedule as PyTorch's,
so the same losses give the same sequence of scales.

``scale`` is an op on the loss (it may run inside ``lk.function``: the scale is captured by
reference, so a captured step always reads the current one); ``unscale_``, ``step`` and ``update``
decide from the gradients' values in Python, so they run eagerly, after the captured part.
"""
import warnings

from ..autodiff import no_grad
from ..devices import gpu_count
from ..tensor.creation import full
from ..tensor.dtypes import float16, float32
from ..tensor.public.elementwise_math import isfinite
from ..tensor.tensor import Tensor

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients, and adapt the
    scale (PyTorch's ``torch.amp.GradScaler``, also ``lk.cuda.amp.GradScaler``).

    ``device``: 'cuda' (PyTorch's default; without a GPU the scaler switches itself off with a
    warning, as PyTorch's does) or 'cpu'. ``enabled=False`` makes every method pass through.

    >>> import labkit as lk
    >>> model = lk.nn.Linear(2, 1)
    >>> opt = lk.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = lk.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    >>> for x in (1.0, float("inf"), 1.0, 1.0):
    ...     opt.zero_grad()
    ...     loss = model(lk.full((1, 2), x)).sum()
    ...     scaler.scale(loss).backward()
    ...     scaler.step(opt)                       # skipped when a gradient is inf/NaN
    ...     scaler.update()
    ...     print(scaler.get_scale())
    1024.0
    512.0
    512.0
    1024.0
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = str(device)
        if enabled and self._device.startswith(("cuda", "gpu")) and gpu_count() == 0:
            warnings.warn(f"lk.amp.GradScaler is enabled for device {self._device!r}, but no "
                          f"GPU is available here. Disabling (it passes everything through); "
                          f"use GradScaler('cpu') to scale on the CPU.", stacklevel=2)
            enabled = False
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("GradScaler: growth_factor must be > 1.0")
            if not 0.0 < backoff_factor < 1.0:
                raise ValueError("GradScaler: backoff_factor must be between 0.0 and 1.0")
            if int(growth_interval) != growth_interval or growth_interval <= 0:
                raise ValueError("GradScaler: growth_interval must be a positive integer")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = None            # a float32 0-d tensor, made on the loss's device
        self._growth_tracker = 0      # steps since the last inf/NaN
        self._per_optimizer = {}      # id(optimizer) -> {"stage": ..., "found_inf": bool}

    # ---- scaling -------------------------------------------------------------------------------
    def scale(self, outputs):
        """``outputs`` (a tensor, or lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._scale = full((), self._init_scale, dtype=float32, device=outputs.device)
            scale = self._scale if self._scale.device is outputs.device else \
                self._scale.to(outputs.device)
            return outputs * scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale takes a tensor or a list/tuple of tensors, not "
                        f"{type(outputs).__name__}")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place, and note
        whether any holds an inf or NaN. Call it before clipping gradients; ``step`` then does not
        unscale again."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._state(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = 1.0 / self._scale.item()
        finite = True
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is float16:
                        raise ValueError("Attempting to unscale FP16 gradients: keep the "
                                         "parameters in float32 (autocast runs the ops in "
                                         "float16) so that their gradients are float32.")
                    g.mul_(inv_scale)
                    finite = finite and bool(isfinite(g).all().item())
        state["found_inf"] = not finite
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` with the gradients unscaled first, unless one of
        them holds an inf or NaN: then the step is skipped (returns None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale("step")
        state = self._state(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        out = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return out

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale`` if given, else halve it
        (``backoff_factor``) when a step this iteration found an inf/NaN, or double it
        (``growth_factor``) after ``growth_interval`` iterations in a row without one."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            value = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            value = self._scale.item()
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                value *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = float32.np.type(value * self._growth_factor)
                    if abs(float(grown)) != float("inf"):
                        value = float(grown)
                    self._growth_tracker = 0
        with no_grad():
            self._scale.fill_(value)       # in place: a captured scale() reads the new value
        self._per_optimizer = {}

    def _check_scale(self, what):
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{what}: no scale yet. Call scaler.scale(loss) (and "
                               f"backward() on it) before {what}().")

    # ---- the schedule's settings ---------------------------------------------------------------
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """The scale and the schedule (empty when disabled), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            with no_grad():
                self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __repr__(self):
        return (f"GradScaler(device={self._device!r}, scale={self.get_scale()}, "
                f"enabled={self._enabled})")


def device_scaler(device):
    """``GradScaler`` for one device, in PyTorch's older spelling without a device argument
    (``torch.cuda.amp.GradScaler``, ``torch.cpu.amp.GradScaler``)."""
    class DeviceGradScaler(GradScaler):
        __doc__ = (f"``lk.amp.GradScaler({device!r}, ...)`` under PyTorch's older name "
                   f"``torch.{device}.amp.GradScaler``.")

        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            super().__init__(device, init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)
    DeviceGradScaler.__name__ = DeviceGradScaler.__qualname__ = "GradScaler"
    return DeviceGradScaler
