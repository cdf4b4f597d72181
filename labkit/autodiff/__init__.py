"""Reverse-mode autodiff over the eager tape: backward, grad, value_and_grad, vjp, jvp,
custom gradients and a numerical gradient checker; vmap and the Jacobians built on it."""
from .custom import custom_vjp
from .engine import backward, gradients
from .functional import enable_grad, grad, is_grad_enabled, jvp, no_grad, value_and_grad, vjp
from .inference_mode import inference_mode, is_inference_mode_enabled
from .gradcheck import GradcheckError, gradcheck, numerical_vjp
from ..errors import DataDependentShapeError
from .batched import BatchedTensor, VmapError, VmapFallbackWarning, vmap

__all__ = ["backward", "gradients", "grad", "value_and_grad", "vjp", "jvp", "no_grad",
           "enable_grad", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled",
           "custom_vjp", "gradcheck", "numerical_vjp",
           "GradcheckError", "vmap", "BatchedTensor", "VmapError", "VmapFallbackWarning",
           "DataDependentShapeError"]
