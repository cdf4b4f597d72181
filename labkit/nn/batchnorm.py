"""``BatchNorm1d``, ``BatchNorm2d`` and ``BatchNorm3d``: per-channel normalisation with batch
statistics while training and running estimates (buffers) in eval mode, as PyTorch's.

The running statistics are buffers (``running_mean``, ``running_var``, ``num_batches_tracked``),
so they are in ``state_dict()``, move with ``.to()`` and are not trained. Training updates
them with ``momentum`` (``momentum=None``: a cumulative average over the batches seen) through
``assign`` ops, so a captured training step updates them on every run.

>>> import labkit as lk
>>> bn = lk.nn.BatchNorm1d(3)
>>> _ = bn(lk.randn(8, 3) * 2 + 5)
>>> [round(v, 1) for v in bn.running_mean.tolist()] != [0.0, 0.0, 0.0], int(bn.num_batches_tracked)
(True, 1)
>>> bn
BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
"""
from ..autodiff import no_grad
from ..errors import ShapeError, describe
from ..tensor.creation import ones, tensor, zeros
from ..tensor.dtypes import int64
from ..tensor.ops.elementwise import cast, div
from ..tensor.ops.state import assign_add
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class _NormBase(Module):
    """Affine parameters and running-statistic buffers shared by batch and instance norms."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(ones((num_features,), dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(zeros((num_features,), dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros((num_features,), dtype=dtype,
                                                       device=device))
            self.register_buffer("running_var", ones((num_features,), dtype=dtype,
                                                     device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._dims:
            wanted = " or ".join(f"{d}D" for d in self._dims)
            raise ShapeError(f"{type(self).__name__}: expected {wanted} input (got "
                             f"{describe(input)})")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims = ()

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise ShapeError(f"{self!r}: the input {describe(input)} has {input.shape[1]} "
                             f"channels (dimension 1), expected {self.num_features}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                count = assign_add(self.num_batches_tracked, 1)
            if self.momentum is None:           # cumulative average: 1 / batches seen so far
                factor = div(1.0, cast(count, dtype=self.running_mean.dtype.name))
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over N (and L), per channel."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) images over N, H and W, per channel."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) volumes, per channel."""
    _dims = (5,)
