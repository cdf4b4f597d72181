"""Tensor, dtypes, the op declaration and registry, and every op (kernel + shape rule + vjp)."""
from . import eager  # noqa: F401  (installs eager mode as the bottom of the mode stack)
from . import methods  # noqa: F401  (attaches operators and methods to Tensor)
from . import profiling  # noqa: F401  (lets lk.profile() time eager ops)
from .creation import (arange, empty, empty_like, eye, from_dlpack, from_numpy, full, full_like,
                       linspace, logspace, ones, ones_like, tensor, tril_indices, triu_indices,
                       zeros, zeros_like)
from .dtypes import ALIASES as _DTYPE_ALIASES
from .dtypes import (DType, as_dtype, bfloat16, bool_, complex64, complex128, finfo, float16,
                     float32, float64, get_default_dtype, iinfo, int8, int16, int32, int64,
                     promote_types, result_type, set_default_dtype, uint8, uint16, uint32, uint64)
from .op import REGISTRY, Op, op
from .ops.conv import avg_pool2d, conv2d, max_pool2d
from .ops.composite import clip, flatten, mean, split, squeeze, stack, transpose, unsqueeze
from .ops.elementwise import (abs, add, cast, clone, div, eq, exp, ge, gt, le, log, logical_not,
                              lt, maximum, minimum, mul, ne, neg, pow, relu, sigmoid, sign, sqrt,
                              sub, tanh, where)
from .ops.index import gather, getitem, scatter_add, take
from .ops.linalg import matmul
from .ops.reduce import argmax, argmin, max, min, sum
from .ops.shape import broadcast_to, concat, permute, reshape
from .ops.state import assign, assign_add, assign_sub
from .random import (Generator, bernoulli, default_generator, get_rng_state, initial_seed,
                     manual_seed, multinomial, normal, rand, rand_like, randint, randint_like,
                     randn, randn_like, randperm, seed, set_rng_state)
from .tensor import Tensor
from .public import PUBLIC as _PUBLIC
from .public.comparisons import PUBLIC_COMPARISONS as _COMPARISONS

globals().update(_DTYPE_ALIASES)   # lk.float, lk.long ... as torch.float, torch.long ...
globals().update(_COMPARISONS)
globals().update(_PUBLIC)   # lk.<name> in PyTorch's signature (labkit/tensor/public)


def _checked():
    """The functions exported as they are defined (creation, random draws, take) fail with a
    LabkitError naming them and the argument at fault (``arguments.explained``), as the
    public functions do."""
    from .arguments import explained
    here = globals()
    for name in ("arange", "empty", "eye", "full", "linspace", "logspace", "ones", "zeros",
                 "tril_indices", "triu_indices", "tensor", "rand", "randn", "randint",
                 "normal", "bernoulli", "multinomial", "take"):
        if name in here:
            here[name] = explained(name, here[name], home="labkit")


_checked()
