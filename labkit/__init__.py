"""labkit: a notebook-first research toolkit for machine learning systems.

>>> import labkit as lk
>>> x = lk.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]
"""
from .errors import (ArgumentError, CheckpointError, ConstraintError, DeviceError, DTypeError,
                     GradError, IndexingError, LabkitError, NumericsError, ShapeError)
from . import devices
from .profiler import profile
from .devices import Device, device
from .tensor import *  # noqa: F401,F403
from .tensor import Tensor, op
from .tensor.checkpoint import save, load
from .autodiff import (custom_vjp, enable_grad, grad, gradcheck, inference_mode,
                       is_grad_enabled, is_inference_mode_enabled, jvp, no_grad, value_and_grad,
                       vjp, vmap)
from .autodiff.functional import stop_gradient
from .autodiff.jacobians import hessian, jacfwd, jacrev
from . import config
from .graph import (FrozenValueWarning, Function, Graph, GraphBreak, GraphError, SymbolicTensor,
                    TracingError, function, gradients, name_scope, placeholder)
from .graph import cond, scan, while_loop
from .graph import FIFOQueue, QueueClosedError, Variable, restore_variables, save_variables
from .graph.capture import colocate_with
from .graph.passes.placement import PlacementError
from . import distributions, fft, linalg
from . import nn, optim, data
from . import amp
from .amp import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from . import compiler, _dynamo
from .compiler import compile
from . import accelerator, backends, cpu, cuda, hub, multiprocessing, serialization
from .backends.cuda import get_float32_matmul_precision, set_float32_matmul_precision
from . import utils
from . import func
from . import viz
from . import dist
from . import distributed

__version__ = "0.1.0"

_LAZY = {"quantization", "ao"}   # imported when first used (``lk.quantization``), not with labkit


def __getattr__(name):
    import importlib
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    # lk.onnx takes a while to import (the onnx package): loaded when first named; without
    # onnx it imports and its export says what to install
    if name == "onnx":
        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
