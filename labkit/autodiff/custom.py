"""``lk.custom_vjp``: give a function your own gradient rule (JAX's API).

>>> import labkit as lk
>>> @lk.custom_vjp
... def clip_grad_identity(x):
...     return x
>>> clip_grad_identity.defvjp(lambda x: (x, None), lambda res, g: (g.clip(-1.0, 1.0),))
<custom_vjp clip_grad_identity>
>>> lk.grad(lambda x: (clip_grad_identity(x) * 5.0).sum())(lk.ones(2)).tolist()
[1.0, 1.0]
"""
import functools

from ..errors import GradError
from ..tensor import dispatch
from ..tensor.op import Op
from ..tensor.shape_rules import dtype_of, shape_of
from ..tensor.tensor import Tensor


_RECOMPUTE = object()   # residuals of a batched call: made again from the inputs when needed


class _Residuals:
    """Per-call holder for what ``fwd`` saved; passed as an attribute of the call's op.

    ``device`` is the call's device, so the tensors ``fwd`` sees are placed there (an array alone
    cannot tell virtual CPU devices apart)."""
    __slots__ = ("value", "device")

    def __init__(self, device=None):
        self.value = None
        self.device = device


class custom_vjp:
    """Wrap ``fun`` so that its gradient is given by ``bwd`` instead of being derived.

    ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, g) -> tuple``
    with one cotangent per positional argument (None for no gradient), in labkit ops. ``fun``
    returns one Tensor.
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None
        self._op = Op(f"custom_vjp[{getattr(fun, '__name__', 'fun')}]", self._kernel,
                      self._shape, self._vjp, batch=self._batch)

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __repr__(self):
        return f"<custom_vjp {getattr(self.fun, '__name__', 'fun')}>"

    def __call__(self, *args):
        if self.fwd is None:
            raise GradError(f"{self!r}: call .defvjp(fwd, bwd) before using it")
        device = next((a.device for a in args if isinstance(a, Tensor)), None)
        return self._op(*args, res=_Residuals(device))

    def _kernel(self, xp, *arrays, res):
        args = [Tensor._make(a, self._device_of(a, res)) if hasattr(a, "shape") and
                not isinstance(a, (int, float)) else a for a in arrays]
        with dispatch.grad_enabled(False):
            result = self.fwd(*args)
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Tensor)):
            got = type(result).__name__
            if isinstance(result, tuple):
                got += f" of length {len(result)}"
            raise GradError(
                f"{self!r}: fwd must return a pair (output tensor, residuals), but it returned "
                f"a {got}. Write fwd as: def fwd(x): return f(x), (saved, values)")
        out, res.value = result
        return out._data

    @staticmethod
    def _device_of(array, res):
        from ..devices import device_of_array
        d = res.device
        return d if d is not None and type(array) is d.array_type else device_of_array(array)

    def _shape(self, *args, res):
        from ..tensor.creation import zeros
        probe = [zeros(shape_of(a), dtype=dtype_of(a)) if hasattr(a, "shape") else a
                 for a in args]
        with dispatch.grad_enabled(False):
            out = self.fun(*probe)
        return out.shape, out.dtype

    def _batch(self, inputs, bdims, res):
        """Under lk.vmap: each example through this function in turn, so a gradient through the
        batch uses each example's own residuals; a per-example gradient (vmap of grad) makes
        them again from the batch in ``_vjp``."""
        from .batched import one_by_one
        res.value = _RECOMPUTE
        return one_by_one(self, self._op.name, inputs, bdims)

    def _vjp(self, g, out, *args, res):
        residuals = res.value
        if dispatch.is_grad_enabled() or residuals is _RECOMPUTE:
            # a recorded backward (grad of grad): residuals must depend on the inputs, so make
            # them again from the inputs with the tape on; the saved ones are plain values
            _, residuals = self.fwd(*args)
        grads = tuple(self.bwd(residuals, g))
        if len(grads) != len(args):
            raise GradError(f"{self!r}: bwd returned {len(grads)} cotangent(s) for {len(args)} "
                            f"argument(s)")
        return grads
